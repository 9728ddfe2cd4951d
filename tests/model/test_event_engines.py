"""Each Events row names the engine whose log the event came from: errors and truncations carry no engine
of their own (the analyze JSON contract has none for them), so the row takes its source's."""

from __future__ import annotations

from itertools import pairwise

import pytest

from ietop.pipeline.ingest import run_files
from ietop.pipeline.setup import new_store
from tests.tui.support import ROOT


@pytest.mark.parametrize(("fixture", "rows"), [
    ("vllm/018-v1-0.15-error-kv-cache-too-small.txt", [("error", "vllm")]),
    ("vllm/021-v1-0.11-cuda-oom.txt", [("error", "vllm")]),
    ("mlx/004-mlx-lm-1513-generate-thread-metal-malloc.txt", [("crash", "mlx"), ("error", "mlx")]),
    ("ollama/004-v06-embeddings-truncation.log", [("truncation", "ollama"), ("load", "ollama")]),
])
def test_rows_name_the_engine_of_their_log(fixture: str, rows: list[tuple[str, str]]) -> None:
    store, view, _evidence = new_store()
    run_files(store, [str(ROOT / "fixtures" / fixture)])
    snap = view.snapshot(store.now, 300)
    assert [(e.kind, e.engine) for e in snap.events] == rows


def test_two_engines_in_one_replay() -> None:
    store, view, _evidence = new_store()
    run_files(store, [str(ROOT / "fixtures/vllm/021-v1-0.11-cuda-oom.txt"),
                      str(ROOT / "fixtures/ollama/004-v06-embeddings-truncation.log")])
    snap = view.snapshot(store.now, 10**9)
    engines = {(e.kind, e.engine) for e in snap.events}
    assert ("error", "vllm") in engines and ("truncation", "ollama") in engines


@pytest.mark.parametrize("until", ["2026-11-28T14:03:20Z", "2026-11-28T14:06:30Z", None])
def test_rows_read_in_time_order(until: str | None) -> None:
    """Rows are placed newest first by when each thing happened, and the time column says that time: a load
    that ended shows its end (it showed its start, so a failed load sat above errors logged after it)."""
    from ietop.pipeline.ingest import parse_time_arg

    store, view, _evidence = new_store()
    run_files(store, [str(ROOT / "ietop/demo/incident.log")], until=parse_time_arg(until) if until else None)
    rows = view.snapshot(store.now, 10**6).events
    times = [(r.time.timestamp(), r.kind, r.text) for r in rows if r.time is not None]
    assert len(times) >= 4
    assert all(a[0] >= b[0] - 0.001 for a, b in pairwise(times)), times
