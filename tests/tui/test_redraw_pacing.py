"""Timer redraws are paced by their whole cost: a dear one holds the next back, never drops it.

A redraw's cost is the main thread's CPU from its start until the screen was refreshed after it (Textual
measures and renders later, on the same thread), less the events applied meanwhile. Pacing by a stopwatch
around refresh_view alone saw a fifth of it, and a burst into a full view ran at half the pipeline's pace."""

from __future__ import annotations

import time

from ietop.pipeline.feeds import Batch
from ietop.tui.app import EventsBatch
from ietop.tui.pacing import BURST_ITEMS, BURST_SHARE, REDRAW_SHARE, RedrawPacer
from tests.tui.support import bare_app, chat


class Clocks:
    """The pacer's two clocks, moved by hand."""

    def __init__(self) -> None:
        self.cpu_s = 10.0
        self.wall_s = 1000.0

    def cpu(self) -> float:
        return self.cpu_s

    def wall(self) -> float:
        return self.wall_s


def test_the_cost_is_the_redraws_cpu_less_the_events_applied_meanwhile() -> None:
    c = Clocks()
    pacer = RedrawPacer(cpu=c.cpu, clock=c.wall)
    mark = pacer.began()
    c.cpu_s += 0.02  # the snapshot and the widgets' own code
    c.wall_s += 0.05  # wall time is not what is paid for: a feed thread held the GIL meanwhile
    token = pacer.drew(mark)
    assert abs(pacer.cost - 0.02) < 1e-9
    assert abs(pacer.after - (1000.0 + 0.02 / REDRAW_SHARE)) < 1e-9
    began = pacer.apply_began()
    c.cpu_s += 0.3  # a batch applied before the screen was refreshed
    pacer.apply_ended(began, 100)
    c.cpu_s += 0.06  # Textual measuring the new rows and rendering them
    pacer.rendered(token)
    assert abs(pacer.cost - 0.08) < 1e-9, "the deferred rendering counts, the applied batch does not"
    assert abs(pacer.after - (1000.0 + 0.08 / REDRAW_SHARE)) < 1e-9
    c.wall_s = pacer.after - 0.1
    assert abs(pacer.wait() - 0.1) < 1e-9


def test_a_later_redraw_supersedes_the_rendering_of_an_earlier_one() -> None:
    c = Clocks()
    pacer = RedrawPacer(cpu=c.cpu, clock=c.wall)
    first = pacer.drew(pacer.began())
    c.cpu_s += 0.01
    second_mark = pacer.began()
    c.cpu_s += 0.01
    second = pacer.drew(second_mark)
    after = pacer.after
    c.cpu_s += 1.0
    pacer.rendered(first)
    assert pacer.after == after, "the first redraw's report comes too late to mean anything"
    pacer.rendered(second)
    assert abs(pacer.cost - 1.01) < 1e-9


def test_a_flood_since_the_last_redraw_takes_the_smaller_share() -> None:
    c = Clocks()
    pacer = RedrawPacer(cpu=c.cpu, clock=c.wall)
    for applied, share in ((BURST_ITEMS, BURST_SHARE), (BURST_ITEMS - 1, REDRAW_SHARE)):
        pacer.apply_ended(pacer.apply_began(), applied)
        mark = pacer.began()
        c.cpu_s += 0.1
        pacer.drew(mark)
        assert abs(pacer.after - (mark[0] + 0.1 / share)) < 1e-9
        assert pacer.applied == 0


def test_a_backlog_takes_the_smaller_share_however_few_the_events() -> None:
    # On a slow machine a flood brings fewer events per redraw: the feed saying it has more to read is the
    # signal that does not depend on speed.
    c = Clocks()
    pacer = RedrawPacer(cpu=c.cpu, clock=c.wall)
    for behind, share in ((True, BURST_SHARE), (False, REDRAW_SHARE)):
        pacer.apply_ended(pacer.apply_began(), 10, behind)
        pacer.apply_ended(pacer.apply_began(), 10, False)  # a later batch does not clear it
        mark = pacer.began()
        c.cpu_s += 0.1
        pacer.drew(mark)
        assert abs(pacer.after - (mark[0] + 0.1 / share)) < 1e-9
        assert not pacer.behind


async def test_a_dear_redraw_defers_the_next_timer_redraw_without_dropping_it() -> None:
    app, src = bare_app()
    store = app.store
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.2)
        store.apply(src, time.time(), chat(1))
        app.refresh_view()  # a user action draws at once, whatever the pacing says
        assert app.snap is not None and len(app.snap.requests) == 1
        await pilot.pause(0.1)
        # The screen as it is now: a timer may have redrawn it meanwhile (a new `now`, the same records).
        drawn = app.snap
        # As if that redraw had cost 60 ms: the timers wait until its cost is paid off at REDRAW_SHARE.
        app.pacer.after = time.monotonic() + 0.06 / REDRAW_SHARE
        store.apply(src, time.time(), chat(2))
        app._timed_redraw()
        assert app.snap is drawn, "held back while the last redraw's cost is not paid off"
        await pilot.pause(0.06 / REDRAW_SHARE + 0.3)
        assert app.snap is not drawn and app.snap is not None and len(app.snap.requests) == 2, "deferred, not dropped"


async def test_the_screen_refresh_after_a_redraw_reports_its_cost() -> None:
    app, src = bare_app()
    store = app.store
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.2)
        reported: list[tuple[int, float, float]] = []
        rendered = app.pacer.rendered

        def record(token: int) -> None:
            rendered(token)
            reported.append((token, app.pacer.cost, app.pacer.after))

        app.pacer.rendered = record  # type: ignore[method-assign]
        for i in range(50):
            store.apply(src, time.time(), chat(i))
        t0 = time.monotonic()
        app.refresh_view()
        t1 = time.monotonic()
        own, token = app.pacer.cost, app.pacer.drawn
        for _ in range(100):  # a loaded CI machine may take a while to refresh the screen
            if any(t == token for t, _cost, _after in reported):
                break
            await pilot.pause(0.05)
        report = next(((c, a) for t, c, a in reported if t == token), None)
        assert report is not None, "Textual called back once the screen was refreshed"
        cost, after = report
        assert cost >= own, "the cost once rendered includes the redraw's own"
        assert t0 <= after - cost / REDRAW_SHARE <= t1, "the next waits from the redraw's start for its whole cost"
        app.on_events_batch(EventsBatch(Batch([(src, time.time(), chat(i)) for i in range(3)]), counted=False))
        assert app.pacer.applied == 3, "what a flood is counts the events the batches brought"
