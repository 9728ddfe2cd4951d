"""Smoke test of bench/ingest_instructions.py on a small real log: it counts, and only the ingest section."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOG = REPO / "fixtures" / "ollama" / "049-v04-journald-debug-load-done-request-idle-timer.log"

pytestmark = pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("callgrind_control") is None,
                                reason="needs valgrind")


def test_counts_the_ingest_of_a_real_log() -> None:
    done = subprocess.run([sys.executable, str(REPO / "bench" / "ingest_instructions.py"), "--log", str(LOG)],
                          capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    m = re.search(r"([\d,]+) instructions for ([\d,]+) lines: ([\d,]+) per line", done.stdout)
    assert m is not None, done.stdout
    instructions, lines, per_line = (int(g.replace(",", "")) for g in m.groups())
    with LOG.open("rb") as f:
        assert lines == sum(1 for _ in f)
    # Imports alone are hundreds of millions of instructions: a count this small is the ingest section only.
    assert 0 < instructions < 200_000_000 and per_line > 1000
