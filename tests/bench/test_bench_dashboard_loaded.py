"""Smoke test of bench/dashboard_loaded.py on a small SYNTHETIC log: the whole burst reaches the store, the
appended lines reach the screen (the script raises otherwise) and the report is written. Nothing is
timed here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "dashboard_loaded.py"


def test_a_small_full_view_is_measured_and_reported(tmp_path: Path) -> None:
    out = tmp_path / "loaded.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--size", "1M", "--idle", "1", "--appends", "2",
                           "--out", str(out)], capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    full, empty = report["full"], report["empty"]
    assert full["burst"]["lines"] > 1000 and full["burst"]["lines_per_s"] > 0
    assert full["requests_kept"] > 0 and "burst" not in empty
    assert report["pipeline_lines_per_s"] > 0
    for view in (full, empty):
        assert view["idle_cpu_pct"] >= 0 and 0 < view["append_s"]["p50"] <= view["append_s"]["max"]
        # Each appended line was drawn: at least one redraw whose whole cost the pacer heard of.
        redraws = view["append_redraws"]
        assert redraws["count"] >= 2 and 0 < redraws["cost_p50_s"] <= redraws["cost_max_s"]
