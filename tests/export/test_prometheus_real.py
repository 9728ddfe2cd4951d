"""A real Prometheus (Debian's package; .ci/run installs it) scraping the real `ietop export` every second while a
log is appended: its sums equal `ietop analyze --json` on the same log, every query of the Grafana dashboard
evaluates, and a restart of the exporter adds nothing that did not happen (no reset, no increase)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.e2e_support.procs import free_port
from tests.export.export_support import ROOT, analyze_sums
from tests.export.prometheus_support import Prometheus, needs_prometheus, running_child, running_prometheus
from tests.export.test_examples import dashboard, dashboard_queries, promql, variables

pytestmark = needs_prometheus
SEED = ROOT / "fixtures" / "synthetic" / "seed-budget.log"
DEMO = ROOT / "ietop" / "demo" / "incident.log"


def _export_argv(log: Path, port: int) -> list[str]:
    return [sys.executable, "-m", "ietop", "export", "--log", f"ollama:{log}", "--listen", f"127.0.0.1:{port}"]


def _sums_equal(prom: Prometheus, want: dict[str, float]) -> None:
    for name, value in want.items():
        prom.wait_for_value(f"sum({name}) or vector(0)", value)


def test_prometheus_sums_equal_analyze_while_the_log_grows(tmp_path: Path) -> None:
    text = DEMO.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    live = tmp_path / "server.log"
    live.write_text("".join(lines[: len(lines) // 3]), encoding="utf-8")
    port = free_port()
    with running_child(_export_argv(live, port), ready_url=f"http://127.0.0.1:{port}/metrics", logs=tmp_path,
                       cwd=ROOT), running_prometheus(tmp_path / "prom", [f"127.0.0.1:{port}"]) as prom:
        prom.wait_for_scrapes()
        _sums_equal(prom, analyze_sums([live]))
        # The rest of the incident arrives in pieces, as a server writes it.
        rest = lines[len(lines) // 3:]
        step = max(1, len(rest) // 4)
        for i in range(0, len(rest), step):
            with live.open("a", encoding="utf-8") as f:
                f.write("".join(rest[i:i + step]))
            time.sleep(1.0)
        _sums_equal(prom, analyze_sums([DEMO]))
        names = list(variables(dashboard()))
        for _title, expr in dashboard_queries():
            prom.query(promql(expr, names))  # raises QueryError with the expression when Prometheus refuses it
        assert prom.value('count(ietop_hint_active{id="prompt-truncated"})') == 1.0


def test_a_restart_of_the_exporter_adds_nothing(tmp_path: Path) -> None:
    want = analyze_sums([SEED])
    port = free_port()
    argv = _export_argv(SEED, port)
    with running_prometheus(tmp_path / "prom", [f"127.0.0.1:{port}"]) as prom:
        with running_child(argv, ready_url=f"http://127.0.0.1:{port}/metrics", logs=tmp_path / "first", cwd=ROOT):
            _sums_equal(prom, want)
            prom.wait_for_scrapes(scrapes=3)
        # Down for a few scrapes, then the same exporter again on the same log.
        time.sleep(3.0)
        with running_child(argv, ready_url=f"http://127.0.0.1:{port}/metrics", logs=tmp_path / "second", cwd=ROOT):
            prom.wait_for("up{job='ietop'}", lambda samples: bool(samples) and samples[0].value == 1.0,
                          what="the exporter scraped again")
            prom.wait_for_scrapes(scrapes=3)
            _sums_equal(prom, want)
            window = "[2m]"
            for name in want:
                assert prom.value(f"sum(resets({name}{window})) or vector(0)") == 0.0, name
            # Everything happened before the first start: over the restart nothing was added.
            loads = prom.value(f"sum(increase(ietop_model_loads_total{window})) or vector(0)")
            assert loads == pytest.approx(0.0, abs=1e-9)

