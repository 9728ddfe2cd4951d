"""The dashboard's memory stays flat however long it runs (issue 21): the bounded form of bench/soak.py.

A SYNTHETIC busy log (bench/gen_ollama_log.py, weeks of virtual time) is replayed at speed 0 through the
dashboard's own pipeline (ReplayFeed → store → LiveView). The tables' bounds are made small so they fill in the
first third of the log; from then on, anything kept per line or per request shows as growth. The measure is the
number of live objects of the model's types (gc), compared with its own value at one third: counts, not seconds or bytes,
so a busy machine cannot change the verdict. bench/soak.py runs the same at 1 GB and samples RSS."""

from __future__ import annotations

import gc
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import ietop.model.live as live
from ietop.model.hints import types as hint_types
from ietop.pipeline.clock import ReplayClock
from ietop.pipeline.feeds import Batch, ReplayFeed
from ietop.pipeline.setup import new_store

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def busy_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("soak") / "busy-synthetic.log"
    subprocess.run([sys.executable, str(ROOT / "bench/gen_ollama_log.py"), str(path), "--size", "40M", "--seed",
                    "7", "--profile", "busy", "--meta", "-"], check=True, capture_output=True, timeout=300)
    return path


def _records() -> int:
    """Live objects of the model's own types (requests, loads, refs…): what the dashboard keeps. The events of
    the batches in flight (parsers' types) come and go with the feed's pace and are not counted."""
    gc.collect()
    return sum(type(o).__module__.startswith("ietop.model") for o in gc.get_objects())


def test_objects_stay_flat_once_the_tables_are_full(busy_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live, "SAMPLES", 500)
    monkeypatch.setattr(hint_types, "KEEP", 20)
    monkeypatch.setattr(hint_types, "RECENT", 8)
    monkeypatch.setattr(live.LiveView.__init__, "__defaults__", (20,))  # keep: each of the view's tables
    store, view, evidence = new_store()
    assert view.samples.maxlen == 500
    feed = ReplayFeed(store, [str(busy_log)], ReplayClock(0), evidence)
    batches: queue.Queue[Batch] = queue.Queue(maxsize=4)
    worker = threading.Thread(target=feed.run, args=(batches.put, threading.Event()), daemon=True)
    worker.start()
    counts: list[tuple[int, int]] = []  # (requests applied, live objects)
    while True:
        batch = batches.get(timeout=300)
        store.apply_all(batch.items)
        if batch.done:
            break
        requests = store.counts.get("requests", 0)
        if not counts or requests >= counts[-1][0] + 20_000:
            counts.append((requests, _records()))
    worker.join(5)
    assert batch.error is None
    total = store.counts["requests"]
    assert total > 300_000, total
    middle = max(c for r, c in counts if total / 3 <= r < 2 * total / 3)
    last = max(c for r, c in counts if r >= 2 * total / 3)
    # The last third of the log (>100,000 requests, ~10,000 of them inference) may not keep more than the
    # middle third did, but for allocation noise: one record kept per inference request would be thousands.
    assert last <= middle * 1.25 + 50, (middle, last, counts)
    assert len(view.samples) == 500 and len(view.requests) == 20 and len(view.hints.seen.requests) == 20
