"""IetopApp: the dashboard. Thin: it wires feeds, polls and hardware sampling to the store and redraws.

Concurrency (ARCHITECTURE.md): the store is touched only here, on the main thread — feed workers post
`EventsBatch` messages, the hardware worker posts `HardwareSampled`, and polls run as an async worker on
the main loop. The screen redraws on a timer (1 s live, 0.5 s in a replay) and only when the snapshot changed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import Footer, Input, OptionList

from ietop.model.live import LiveView
from ietop.model.records import Ref
from ietop.model.snapshot import WINDOWS, Snapshot
from ietop.model.store import Store
from ietop.pipeline.clock import ReplayClock
from ietop.pipeline.command_feeds import ProxyFeed
from ietop.pipeline.feeds import Batch, Evidence
from ietop.pipeline.hardware import Hardware
from ietop.pipeline.polling import ProcessSamples
from ietop.tui.format import clean
from ietop.tui.pacing import RedrawPacer
from ietop.tui.panels import PanelControls
from ietop.tui.replay_control import ReplayControls, ReplayParts
from ietop.tui.screens.detail import DetailScreen, event_view, hint_view, request_view
from ietop.tui.screens.help import HelpScreen
from ietop.tui.screens.timeline import TimelineScreen
from ietop.tui.terminal import hung_up, is_terminal
from ietop.tui.widgets.engines import EnginesBar
from ietop.tui.widgets.events import EventsTable
from ietop.tui.widgets.hints import HintsTable
from ietop.tui.widgets.latency import LatencyPanel
from ietop.tui.widgets.memory import MemoryPanel
from ietop.tui.widgets.requests import RequestsTable
from ietop.tui.widgets.residency import ResidencyTable
from ietop.tui.widgets.rowtable import RowTable

REFRESH_S = 0.5
"""A replay's redraw timer: its clock may run at N×, so the screen follows it twice a second."""
LIVE_TICK_S = 1.0
"""Live: one timer a second both redraws and checks the terminal. The live view changes at most once a second
(its windows are keyed by the whole second) and new lines redraw on their own within FRESH_S, so a faster
timer only woke the loop for nothing: two timers (0.5 s redraw, 1 s hang-up check) were 3 wakes a second of an
idle dashboard's ~0.3 % of a core on its main thread (issue 24)."""
EXIT_HANGUP = 129  # 128 + SIGHUP, as if the hangup signal had come
FRESH_S = 0.1
"""Live: new lines redraw the screen this soon, however the timer is phased (DESIGN.md: an appended
line is on screen within 250 ms). A burst within it is one redraw: at most 10 a second, only while lines
arrive, so an idle dashboard still wakes only on the timer."""
INFLIGHT = 4
"""Event batches posted but not yet applied, across all feeds."""
COMPACT_BELOW = 34
"""Terminal rows under which the events panel gives its room to the requests."""


class EventsBatch(Message):
    def __init__(self, batch: Batch, counted: bool = True, generation: int = 0) -> None:
        super().__init__()
        self.batch = batch
        self.counted = counted
        """Holds one of the app's in-flight slots (released once applied)."""
        self.generation = generation
        """The replay it belongs to: one started over (`J`) drops what the one before had posted."""


class HardwareSampled(Message):
    def __init__(self, hardware: Hardware, processes: ProcessSamples) -> None:
        super().__init__()
        self.hardware = hardware
        self.processes = processes
        """(source, t, rss, alive) samples of engine processes behind log sources."""


@dataclass
class Setup:
    """What to watch; built by the CLI (ietop.tui.setup) and by tests."""

    feeds: list[object] = field(default_factory=list)
    """Objects with `run(post, stop)` (ietop.pipeline.feeds)."""
    endpoints: list[tuple[str, str]] = field(default_factory=list)
    """(engine, base URL) to poll."""
    discovered: set[str] = field(default_factory=set)
    """Endpoints found by default rather than asked for: hidden until they answer."""
    clock: ReplayClock | None = None
    """Replay: the virtual clock (None live)."""
    hardware: bool = True
    title: str = "ietop"
    poll_interval: float = 2.0
    window_index: int = 1
    """Index into WINDOWS the latency and hint panels start with (1: 5 minutes)."""
    restart: Callable[[float], ReplayParts] | None = None
    """Replay: the same replay from its start at a given speed, in a fresh store (what `J` goes back with)."""
    theme: str | None = None


