"""Smoke test of bench/append_to_screen.py with a few lines: every appended line reaches the Requests table
(the script raises after 5 s without it) and the report is written. Nothing is timed here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "append_to_screen.py"


def test_few_lines_reach_the_screen_and_are_reported(tmp_path: Path) -> None:
    out = tmp_path / "append.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "-n", "3", "--out", str(out)],
                          capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["n"] == 3 and report["target_s"] == 0.25
    assert len(report["samples"]["dashboard"]) == len(report["samples"]["tailer"]) == 3
    assert set(report["dashboard"]) == {"p50_s", "p95_s", "max_s", "mean_s"}
    assert all(s > 0 for s in report["samples"]["dashboard"])
