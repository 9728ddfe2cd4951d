"""The residency timeline: which model was resident when, who evicted whom, what each swap cost."""

from __future__ import annotations

from typing import ClassVar

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
_END_STYLE = {"evicted": "bold magenta", "expired": "yellow", "crashed": "bold red", "switched": "magenta"}


def timeline_table(snap: Snapshot) -> Table | Text:
    intervals = snap.timeline
    if not intervals:
        return Text("no model loads seen yet", style="dim")
    t0 = min(i.start for i in intervals)
    t1 = max(snap.now, max((i.end or i.start) for i in intervals))
    span = max(t1 - t0, 1.0)
    table = Table(box=None, expand=True, padding=(0, 1))
    table.add_column("model", no_wrap=True)
    table.add_column(f"{clock(None, t0)} → {clock(None, t1)}", no_wrap=True, width=WIDTH)
    table.add_column("load cost", justify="right")
    table.add_column("resident", justify="right")
    table.add_column("ended", no_wrap=True)
    for i in intervals:
        end = i.end if i.end is not None else snap.now
        a = int((i.start - t0) / span * (WIDTH - 1))
        b = max(a + 1, int((end - t0) / span * (WIDTH - 1)) + 1)
        lane = Text(" " * a) + Text("█" * (b - a), style="green" if i.end is None else "cyan")
        if i.ended_by is None:
            ended = Text("resident", style="green")
        else:
            ended = Text(i.ended_by, style=_END_STYLE.get(i.ended_by, ""))
            if i.for_model:
                ended += Text(f" for {clean(i.for_model)}")
        table.add_row(Text(f"{clean(i.engine)}:{clean(i.model)}"), lane, secs(i.load_s), secs(end - i.start), ended)
    swaps = [i for i in intervals if i.ended_by == "evicted"]
    cost = sum((i.load_s or 0.0) for i in intervals)
    table.caption = f"{len(intervals)} residencies · {len(swaps)} evictions · {secs(cost)} spent loading"
    return table


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
        scroll = VerticalScroll(Static(timeline_table(self.snap), id="timeline-body"))
        scroll.border_title = "Residency timeline"
        yield scroll
        yield Footer()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
