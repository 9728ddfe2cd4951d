"""Timer redraws are paced by their own cost (REDRAW_SHARE): a dear one holds the next back, never drops it.

A burst of lines into a full view once spent three quarters of the main thread redrawing (the feeds then
ingested ~20k lines/s and a key waited ~0.4 s); pacing keeps the screen current at a lower rate instead."""

from __future__ import annotations

import time
from datetime import datetime, timezone

from ietop.feeds import Batch
from ietop.tui.app import BURST_ITEMS, BURST_SHARE, REDRAW_SHARE, EventsBatch, IetopApp, Setup
from ietop.tui.run import new_store
from parsers.events import HttpAccess


def _request(line: int) -> HttpAccess:
    ts = datetime(2026, 11, 30, 10, 0, line % 60, tzinfo=timezone.utc)
    return HttpAccess(line, ts, 200, 1.5, "1.5s", "127.0.0.1", "POST", "/api/chat")


async def test_a_dear_redraw_defers_the_next_timer_redraw_without_dropping_it() -> None:
    store, view, evidence = new_store()
    src = store.add_source("server.log", "ollama")
    app = IetopApp(store, view, evidence, Setup(feeds=[], hardware=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.2)
        store.apply(src, time.time(), _request(1))
        app.refresh_view()  # a user action draws at once, whatever the pacing says
        drawn = app.snap
        assert drawn is not None and len(drawn.requests) == 1
        # As if that redraw had cost 60 ms: the timers wait until its cost is paid off at REDRAW_SHARE.
        app._redraw_after = time.monotonic() + 0.06 / REDRAW_SHARE
        store.apply(src, time.time(), _request(2))
        app._timed_redraw()
        assert app.snap is drawn, "held back while the last redraw's cost is not paid off"
        await pilot.pause(0.06 / REDRAW_SHARE + 0.3)
        assert app.snap is not drawn and app.snap is not None and len(app.snap.requests) == 2, "deferred, not dropped"


async def test_the_pacing_follows_the_measured_cost() -> None:
    store, view, evidence = new_store()
    app = IetopApp(store, view, evidence, Setup(feeds=[], hardware=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.2)
        app.snap = None
        began = time.monotonic()
        app.refresh_view()
        spent = time.monotonic() - began
        assert began < app._redraw_after <= began + spent / REDRAW_SHARE + 0.001


async def test_a_flood_since_the_last_redraw_takes_the_smaller_share() -> None:
    store, view, evidence = new_store()
    app = IetopApp(store, view, evidence, Setup(feeds=[], hardware=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.2)
        for share, applied in ((BURST_SHARE, BURST_ITEMS), (REDRAW_SHARE, BURST_ITEMS - 1)):
            app.snap, app._applied = None, applied
            began = time.monotonic()
            app.refresh_view()
            spent = time.monotonic() - began
            assert began + spent / share * 0.5 < app._redraw_after <= began + spent / share + 0.001
            assert app._applied == 0
        src = store.add_source("server.log", "ollama")
        app.on_events_batch(EventsBatch(Batch([(src, time.time(), _request(i)) for i in range(3)]), counted=False))
        assert app._applied == 3, "what a flood is counts the events the batches brought"
