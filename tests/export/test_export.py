"""`ietop export` as a user runs it: a child process serving /metrics, whose counters must equal what
`ietop analyze --json` reports for the same log (a log of one server run; of several, the last run), survive a
restart of the exporter unchanged, reset with a restart of the engine, and grow as the log is appended."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.export.export_support import ROOT, analyze_sums, exporter

SUMS = ("ietop_model_loads_total", "ietop_evictions_total", "ietop_prompt_truncations_total", "ietop_requests_total")
ONE_RUN = [
    ("ollama", "fixtures/synthetic/seed-budget.log"),  # loads, evictions with cause, cold loads (synthetic)
    ("ollama", "ietop/demo/incident.log"),  # the demo: loads, evictions, truncations, 499s
    ("ollama", "fixtures/ollama/066-supp-v07-journald-truncation-long-chat-latency.log"),
    ("ollama", "fixtures/ollama/015-v011-docker-embeddinggemma-second-load-v1-chat.log"),  # starts mid-load
    ("vllm", "fixtures/vllm/real-basic-server.log"),  # a real vLLM run, ending in its shutdown lines
    ("vllm", "fixtures/vllm/real-served-name-server.log"),
    ("mlx", "fixtures/mlx/real-stream-no-usage-server.log"),  # a real mlx_lm.server run
]


def _wait_sums(ex: Any, want: dict[str, float]) -> None:
    for name, value in want.items():
        ex.wait_for(name, value)


@pytest.mark.parametrize(("engine", "path"), ONE_RUN, ids=[Path(p).name for _e, p in ONE_RUN])
def test_a_saved_logs_totals_equal_analyze(engine: str, path: str) -> None:
    want = analyze_sums([ROOT / path])
    with exporter("--log", f"{engine}:{path}") as ex:
        _wait_sums(ex, want)
        # And nothing more arrives: the totals hold on the next scrapes.
        assert {name: ex.total(name) for name in SUMS} == want
    # SIGTERM: exit 0, having said its start line and nothing else (no traceback from a feed at shutdown).
    assert ex.returncode == 0 and ex.stderr.count("\n") == 1, ex.stderr  # type: ignore[attr-defined]


def test_a_log_of_two_runs_serves_the_last_run() -> None:
    path = ROOT / "fixtures" / "mlx" / "real-two-runs-server.log"
    starts = [
        line.split(" - ")[0].replace(" ", "T").replace(",", ".")
        for line in path.read_text(encoding="utf-8").splitlines()
        if "Starting httpd" in line
    ]
    assert len(starts) == 2
    want = analyze_sums([path], since=starts[1])
    assert want["ietop_requests_total"] < analyze_sums([path])["ietop_requests_total"]  # the first run is left out
    with exporter("--log", f"mlx:{path}") as ex:
        _wait_sums(ex, want)


def _counters(ex: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (name, tuple(sorted(labels.items()))): value
        for name, samples in ex.samples().items()
        if name.endswith(("_total", "_created")) and not name.startswith("ietop_log_")
        for labels, value in samples
    }


def test_restarting_the_exporter_rebuilds_the_same_counters() -> None:
    path = "fixtures/synthetic/seed-budget.log"
    want = analyze_sums([ROOT / path])
    with exporter("--log", f"ollama:{path}") as first:
        _wait_sums(first, want)
        before = _counters(first)
    assert first.returncode == 0  # type: ignore[attr-defined]  # SIGTERM: a clean exit
    with exporter("--log", f"ollama:{path}") as second:
        _wait_sums(second, want)
        after = _counters(second)
    # The same totals and the same `_created` (the run's start): Prometheus sees no reset and no new increase.
    assert before == after and any(name.endswith("_created") for name, _ in before)


def _split(log: Path, at: str) -> tuple[str, str]:
    text = log.read_text(encoding="utf-8")
    cut = text.index(at)
    return text[:cut], text[cut:]


def test_an_appended_log_is_counted_as_it_grows(tmp_path: Path) -> None:
    seed = ROOT / "fixtures" / "synthetic" / "seed-budget.log"
    head, tail = _split(seed, "time=2026-11-30T09:06:40")  # before the reasoner's load
    live = tmp_path / "server.log"
    live.write_text(head, encoding="utf-8")
    with exporter("--log", f"ollama:{live}") as ex:
        _wait_sums(ex, analyze_sums([live]))
        with live.open("a", encoding="utf-8") as f:
            f.write(tail)
        _wait_sums(ex, analyze_sums([seed]))


def test_an_engine_restart_is_a_counter_reset(tmp_path: Path) -> None:
    seed = ROOT / "fixtures" / "synthetic" / "seed-budget.log"
    live = tmp_path / "server.log"
    shutil.copy(seed, live)
    with exporter("--log", f"ollama:{live}") as ex:
        _wait_sums(ex, analyze_sums([seed]))
        created = {labels.get("model"): v for labels, v in ex.samples()["ietop_model_loads_created"]}
        # The server restarts (its start lines again, a day later) and loads one model.
        restart = [
            line.replace("2026-11-30T09:0", "2026-12-01T09:0")
            for line in seed.read_text().splitlines()
            if "routes.go" in line or "types.go" in line or "time=2026-11-30T09:00:1" in line
        ]
        with live.open("a", encoding="utf-8") as f:
            f.write("\n".join(restart) + "\n")
        ex.wait_for("ietop_model_loads_total", 1.0)
        new_created = {labels.get("model"): v for labels, v in ex.samples()["ietop_model_loads_created"]}
        unloads = ex.samples().get("ietop_model_unloads_total", [])
    assert set(new_created) == {"workhorse:35b-q4"}
    # What the old server held was unloaded by the restart: the old run's end, not the new run's first unload.
    assert unloads == []
    assert new_created["workhorse:35b-q4"] > created["workhorse:35b-q4"] + 86_000  # the new run's start


class _FakeOllama(BaseHTTPRequestHandler):
    ps: ClassVar[bytes] = b""

    def do_GET(self) -> None:
        body = {"/api/ps": self.ps, "/api/version": b'{"version":"0.12.3"}', "/": b"Ollama is running"}.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.end_headers()
        self.wfile.write(body or b"")

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def two_hosts() -> Iterator[list[str]]:
    bodies = [
        (ROOT / "fixtures" / "ollama" / "api" / name).read_bytes()
        for name in ("ps-v0.10-two-models.json", "ps-pre-v0.10-nirmato13.json")
    ]
    servers = []
    for host, body in zip(("127.0.0.2", "127.0.0.3"), bodies, strict=True):
        handler = type(f"Fake{host}", (_FakeOllama,), {"ps": body})
        server = ThreadingHTTPServer((host, 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    try:
        yield [f"http://{s.server_address[0]}:{s.server_address[1]}" for s in servers]
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()


def test_two_engines_on_two_hosts_are_two_instances(two_hosts: list[str]) -> None:
    args = [a for url in two_hosts for a in ("--ollama", url)]
    with exporter(*args, "--interval", "0.5") as ex:
        ex.wait_for("ietop_engine_up", 2.0)
        up = {labels["instance"] for labels, v in ex.samples()["ietop_engine_up"] if v == 1}
        assert up == {url.removeprefix("http://") for url in two_hosts}
        resident = ex.samples()["ietop_model_resident"]
        by_host = {labels["instance"] for labels, _v in resident}
        assert by_host == up and len(resident) >= 3  # two models on one host, at least one on the other
    # SIGTERM: exit 0, and its start line is all it said (no warning of a task left pending at exit).
    assert ex.returncode == 0 and ex.stderr.count("\n") == 1, ex.stderr  # type: ignore[attr-defined]
    assert ex.stderr.startswith("ietop export: serving http://127.0.0.1:")  # type: ignore[attr-defined]


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool not installed (.ci/run installs Debian's prometheus package)"
)
def test_promtool_accepts_the_exposition() -> None:
    with exporter("--log", "ollama:ietop/demo/incident.log") as ex:
        ex.wait_for("ietop_prompt_truncations_total", 4.0)
        text = ex.scrape()
    done = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_openmetrics_when_the_scraper_asks_for_it() -> None:
    with exporter("--log", "ollama:fixtures/synthetic/seed-budget.log") as ex:
        ex.wait_for("ietop_model_loads_total", 6.0)
        text = ex.scrape("application/openmetrics-text; version=1.0.0; charset=utf-8")
    assert text.rstrip().endswith("# EOF")
    assert "ietop_model_loads_created{" in text  # the run's start, as OpenMetrics states a counter's creation


def test_a_remote_address_needs_allow_remote(capsys: pytest.CaptureFixture[str]) -> None:
    from ietop.cli import main

    assert main(["export", "--listen", "0.0.0.0:9464", "--log", "ollama:ietop/demo/incident.log"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a loopback address" in err


def test_the_exporter_never_imports_textual() -> None:
    code = (
        "import sys, ietop.cli_export, ietop.export.serve, ietop.export.families; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich') or m.startswith('ietop.tui')]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_counter_is_served_until_the_read_back_is_done(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A partial total after a restart would read as a reset to Prometheus: until every log has been read back to
    where it ended at start, a scrape gets the gauges but no counter. (The store is slowed down here so that the
    read-back takes several scrapes on any machine.)"""
    import asyncio
    import time

    from ietop.export import serve
    from ietop.pipeline.discover import plan

    log = tmp_path / "server.log"
    shutil.copy(ROOT / "ietop" / "demo" / "incident.log", log)
    slow = serve.Exporter.apply

    def apply(self: serve.Exporter, batch: Any) -> None:
        time.sleep(0.05)
        slow(self, batch)

    monkeypatch.setattr(serve.Exporter, "apply", apply)
    monkeypatch.setattr("ietop.pipeline.feeds.READ_BYTES", 4096)  # many small batches
    exporter = serve.Exporter(plan([], [], [], [f"ollama:{log}"], [], []))
    thread = threading.Thread(target=lambda: asyncio.run(exporter.run()), daemon=True)
    thread.start()
    seen: list[tuple[bool, float | None]] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            body, _type = exporter.exposition("")
            names = {f.name: f for f in text_string_to_metric_families(body.decode())}
            loads = names.get("ietop_model_loads")
            seen.append((exporter.caught_up, None if loads is None else sum(s.value for s in loads.samples
                                                                                if s.name.endswith("_total"))))
            if exporter.caught_up and loads is not None:
                break
            time.sleep(0.02)
    finally:
        exporter.stop()
        thread.join(timeout=10)
    before = [total for done, total in seen if not done]
    assert before and all(total is None for total in before)  # scrapes during the read-back: no counter at all
    assert seen[-1] == (True, analyze_sums([log])["ietop_model_loads_total"])


def test_hostile_model_names_stay_label_values(tmp_path: Path) -> None:
    """Model names are log text: quotes, backslashes, newlines and escape sequences in them must come out as
    escaped label values of a valid exposition, never as extra series or broken lines."""
    seed = (ROOT / "fixtures" / "synthetic" / "seed-budget.log").read_text(encoding="utf-8")
    hostile = 'vision"} 1\\nfake_total 9 \\x1b[2J:27b'
    log = tmp_path / "server.log"
    log.write_text(seed.replace("vision:27b-q8", hostile), encoding="utf-8")
    with exporter("--log", f"ollama:{log}") as ex:
        ex.wait_for("ietop_model_loads_total", 6.0)
        text = ex.scrape()
        models = {labels.get("model") for labels, _v in ex.samples()["ietop_model_loads_total"]}
    assert not any(line.startswith("fake_total") for line in text.splitlines())
    assert any(m is not None and m.startswith('vision"}') for m in models), models
    if shutil.which("promtool"):
        done = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True,
                              check=False)
        assert done.returncode == 0, done.stdout + done.stderr
