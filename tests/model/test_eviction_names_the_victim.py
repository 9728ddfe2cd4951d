"""An eviction whose decision line names no model (`max runners achieved, unloading one to make room`, `…predicted
to exceed available memory, evicting`) learns its victim from the DEBUG line after it: with several models
resident, that victim, and only it, stops being resident (the Residency panel once kept every victim)."""

from __future__ import annotations

from pathlib import Path

from ietop.model.store import Store
from ietop.model.store_records import ListSink
from ietop.pipeline.ingest import run_files

SEED = Path(__file__).resolve().parents[2] / "fixtures" / "synthetic" / "seed-budget.log"


def _resident_after(seconds: float) -> set[str]:
    store = Store(ListSink())
    # The log's clock starts at 2026-11-30T09:00:00Z; --until cuts it where the test looks.
    run_files(store, [str(SEED)], until=1796029200.0 + seconds)
    return set(store.loads.resident)


def test_the_victim_alone_stops_being_resident() -> None:
    # 09:02:00 the embedder evicts vision while workhorse and vision are resident.
    assert _resident_after(119) == {"workhorse:35b-q4", "vision:27b-q8"}
    assert _resident_after(150) == {"workhorse:35b-q4", "embedder:0.3b"}
    # 09:03:20 vision comes back in the embedder's place.
    assert _resident_after(300) == {"workhorse:35b-q4", "vision:27b-q8"}
    # 09:06:40 the reasoner evicts both chat models (two decision lines, two victims).
    assert _resident_after(500) == {"reasoner:120b-q4"}
    assert _resident_after(10_000) == {"workhorse:35b-q4"}
