"""The replay's keys: step (`n`), jump to the next event (`j`), back to the previous one (`J`), speed (`+`/`-`).

A base class of the app (ietop.tui.app), kept apart so that the app module stays readable: it holds the
replay's state the app's handlers share (the position, the jump's target, which replay is current).

Going back starts the replay over: a store cannot be undone. ietop.pipeline.rewind first works out, on a worker
thread and into a store of its own, how many items the replay must apply to stand just after the previous
event; then a fresh store and feed (Setup.restart) run there unpaced, as a forward jump does, and pause.
Batches the replay before had posted are dropped by their generation number.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from textual import work
from textual.app import App
from textual.css.query import NoMatches
from textual.message import Message

from ietop.model.live import LiveView
from ietop.model.snapshot import Snapshot
from ietop.model.store import Store
from ietop.pipeline.clock import ReplayClock
from ietop.pipeline.feeds import Batch, Evidence, ReplayFeed
from ietop.tui.format import clean
from ietop.tui.widgets.events import EventsTable

if TYPE_CHECKING:
    from ietop.tui.app import Setup


class ReplayParts(NamedTuple):
    store: Store
    view: LiveView
    evidence: Evidence
    feed: ReplayFeed
    clock: ReplayClock


class BackTarget(Message):
    """Where `J` goes: the items to apply from the start (None: not found; `error` says why, if it failed)."""

    def __init__(self, generation: int, items: int | None, error: str | None = None) -> None:
        super().__init__()
        self.generation = generation
        self.items = items
        self.error = error


class ReplayControls(App[None]):
    setup: Setup
    store: Store
    view: LiveView
    evidence: Evidence
    snap: Snapshot | None
    _stop: threading.Event
    _replay_done: bool
    replay_held: bool

    def _init_replay_state(self) -> None:
        self._jump_mark: int | None = None
        """While a replay jumps: Store.events_total when it began."""
        self._stop_at: int | None = None
        """While a replay started over runs to where `J` goes back to: the items to apply."""
        self._items = 0
        """Items applied from this replay (its position)."""
        self._generation = 0
        """Which replay is current: `J` starts a new one."""
        self._feed_stop = threading.Event()
        """Stops the current replay's feed (the one before a `J`, or every feed at exit)."""
        self._going_back = False
        self.back_from: int | None = None
        """Where the last `J` was pressed (its position)."""

    def refresh_view(self) -> None:
        """Redraw now (the app's)."""
        raise NotImplementedError

    def refresh_status(self) -> None:
        """Redraw the header's status (the app's)."""
        raise NotImplementedError

    def show_newest_event(self) -> None:
        """Put the Events panel's cursor on its newest row, scrolled into view: where `j` stopped."""
        try:
            table = self.query_one(EventsTable)
        except NoMatches:
            return
        table.scroll_to(y=0, animate=False)
        table.move_cursor(0)

    def _run_feed(self, feed: object, generation: int, stop: threading.Event) -> object:
        """Start `feed` on a worker thread (the app's, a Textual worker)."""
        raise NotImplementedError

    def _forget_shown(self) -> None:
        """The panels' memory of what they show belongs to the replay before: drop it."""
        raise NotImplementedError

    # -- applying ------------------------------------------------------------------------------
    def _apply_until_event(self, batch: Batch) -> int:
        """A jump: apply item by item and pause the replay at the first that gives the Events panel a row (or,
        going back, after the item `J` found). The feed takes back the rest of a batch it posted while
        jumping; any other batch is applied whole."""
        store, mark, stop_at, clock = self.store, self._jump_mark, self._stop_at, self.setup.clock
        assert clock is not None
        for i, item in enumerate(batch.items):
            store.apply_all((item,))
            if (mark is not None and store.events_total > mark) or (
                    stop_at is not None and self._items + i + 1 >= stop_at):
                jumped = mark is not None
                self._jump_mark = self._stop_at = None
                clock.pause(at=item[1])
                self.refresh_view()
                if jumped:
                    self.show_newest_event()
                if batch.ack:
                    return i + 1
                store.apply_all(batch.items[i + 1 :])
                break
        return len(batch.items)

    # -- keys --------------------------------------------------------------------------------------
    def action_step(self) -> None:
        if self.setup.clock is not None and self.setup.clock.paused:
            self.setup.clock.step()

    def action_jump(self) -> None:
        clock = self.setup.clock
        if clock is None or self._replay_done or self._jump_mark is not None or self._stop_at is not None:
            return
        self._jump_mark = self.store.events_total
        clock.jump()
        self.refresh_view()

    def action_jump_back(self) -> None:
        if self.setup.restart is None or self._going_back or self._jump_mark is not None or self._stop_at is not None:
            return
        if self._items == 0:
            self.notify("at the start of the replay", timeout=3)
            return
        self._going_back = True
        self.back_from = self._items
        self.notify("going back to the previous event…", timeout=2)
        self._find_back_target(self.setup.restart, self._items, self._generation)

    @work(thread=True, exit_on_error=False, group="back", description="find the previous event")
    def _find_back_target(self, restart: Callable[[float], ReplayParts], position: int, generation: int) -> None:
        from ietop.pipeline.rewind import back_target

        try:
            parts = restart(0.0)
            found = back_target(parts.store, parts.feed, position, self._stop)
        except Exception as exc:  # a log gone or changed since the replay began: said, never a crash
            self.post_message(BackTarget(generation, None, f"cannot go back: {exc}"))
            return
        self.post_message(BackTarget(generation, found))

    def on_back_target(self, message: BackTarget) -> None:
        self._going_back = False
        if message.error is not None:
            self.notify(clean(message.error), severity="error", timeout=8, markup=False)
        if message.items is None or message.generation != self._generation or self.setup.restart is None:
            return
        old = self.setup.clock
        try:
            parts = self.setup.restart(old.speed if old is not None else 1.0)
        except Exception as exc:  # as above, between the search and now
            self.notify(clean(f"cannot go back: {exc}"), severity="error", timeout=8, markup=False)
            return
        self._feed_stop.set()
        self._generation += 1
        self._feed_stop = threading.Event()
        self.store, self.view, self.evidence = parts.store, parts.view, parts.evidence
        self.setup.clock, self.setup.feeds = parts.clock, [parts.feed]
        self.snap, self._items, self._jump_mark = None, 0, None
        self._replay_done = self.replay_held = False
        self._forget_shown()
        if message.items == 0:
            parts.clock.toggle_pause()  # back to the start: paused before the first line
        else:
            self._stop_at = message.items
            parts.clock.jump()
        self._run_feed(parts.feed, self._generation, self._feed_stop)
        self.refresh_view()

    def action_speed(self, factor: float) -> None:
        clock = self.setup.clock
        if clock is not None and clock.speed > 0:
            clock.set_speed(min(10_000.0, max(0.125, clock.speed * factor)))
            self.refresh_view()
            self.refresh_status()
