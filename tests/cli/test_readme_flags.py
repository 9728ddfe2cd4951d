"""README flags no other test drove through the command line: `--version`, `--ollama`/`--vllm`/`--mlx`
(repeatable, replacing discovery), `--proxy` and `--proxy-upstream` (its default), `ietop proxy`'s
`--timeout` and `--quiet`, and `ietop replay --engine`.

The proxy's timeout itself (a 504, the upstream request cancelled) is tests/sources/test_proxy.py's; here the
flags must reach it. tests/README_CLAIMS.md maps every flag to its tests.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from ietop import __version__
from ietop.cli import build_parser, main
from ietop.pipeline.discover import Plan, plan
from parsers.events import ProxyRequest

INCIDENT = Path(__file__).resolve().parents[2] / "ietop" / "demo" / "incident.log"


def _plan(*argv: str) -> Plan:
    """What `ietop ARGV` watches: the parser's flags through discover.plan, as ietop.cli._live passes them."""
    a = build_parser().parse_args(list(argv))
    return plan(a.ollama, a.vllm, a.mlx, a.log, a.journal, a.docker, proxy=a.proxy, proxy_upstream=a.proxy_upstream)


def test_version_prints_the_version_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"ietop {__version__}"


def test_engine_urls_are_polled_as_given_and_replace_discovery() -> None:
    p = _plan("--ollama", "http://gpu-box:11434", "--ollama", "127.0.0.1:11500", "--vllm", "http://v:8000",
              "--mlx", "m:8080")
    assert p.endpoints == [("ollama", "http://gpu-box:11434"), ("ollama", "http://127.0.0.1:11500"),
                           ("vllm", "http://v:8000"), ("mlx", "http://m:8080")]
    assert p.discovered == set()  # nothing guessed: the default ports are not polled
    assert p.logs == [] and p.journals == []
    # Without them, discovery: the three default endpoints, hidden until they answer.
    bare = _plan()
    assert {engine for engine, _ in bare.endpoints} == {"ollama", "vllm", "mlx"}
    assert bare.discovered == {url for _, url in bare.endpoints}


def test_proxy_listens_on_loopback_unless_a_host_is_given_and_forwards_to_the_first_engine() -> None:
    p = _plan("--mlx", "m:8080", "--vllm", "http://v:8000", "--proxy", "11435")
    assert p.proxy == "127.0.0.1:11435"
    # "default: the first engine polled": engines are polled Ollama, vLLM, MLX, whatever the flags' order.
    assert p.endpoints[0] == ("vllm", "http://v:8000") and p.proxy_upstream == "http://v:8000"
    p = _plan("--ollama", "http://o:11434", "--proxy", "0.0.0.0:9000", "--proxy-upstream", "http://elsewhere:1")
    assert (p.proxy, p.proxy_upstream) == ("0.0.0.0:9000", "http://elsewhere:1")


def _proxy_run(monkeypatch: pytest.MonkeyPatch, *flags: str) -> dict[str, Any]:
    """`ietop proxy FLAGS` up to the server: what run_proxy was asked to do (it would serve forever)."""
    import ietop.sources.proxy as proxy

    asked: dict[str, Any] = {}

    def run_proxy(listen: str, upstream: str, jsonl: str | None, on_request: Any, **kwargs: Any) -> None:
        asked.update(listen=listen, upstream=upstream, jsonl=jsonl, on_request=on_request, **kwargs)

    monkeypatch.setattr(proxy, "run_proxy", run_proxy)
    assert main(["proxy", "--upstream", "http://127.0.0.1:11434", "--no-config", *flags]) == 0
    return asked


MEASURED = ProxyRequest(0, datetime(2026, 11, 29, 12, 0, 1, tzinfo=timezone.utc), "POST", "/api/chat", 200,
                        "llama3:8b", True, 0.1, 0.25, 0.02, 2.0, 80, 120, 80, 0, None, 300, 4000, None)


def test_proxy_timeout_reaches_the_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _proxy_run(monkeypatch)["timeout"] == 600.0  # "upstream timeout (600 s)"
    assert _proxy_run(monkeypatch, "--timeout", "2.5")["timeout"] == 2.5


def test_proxy_prints_a_line_per_request_unless_quiet(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    loud = _proxy_run(monkeypatch)["on_request"]
    assert loud is not None
    loud(MEASURED)
    (line,) = capsys.readouterr().err.splitlines()
    assert "llama3:8b" in line and "/api/chat" in line
    assert _proxy_run(monkeypatch, "--quiet")["on_request"] is None


def test_replay_engine_skips_detection_and_a_wrong_one_is_refused_before_the_screen(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`ietop replay --engine E`: the demo incident is an Ollama log; read as MLX it is refused with one line
    naming the engine it looks like (exit 1), before any dashboard opens."""
    from ietop.tui.run import replay_app

    assert main(["replay", "--no-config", "--engine", "mlx", str(INCIDENT)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert "--engine mlx" in line and "looks like ollama" in line
    app = replay_app([str(INCIDENT)], 0, "ollama")
    assert [s.engine for s in app.store.sources] == ["ollama"]


def test_demo_report_is_the_analyze_report_of_the_incident(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--report", "--no-config"]) == 0
    demo = capsys.readouterr().out
    assert main(["analyze", "--no-config", str(INCIDENT)]) == 0
    analyze = capsys.readouterr().out
    assert "gemma3:27b" in demo and "evicted" in demo
    # Byte for byte: the probe summary's order varied from run to run (polars' group_by order) until it was
    # sorted by count, then path.
    assert demo == analyze


def test_demo_replays_at_10x_in_the_15_minute_window_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ietop demo [--speed N]`: what the dashboard is built with (it is not run: no terminal here)."""
    import ietop.tui.run as run

    asked: list[dict[str, Any]] = []

    class Shown:
        return_code = 0

        def run(self) -> None:
            pass

    def replay_app(paths: list[str], speed: float, engine: str | None = None, **kwargs: Any) -> Shown:
        asked.append(dict(paths=[Path(p).name for p in paths], speed=speed, engine=engine, **kwargs))
        return Shown()

    monkeypatch.setattr(run, "replay_app", replay_app)
    assert main(["demo", "--no-config"]) == 0
    assert main(["demo", "--no-config", "--speed", "30"]) == 0
    assert [(a["paths"], a["speed"], a["window_index"]) for a in asked] == [
        (["incident.log"], 10.0, 2), (["incident.log"], 30.0, 2)]
