"""`ietop compare --by-run` on a REAL log with two server starts: fixtures/mlx/real-two-runs-server.log, recorded
by tests/e2e/record_two_runs.py (mlx_lm.server 0.32.2, --max-tokens 48 then 12, three chats each). The clients'
usage blocks said 48 completion tokens per answer in run 1 and 12 in run 2; the seeds' lesson must read off
the comparison: latency fell because output tokens fell, not the decode rate."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ietop.cli import main

LOG = Path(__file__).resolve().parents[2] / "fixtures" / "mlx" / "real-two-runs-server.log"
USAGE_COMPLETION = (48, 12)
"""What the client's usage blocks said each run's answers had (every answer of a run alike)."""


def test_two_real_runs_compared(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--by-run", "--json", str(LOG)]) == 0
    doc = json.loads(capsys.readouterr().out)
    (cmp,) = doc["comparisons"]
    lines = LOG.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines, 1) if "Starting httpd at" in line]
    assert [cmp["before"]["run_line"], cmp["after"]["run_line"]] == starts
    assert cmp["before"]["requests"] == cmp["after"]["requests"] == 3
    out = cmp["overall"]["metrics"]["output_tokens_p50"]
    assert (out["before"], out["after"]) == USAGE_COMPLETION
    # Each run listened where its own start line says: the configuration each ran with, with its line.
    for side in (cmp["before"], cmp["after"]):
        line = side["config"]["evidence"]["effective"]["listen"]["line"]
        port = re.search(r"on port (\d+)", lines[line - 1])
        assert port is not None and side["config"]["effective"]["listen"].endswith(f":{port.group(1)}")
    why = cmp["overall"]["why"]
    assert why["latency"] == "fell" and why["because"] == ["output_tokens"]
    assert "decode rate unchanged" in why["text"]
