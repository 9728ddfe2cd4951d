"""`J` in a replay: back to just after the previous load, unload, truncation or error, and paused there.

A store cannot be undone, so the replay starts over and stops after the right item. The expected positions
are worked out without the app, as in test_replay_jump: the replay drained at full speed into a store of its
own, one item at a time. The app must stand exactly there, with the counts of a store that applied exactly
those items (nothing left over from the replay before), and go on from there as before."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from ietop.pipeline.clock import ReplayClock
from ietop.pipeline.feeds import Batch, ReplayFeed
from ietop.pipeline.setup import new_store
from ietop.tui.app import IetopApp
from ietop.tui.run import replay_app
from ietop.tui.widgets.events import EventsTable
from tests.tui.support import INCIDENT, until


def _after(path: Path, n: int | None = None) -> tuple[int, dict[str, int], list[int], int]:
    """Replayed at full speed into a store of its own, one item at a time, the first `n` items (all when None):
    events_total and counts then, the positions where events_total changed, and how many items there were."""
    store, _view, evidence = new_store()
    batches: list[Batch] = []
    ReplayFeed(store, [str(path)], ReplayClock(0), evidence).run(batches.append, threading.Event())
    items = [item for b in batches for item in b.items]
    changes: list[int] = []
    last = 0
    for i, item in enumerate(items[:n] if n is not None else items, start=1):
        store.apply_all((item,))
        if store.events_total != last:
            changes.append(i)
            last = store.events_total
    return store.events_total, dict(store.counts), changes, len(items)


def _settled(app: IetopApp) -> bool:
    clock = app.setup.clock
    return clock is not None and clock.paused and not clock.jumping and not app._going_back and app._stop_at is None


def _rows(app: IetopApp) -> list[str]:
    table = app.query_one(EventsTable)
    return [table.cell_text(r, 3) for r in range(table.row_count)]


async def test_back_returns_to_each_earlier_event_then_the_start_and_on_again() -> None:
    _events, _counts, changes, _total = _after(INCIDENT)
    assert len(changes) >= 4
    app = replay_app([str(INCIDENT)], 1.0, paused=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        seen: list[tuple[int, int, list[str]]] = []
        for _ in range(4):
            await pilot.press("j")
            await until(pilot, lambda: _settled(app))
            await pilot.pause(0.2)
            app.refresh_view()
            seen.append((app._items, app.store.events_total, _rows(app)))
        assert [s[0] for s in seen] == changes[:4]
        for want in reversed(seen[:3]):
            await pilot.press("J")
            await until(pilot, lambda w=want: _settled(app) and app._items == w[0])  # type: ignore[misc]
            await pilot.pause(0.3)  # a batch of the replay before, applied now, would show by then
            app.refresh_view()
            events, counts, _changes, _total = _after(INCIDENT, want[0])
            assert (app._items, app.store.events_total) == want[:2] and app.store.events_total == events
            assert dict(app.store.counts) == counts, "exactly those items: nothing of the replay before"
            assert _rows(app) == want[2]
        await pilot.press("J")
        await until(pilot, lambda: _settled(app) and app._items == 0)
        await pilot.pause(0.3)
        assert app.store.events_total == 0 and app.store.version == 0, "back at the start, paused"
        await pilot.press("J")  # nothing before the start
        await pilot.pause(0.2)
        assert app._items == 0 and not app._going_back
        await pilot.press("j")
        await until(pilot, lambda: _settled(app) and app._items == changes[0])
        await pilot.press("n")  # stepping goes on from there
        await until(pilot, lambda: app._items == changes[0] + 1)


async def test_back_from_the_end_stands_after_the_last_event() -> None:
    _events, _counts, changes, total = _after(INCIDENT)
    app = replay_app([str(INCIDENT)], 0)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app._replay_done, limit_s=30)
        assert app._items == total
        await pilot.press("J")
        want = max(c for c in changes if c < total)
        await until(pilot, lambda: _settled(app) and app._items == want)
        assert not app._replay_done, "a replay started over is not over"


async def test_a_log_gone_since_is_a_message_not_a_crash(tmp_path: Path) -> None:
    log = tmp_path / "incident.log"
    shutil.copy(INCIDENT, log)
    app = replay_app([str(log)], 1.0, paused=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        await pilot.press("j")
        await until(pilot, lambda: _settled(app))
        position = app._items
        log.unlink()
        await pilot.press("J")
        await until(pilot, lambda: not app._going_back)
        await pilot.pause(0.2)
        assert app._items == position and app.is_running
        assert any("cannot go back" in n.message for n in app._notifications)


async def test_back_while_the_replay_runs_drops_what_the_replay_before_posted(synthetic_log: Path) -> None:
    app = replay_app([str(synthetic_log)], 0)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app._items > 2000)
        await pilot.press("J")
        await until(pilot, lambda: app._generation == 1 and _settled(app), limit_s=60)
        await pilot.pause(0.5)  # batches of the replay before, still queued, would have been applied by now
        assert app.back_from is not None and app.back_from > 2000
        _events, _counts, changes, _total = _after(synthetic_log, app.back_from)
        want = max(c for c in changes if c < app.back_from)
        assert app._items == want and app.store.version == want
        _events, counts, _changes, _total = _after(synthetic_log, want)
        assert dict(app.store.counts) == counts


async def test_a_batch_of_the_replay_before_is_dropped_and_frees_its_slot() -> None:
    # What a feed posted just before `J` stopped it may still be queued when the new replay is current.
    from ietop.tui.app import EventsBatch

    store, _view, evidence = new_store()
    batches: list[Batch] = []
    ReplayFeed(store, [str(INCIDENT)], ReplayClock(0), evidence).run(batches.append, threading.Event())
    app = replay_app([str(INCIDENT)], 1.0, paused=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        app._generation = 1
        assert app._inflight.acquire(timeout=1)
        app.on_events_batch(EventsBatch(batches[0], generation=0))
        assert app.store.version == 0 and app._items == 0, "not applied"
        for _ in range(4):  # INFLIGHT: every slot is free again
            assert app._inflight.acquire(timeout=1)
