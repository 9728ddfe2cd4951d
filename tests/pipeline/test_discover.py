"""Discovery: what `ietop` watches with no flags, and how the flags are read."""

from __future__ import annotations

from pathlib import Path

import pytest

from ietop.pipeline.discover import ollama_log, ollama_url, parse_log_arg, plan


@pytest.mark.parametrize(("value", "url"), [
    ("", "http://127.0.0.1:11434"),
    ("0.0.0.0", "http://127.0.0.1:11434"),
    ("0.0.0.0:11500", "http://127.0.0.1:11500"),
    ("gpu-box:11434", "http://gpu-box:11434"),
    ("http://10.0.0.5:9000/", "http://10.0.0.5:9000"),
    ("https://ollama.internal", "https://ollama.internal:11434"),
])
def test_ollama_host_is_read_as_ollama_reads_it(value: str, url: str) -> None:
    assert ollama_url({"OLLAMA_HOST": value}) == url


@pytest.mark.parametrize(("arg", "expected"), [
    ("ollama:/var/log/ollama.log", ("ollama", "/var/log/ollama.log")),
    ("vllm:server.log", ("vllm", "server.log")),
    ("/var/log/x.log", (None, "/var/log/x.log")),
    ("C:\\Users\\me\\server.log", (None, "C:\\Users\\me\\server.log")),
    ("-", (None, "-")),
])
def test_log_argument(arg: str, expected: tuple[str | None, str]) -> None:
    assert parse_log_arg(arg) == expected


def test_no_flags_polls_the_default_ports_hidden_until_they_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    p = plan([], [], [], [], [], [])
    assert ("ollama", "http://127.0.0.1:11434") in p.endpoints
    assert ("vllm", "http://127.0.0.1:8000") in p.endpoints
    assert ("mlx", "http://127.0.0.1:8080") in p.endpoints
    assert p.discovered == {u for _e, u in p.endpoints}


def test_flags_replace_discovery() -> None:
    p = plan(["127.0.0.1:11434"], ["http://gpu:8000"], [], ["mlx:/tmp/m.log", "-"], ["ollama"], ["c1"])
    assert p.endpoints == [("ollama", "http://127.0.0.1:11434"), ("vllm", "http://gpu:8000")]
    assert p.discovered == set()
    assert p.logs == [("mlx", "/tmp/m.log"), ("", "-")]
    assert p.journals == [("ollama", "ollama")] and p.dockers == [("ollama", "c1")]


def test_ollama_log_location_per_os(tmp_path: Path) -> None:
    log = tmp_path / ".ollama" / "logs" / "server.log"
    assert ollama_log("darwin", home=tmp_path) is None
    log.parent.mkdir(parents=True)
    log.write_text("")
    assert ollama_log("darwin", home=tmp_path) == ("file", str(log))
    win = tmp_path / "AppData" / "Ollama" / "server.log"
    win.parent.mkdir(parents=True)
    win.write_text("")
    assert ollama_log("win32", env={"LOCALAPPDATA": str(tmp_path / "AppData")}) == ("file", str(win))
    assert ollama_log("win32", env={}) is None
