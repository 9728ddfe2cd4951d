"""Each command starts with the collector settings ietop/runtime.py argues for: the dashboard collects the
young generation less often than CPython's default, analyze and proxy (no UI) much less."""

from __future__ import annotations

import subprocess
import sys

from ietop.runtime import DASHBOARD_GEN0_THRESHOLD, RAISED_GEN0_THRESHOLD

CHILD = """
import gc, sys
from ietop import cli
from ietop.runtime import tune_gc
tune_gc(raise_threshold=sys.argv[1] == "1")
print(gc.get_threshold()[0], gc.get_freeze_count() > 0)
"""


def _threshold(raise_threshold: bool) -> tuple[int, bool]:
    out = subprocess.run([sys.executable, "-c", CHILD, "1" if raise_threshold else "0"], capture_output=True,
                         text=True, check=True).stdout.split()
    return int(out[0]), out[1] == "True"


def test_dashboard_and_batch_commands_get_their_thresholds() -> None:
    assert _threshold(False) == (DASHBOARD_GEN0_THRESHOLD, True)
    assert _threshold(True) == (RAISED_GEN0_THRESHOLD, True)
    assert 700 < DASHBOARD_GEN0_THRESHOLD < RAISED_GEN0_THRESHOLD

