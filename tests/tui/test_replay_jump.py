"""`j` in a replay: run to the next load, unload, truncation or error and pause exactly there.

The expected stops are worked out without the app: the same replay drained at full speed and applied one
item at a time into a store of its own, noting each item after which Store.events_total grew (by one, or by
two where one error line also ends a load as failed). The app must stop with exactly that many items applied
(nothing past the event), and a replay resumed after jumps must end with the same store as one never
interrupted (what a jump takes back is released again)."""

from __future__ import annotations

import threading

from ietop.pipeline.clock import ReplayClock
from ietop.pipeline.feeds import Batch, ReplayFeed
from ietop.pipeline.setup import new_store
from ietop.tui.app import IetopApp
from ietop.tui.run import replay_app
from ietop.tui.widgets.events import EventsTable
from tests.tui.support import INCIDENT, until


def _expected_stops() -> tuple[list[tuple[int, int]], dict[str, int], int]:
    """((items applied, events_total) at each item that made events_total grow; the final counts; all items)."""
    store, _view, evidence = new_store()
    batches: list[Batch] = []
    ReplayFeed(store, [str(INCIDENT)], ReplayClock(0), evidence).run(batches.append, threading.Event())
    stops: list[tuple[int, int]] = []
    n = total = 0
    for b in batches:
        for item in b.items:
            store.apply_all((item,))
            n += 1
            if store.events_total > total:
                total = store.events_total
                stops.append((n, total))
    store.flush()
    return stops, dict(store.counts), n


async def test_jump_stops_at_each_event_and_nothing_is_lost() -> None:
    stops, final_counts, total = _expected_stops()
    assert len(stops) >= 4, "the incident has loads, an eviction, truncations and errors"
    app: IetopApp = replay_app([str(INCIDENT)], 1.0, paused=True)
    async with app.run_test(size=(120, 40)) as pilot:
        clock = app.setup.clock
        assert clock is not None
        await pilot.pause(0.3)
        assert clock.paused and app.store.version == 0
        for k, (applied, events) in enumerate(stops[:4], start=1):
            await pilot.press("j")
            await until(pilot, lambda: clock.paused and not clock.jumping)
            await pilot.pause(0.2)  # anything applied past the event would show by now
            assert app.store.events_total == events
            assert app.store.version == applied, f"jump {k}: stopped after {app.store.version} items, not {applied}"
            assert app.query_one(EventsTable).row_count >= 1
        # Stepping after a jump releases the items the jump took back, one at a time.
        await pilot.press("n")
        await until(pilot, lambda: app.store.version == stops[3][0] + 1)
        # Resumed at full speed, the replay ends with the store of an uninterrupted one.
        clock.set_speed(0)
        await pilot.press("p")
        await until(pilot, lambda: app._replay_done, limit_s=30)
        app.store.flush()
        assert app.store.version == total
        assert dict(app.store.counts) == final_counts


async def test_a_jump_past_the_last_event_ends_the_replay() -> None:
    stops, _counts, total = _expected_stops()
    app: IetopApp = replay_app([str(INCIDENT)], 1.0, paused=True)
    async with app.run_test(size=(120, 40)) as pilot:
        clock = app.setup.clock
        assert clock is not None
        await pilot.pause(0.3)
        for _ in stops:
            await pilot.press("j")
            await until(pilot, lambda: clock.paused and not clock.jumping)
        assert app.store.version == stops[-1][0]
        await pilot.press("j")  # nothing notable is left: runs to the end
        await until(pilot, lambda: app._replay_done, limit_s=30)
        assert app.store.version == total
        assert "jumping" not in app._status_text()


async def test_a_jump_shows_the_event_it_stopped_at() -> None:
    """The Events panel scrolled down (or its cursor low): `j` used to stop on an event out of view, seen only
    after `home` (issue 22). The cursor is now on the newest row, in view."""
    app: IetopApp = replay_app([str(INCIDENT)], 1.0, paused=True)
    async with app.run_test(size=(120, 40)) as pilot:
        clock = app.setup.clock
        assert clock is not None
        for _ in range(6):
            await pilot.press("j")
            await until(pilot, lambda: clock.paused and not clock.jumping)
        await pilot.pause(0.2)
        table = app.query_one(EventsTable)
        assert table.row_count >= 3
        table.move_cursor(table.row_count - 1)
        table.scroll_to(y=table.row_count, animate=False)
        await pilot.pause()
        await pilot.press("j")
        await until(pilot, lambda: clock.paused and not clock.jumping)
        await pilot.pause(0.2)
        assert table.cursor_row == 0 and table.scroll_y == 0
