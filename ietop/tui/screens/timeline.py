"""The residency timeline: which model was resident when, who evicted whom, what each swap cost."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import ClassVar

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from ietop.model.snapshot import Snapshot
from ietop.tui.format import clean, clock, secs

WIDTH = 60
"""The lane's widest: a narrower screen takes what the other columns leave, down to MIN_LANE."""
MIN_LANE = 10
_END_STYLE = {"evicted": "bold magenta", "expired": "yellow", "crashed": "bold red", "switched": "magenta"}


def timeline_table(snap: Snapshot, width: int | None = None) -> Table | Text:
    """`width`: the cells the table may take (None: the lane at its widest)."""
    intervals = snap.timeline
    if not intervals:
        return Text("no model loads seen yet", style="dim")
    t0 = min(i.start for i in intervals)
    t1 = max(snap.now, max((i.end or i.start) for i in intervals))
    span = max(t1 - t0, 1.0)
    rows: list[tuple[Text, float, str, str, Text]] = []
    for i in intervals:
        end = i.end if i.end is not None else snap.now
        if i.ended_by is None:
            ended = Text("resident", style="green")
        else:
            ended = Text(i.ended_by, style=_END_STYLE.get(i.ended_by, ""))
            if i.for_model:
                ended += Text(f" for {clean(i.for_model)}")
        rows.append((Text(f"{clean(i.engine)}:{clean(i.model)}"), end, secs(i.load_s), secs(end - i.start), ended))
    # Every column but the lane at its content's width, one cell of padding each side of all five.
    fixed = (max(len("model"), *(r[0].cell_len for r in rows)) + max(len("load cost"), *(len(r[2]) for r in rows))
             + max(len("resident"), *(len(r[3]) for r in rows)) + max(len("ended"), *(r[4].cell_len for r in rows))
             + 2 * 5)
    # Narrower than that: the lane keeps MIN_LANE and "ended" wraps (the one column that may).
    lane_w = WIDTH if width is None else max(MIN_LANE, min(WIDTH, width - fixed))
    ends = f"{_stamp(t0, span)} → {_stamp(t1, span)}"
    table = Table(box=None, expand=True, padding=(0, 1))
    table.add_column("model", no_wrap=True)
    table.add_column(ends if len(ends) <= lane_w else "when", no_wrap=True, width=lane_w)
    table.add_column("load cost", justify="right", no_wrap=True)
    table.add_column("resident", justify="right", no_wrap=True)
    table.add_column("ended")
    for (label, end, load, resident, ended), i in zip(rows, intervals, strict=True):
        a = int((i.start - t0) / span * (lane_w - 1))
        b = max(a + 1, int((end - t0) / span * (lane_w - 1)) + 1)
        lane = Text(" " * a) + Text("█" * (b - a), style="green" if i.end is None else "cyan")
        table.add_row(label, lane, load, resident, ended)
    swaps = [i for i in intervals if i.ended_by == "evicted"]
    cost = sum((i.load_s or 0.0) for i in intervals)
    caption = f"{len(intervals)} residencies · {len(swaps)} evictions · {secs(cost)} spent loading"
    table.caption = caption if len(ends) <= lane_w else f"{ends} · {caption}"
    return table


def _stamp(t: float, span: float) -> str:
    """The lane's ends: the time of day, and the date too when the lane spans a day or more."""
    if span < 86_400:
        return clock(None, t)
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d %H:%MZ")


class _Fitted:
    """The timeline laid out for the width Rich gives it (known only when it renders)."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield timeline_table(self.snap, options.max_width)


class TimelineScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,t", "dismiss", "close")]
    DEFAULT_CSS = """
    TimelineScreen { align: center middle; }
    TimelineScreen > VerticalScroll { width: 95%; height: 85%; border: thick $accent; background: $surface; }
    """

    def __init__(self, snap: Snapshot) -> None:
        super().__init__()
        self.snap = snap

    def compose(self) -> ComposeResult:
        scroll = VerticalScroll(Static(_Fitted(self.snap), id="timeline-body"))
        scroll.border_title = "Residency timeline"
        yield scroll
        yield Footer()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