class IetopApp(PanelControls, ReplayControls):
    CSS_PATH = "ietop.tcss"
    TITLE = "ietop"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("question_mark", "help", "help"),
        Binding("slash", "filter", "filter"),
        Binding("escape", "clear_filter", "clear filter", show=False),
        Binding("p", "pause", "pause"),
        Binding("n", "step", "step", show=False),
        Binding("j", "jump", "next event", show=False),
        Binding("J", "jump_back", "previous event", show=False),
        Binding("t", "timeline", "timeline"),
        Binding("m", "models", "models", show=False),
        Binding("b", "budget", "budget", show=False),
        Binding("e", "events", "events"),
        Binding("c", "columns", "columns"),
        Binding("ctrl+s", "dump", "save text", show=False),
        Binding("s", "sort(1)", "sort", show=False),
        Binding("S", "sort(-1)", "sort back", show=False),
        Binding("r", "sort(0)", "reverse sort", show=False),
        Binding("1", "window(0)", "1m", show=False),
        Binding("2", "window(1)", "5m", show=False),
        Binding("3", "window(2)", "15m", show=False),
        Binding("plus,equals_sign", "speed(2.0)", "faster", show=False),
        Binding("minus", "speed(0.5)", "slower", show=False),
    ]

    def __init__(self, store: Store, view: LiveView, evidence: Evidence, setup: Setup) -> None:
        super().__init__()
        self.store, self.view, self.evidence, self.setup = store, view, evidence, setup
        self.window_index = setup.window_index
        self.paused = False
        self.snap: Snapshot | None = None
        self.hardware: Hardware | None = None
        self._drawn_hardware: Hardware | None = None
        self.status = ""
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._inflight = threading.BoundedSemaphore(INFLIGHT)
        self._replay_done = False
        self.replay_held = False
        self._redraw_due = False
        self._check_hangup = False
        self.pacer = RedrawPacer()
        self._init_replay_state()

    # -- layout --------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield EnginesBar(id="engines")
        with Horizontal(id="top"):
            yield ResidencyTable(id="residency")
            yield MemoryPanel(id="memory")
        with Horizontal(id="middle"):
            yield LatencyPanel(id="latency")
            yield HintsTable(id="hints")
        yield RequestsTable(id="requests")
        yield EventsTable(id="events")
        yield Input(placeholder="filter requests: model, path, engine, client, status — enter to apply",
                    id="filter")
        yield Footer()

    def on_mount(self) -> None:
        self.title = self.setup.title
        if self.setup.theme:
            self.theme = self.setup.theme
        self.query_one("#filter", Input).display = False
        for feed in self.setup.feeds:
            self._run_feed(feed, self._generation, self._feed_stop)
        if self.setup.endpoints:
            self._poll()
        if self.setup.hardware:
            self._sample_hardware()
        self._check_hangup = not self.is_headless and is_terminal()
        self.set_interval(REFRESH_S if self.setup.clock is not None else LIVE_TICK_S, self._tick)
        self.refresh_view()

    def _tick(self) -> None:
        if self._check_hangup and hung_up():
            self.exit(return_code=EXIT_HANGUP)
            return
        self._timed_redraw()

    def on_resize(self, event: events.Resize) -> None:
        compact = event.size.height < COMPACT_BELOW
        main = self.screen_stack[0]  # not a help or detail screen open over it
        if compact and isinstance(main.focused, EventsTable):
            main.add_class("-events")  # the panel in use stays on screen
        main.set_class(compact, "-compact")
        # Small terminals show Requests or Events in one place; the subtitles say which key swaps them.
        self.refresh_subtitles()

    def on_unmount(self) -> None:
        self._stop.set()
        self._feed_stop.set()

    # -- workers -------------------------------------------------------------------------------
    @work(thread=True, exit_on_error=False, description="feed")
    def _run_feed(self, feed: object, generation: int, stop: threading.Event) -> None:
        def post(batch: Batch) -> None:
            self.post_message_batch(batch, generation, stop)

        feed.run(self.post_measurement if isinstance(feed, ProxyFeed) else post, stop)  # type: ignore[attr-defined]

    def post_message_batch(self, batch: Batch, generation: int = 0, stop: threading.Event | None = None) -> None:
        """Called on a feed's thread. Blocks while INFLIGHT batches wait for the main thread: a replay at
        full speed would otherwise queue the whole log in memory ahead of the store."""
        stop = stop if stop is not None else self._stop
        while not self._inflight.acquire(timeout=0.25):
            if stop.is_set():
                return
        self.post_message(EventsBatch(batch, generation=generation))

    def post_measurement(self, batch: Batch) -> None:
        """The in-dashboard proxy posts from its event loop, which must never block (one item each)."""
        self.post_message(EventsBatch(batch, counted=False))

    @work(exclusive=True, group="poll", exit_on_error=False, description="poll engines")
    async def _poll(self) -> None:
        from ietop.pipeline.polling import poll_forever

        await poll_forever(lambda: self.store, self.setup.endpoints, self.setup.poll_interval)

    @work(thread=True, exit_on_error=False, description="sample host and GPU")
    def _sample_hardware(self) -> None:
        from ietop.pipeline.polling import sample_forever

        def post(hardware: Hardware, processes: ProcessSamples) -> None:
            self.post_message(HardwareSampled(hardware, processes))

        sample_forever(lambda: self.store, self.setup.endpoints, self._stop, post)

    # -- messages (main thread: the only writer of the store) -----------------------------------
    def on_events_batch(self, message: EventsBatch) -> None:
        batch = message.batch
        if message.counted:
            self._inflight.release()
        if message.generation != self._generation:
            return  # posted by a replay that `J` has started over since
        cpu = self.pacer.apply_began()
        if self._jump_mark is None and self._stop_at is None:
            self.store.apply_all(batch.items)
            applied = len(batch.items)
        else:
            applied = self._apply_until_event(batch)
        self._items += applied
        self.pacer.apply_ended(cpu, applied, batch.behind)
        if batch.ack and self.setup.clock is not None:
            self.setup.clock.ack(applied)
        for src, n in batch.lines.items():
            self.store.sources[src].lines = n
        if batch.error:
            self.errors.append(batch.error)
            self.notify(clean(batch.error), severity="error", timeout=10, markup=False)
        if batch.note:
            self.notify(clean(batch.note), timeout=5, markup=False)
        if batch.done and self.setup.clock is not None:
            self._replay_done = True
            self._stop_at = None
            if self._jump_mark is not None:
                self._jump_mark = None
                self.notify("no further load, unload, truncation or error: the replay is over", timeout=4)
            # The log is over: stop the clock at its last line, or windows would drift past it at N×.
            self.setup.clock.pause(at=self.store.now)
        if batch.held:
            self.replay_held = True
            self._jump_mark = None
        if batch.items and self.setup.clock is None and not self._redraw_due:
            self._redraw_due = True
            self.set_timer(FRESH_S, self._redraw_fresh)

    def _redraw_fresh(self) -> None:
        self._redraw_due = False
        self._timed_redraw()

    def _timed_redraw(self) -> None:
        """What the timers call: a redraw now, or once the last one's cost is paid off (one timer for it)."""
        wait = self.pacer.wait()
        if wait <= 0:
            self.refresh_view()
        elif not self._redraw_due:
            self._redraw_due = True
            self.set_timer(wait, self._redraw_fresh)

    def on_hardware_sampled(self, message: HardwareSampled) -> None:
        self.hardware = message.hardware
        for src, t, rss, alive in message.processes:
            self.store.process_sample(src, t, rss, alive)

    # -- drawing -------------------------------------------------------------------------------
    def now(self) -> float:
        clock = self.setup.clock
        if clock is None:
            return time.time()
        virtual = clock.now()
        return max(virtual, self.store.now) if virtual is not None else self.store.now

    def _forget_shown(self) -> None:
        self.query_one(RequestsTable).forget()

    def refresh_view(self) -> None:
        if self.paused and self.setup.clock is None and self.snap is not None:
            return
        mark = self.pacer.began()
        snap = self.view.snapshot(self.now(), WINDOWS[self.window_index])
        if snap is self.snap and self.hardware is self._drawn_hardware:
            return
        try:
            bar, residency, memory, latency, hints, requests, events_table = (
                self.query_one(EnginesBar), self.query_one(ResidencyTable), self.query_one(MemoryPanel),
                self.query_one(LatencyPanel), self.query_one(HintsTable), self.query_one(RequestsTable),
                self.query_one(EventsTable))
        except NoMatches:
            # The panels are going (the app is shutting down): a redraw timer set by the last batch can
            # still fire then, and must not turn the exit into a traceback.
            return
        self.snap, self._drawn_hardware = snap, self.hardware
        started = self._started()
        bar.show(snap, self._status_text(), self.setup.discovered, started)
        residency.show(snap, started)
        live = self.setup.clock is None
        memory.show(snap, self.hardware, None if not live else
                    "reading host and GPU…" if self.setup.hardware else "host and GPU not sampled")
        latency.show(snap)
        hints.show(snap)
        requests.show(snap)
        events_table.show(snap)
        self.call_after_refresh(self.pacer.rendered, self.pacer.drew(mark))

    def _started(self) -> dict[str, float]:
        return {e.engine: e.started for e in self.hardware.engines if e.started} if self.hardware else {}

    def refresh_status(self) -> None:
        """The header's status (replay state and speed) now, even when nothing else changed: paused, a new
        speed makes no new snapshot, and refresh_view() then draws nothing."""
        if self.snap is None:
            return
        try:
            self.query_one(EnginesBar).show(self.snap, self._status_text(), self.setup.discovered, self._started())
        except NoMatches:
            return

    def _status_text(self) -> str:
        clock = self.setup.clock
        if clock is None:
            return "PAUSED" if self.paused else ""
        state = ("replay finished" if self._replay_done else "PAUSED (n: step, p: play)" if clock.paused
                 else "jumping to the next event" if self._jump_mark is not None else "replay")
        speed = "max" if clock.speed <= 0 else f"{clock.speed:g}x"
        return f"{state} · {speed}"

    def lookup(self, ref: Ref) -> tuple[str, str | None]:
        path = self.store.sources[ref.src].path if ref.src < len(self.store.sources) else "?"
        return path.replace("\\", "/").rsplit("/", 1)[-1], self.evidence.lookup(ref.src, ref.line)

    # -- actions -------------------------------------------------------------------------------
    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_timeline(self) -> None:
        if self.snap is not None:
            self.push_screen(TimelineScreen(self.snap))

    def action_window(self, index: int) -> None:
        self.window_index = index
        self.notify(f"window: last {WINDOWS[index] / 60:.0f} minutes", timeout=2)
        self.refresh_view()

    def action_pause(self) -> None:
        self._jump_mark = self._stop_at = None
        if self.setup.clock is not None:
            self.setup.clock.toggle_pause()
        else:
            self.paused = not self.paused
        self.refresh_view()
        self.refresh_status()  # an unchanged snapshot draws nothing: the header must still say PAUSED or not

    @on(OptionList.OptionSelected, "#hints")
    @on(RowTable.Selected)
    def _open_detail(self, event: OptionList.OptionSelected | RowTable.Selected) -> None:
        table = event.option_list if isinstance(event, OptionList.OptionSelected) else event.table
        if isinstance(table, RequestsTable) and (req := table.selected()) is not None:
            name = self.snap.model_name(req.model) if self.snap is not None else None
            self.push_screen(DetailScreen("Request", request_view(req, self.lookup, name)))
        elif isinstance(table, HintsTable) and (hint := table.selected()) is not None:
            self.push_screen(DetailScreen("Hint", hint_view(hint, self.lookup)))
        elif isinstance(table, EventsTable) and (row := table.selected()) is not None:
            self.push_screen(DetailScreen("Event", event_view(row, self.lookup)))

