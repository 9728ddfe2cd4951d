"""The residency timeline fits the screen it opens on: its lane takes what the other columns leave (at most
60 cells), so "load cost", "resident" and "ended" are never cut to "l…" (they were at 120 columns once model
names ran long), and a lane that spans days says the dates at its ends. The log is the bundled incident
(Ollama 0.32.13: qwen3:8b evicted for gemma3:27b and back, then an expiry)."""

from __future__ import annotations

import dataclasses

import pytest
from rich.console import Console

from ietop.model.snapshot import Snapshot
from ietop.pipeline.ingest import run_files
from ietop.pipeline.setup import new_store
from ietop.tui.screens.timeline import MIN_LANE, WIDTH, _Fitted
from tests.tui.support import INCIDENT


def _snap() -> Snapshot:
    store, view, _evidence = new_store()
    run_files(store, [str(INCIDENT)])
    return view.snapshot(store.now, 900)


def _render(renderable: object, width: int) -> list[str]:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text().splitlines()


@pytest.mark.parametrize("width", [70, 90, 110, 160])
def test_no_column_is_cut(width: int) -> None:
    # 70: the modal's content on an 80-column terminal; 110: on 120 columns.
    lines = _render(_Fitted(_snap()), width)
    text = "\n".join(lines)
    assert "…" not in text
    assert "load cost" in lines[0] and "resident" in lines[0] and "ended" in lines[0]
    assert "14:01:16Z → 14:12:21Z" in text  # the lane's ends: over it, or in the caption when it is narrow
    assert all(f"ollama:{m}" in text for m in ("qwen3:8b", "gemma3:27b"))
    assert text.count("gemma3:27b") == 2 and "1m49s" in text and "12.4s" in text
    bars = [len(line.split("ollama:", 1)[1].split()[1]) for line in lines if "ollama:" in line]
    assert bars and MIN_LANE // 2 <= max(bars) <= WIDTH


def test_a_lane_over_days_dates_its_ends() -> None:
    snap = _snap()
    later = dataclasses.replace(snap, now=snap.now + 3 * 86_400)
    head = _render(_Fitted(later), 160)[0]
    assert "2026-11-28 14:01Z →" in head and "2026-12-01" in head
    assert "→" in _render(_Fitted(snap), 160)[0] and "2026" not in _render(_Fitted(snap), 160)[0]
