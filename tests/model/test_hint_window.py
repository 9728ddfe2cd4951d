"""The dashboard asks for the hints of its window every second; the window's records are kept between asks
while none came in and the cut has not passed the earliest of them. Kept or not, the hints must be the same.

On the bundled incident, replayed into the dashboard's store: hints at cuts moving second by second across
the whole incident (and back), each against the same engine with its kept window dropped first."""

from __future__ import annotations

from ietop.model.hints import HintContext
from ietop.pipeline.ingest import run_files
from ietop.pipeline.setup import new_store
from tests.tui.support import INCIDENT


def _hints(view: object, ctx: HintContext, t: float) -> list[tuple[str, str, tuple[tuple[int, int], ...]]]:
    hints = view.hints.evaluate(ctx, t)  # type: ignore[attr-defined]
    return [(h.id, h.detail, tuple((r.src, r.line) for r in h.evidence)) for h in hints]


def test_the_kept_window_gives_the_hints_a_fresh_one_gives() -> None:
    store, view, _evidence = new_store()
    run_files(store, [str(INCIDENT)])
    cfg = store.settings
    ctx = HintContext(cfg.configured, cfg.configured_ref, cfg.effective, cfg.effective_ref,
                      aliases=dict(store.loads.aliases))
    first = min(r.t_end for r in view.hints.seen.requests)
    cuts = [first - 60 + s for s in range(0, int(store.now - first) + 120)]
    kept = 0
    seen_sets = set()
    for t in [*cuts, *reversed(cuts)]:
        reused = view.hints._window
        warm = _hints(view, ctx, t)
        kept += view.hints._window is reused
        view.hints._window = None
        cold = _hints(view, ctx, t)
        assert warm == cold, t
        seen_sets.add(tuple(warm))
    assert kept > len(cuts) // 2, "most seconds reuse the window"
    assert len(seen_sets) >= 3, "the cuts pass records: the hints change along the way"


def test_records_that_come_in_are_in_the_next_window() -> None:
    import threading

    from ietop.pipeline.clock import ReplayClock
    from ietop.pipeline.feeds import Batch, ReplayFeed

    store, view, evidence = new_store()
    batches: list[Batch] = []
    ReplayFeed(store, [str(INCIDENT)], ReplayClock(0), evidence).run(batches.append, threading.Event())
    items = [item for b in batches for item in b.items]
    start = items[0][1]
    changed = 0
    last: object = None
    for i in range(0, len(items), 7):
        store.apply_all(items[i : i + 7])
        cfg = store.settings
        ctx = HintContext(cfg.configured, cfg.configured_ref, cfg.effective, cfg.effective_ref,
                          aliases=dict(store.loads.aliases))
        warm = _hints(view, ctx, start)  # the same cut every time: only new records change the hints
        view.hints._window = None
        assert warm == _hints(view, ctx, start), i
        changed += warm != last
        last = warm
    assert changed >= 3
