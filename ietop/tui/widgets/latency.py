"""Latency: TTFT / ITL / end-to-end percentiles over the chosen window, with a sparkline of medians."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from ietop.model.snapshot import LatencyRow, Snapshot
from ietop.tui.format import secs, sparkline

_SOURCE_NOTE = {
    "requests": "",
    "metrics": "from vLLM /metrics histograms",
    "none": "no timings in these sources (see ?)",
    "earlier": "none finished in this window; older ones are in Requests",
}


class LatencyPanel(Static):
    BORDER_TITLE = "Latency"

    _shown: object = None

    def show(self, snap: Snapshot) -> None:
        key = (snap.latency, snap.window_s)
        if key == self._shown:
            return  # redrawing an unchanged panel is most of an idle dashboard's CPU
        self._shown = key
        self.border_title = f"Latency · last {snap.window_s / 60:.0f}m"
        table = Table(box=None, padding=(0, 1), show_edge=False)
        table.add_column("", no_wrap=True, min_width=4)
        table.add_column("n", justify="right", no_wrap=True)
        for name in ("p50", "p90", "p99"):
            table.add_column(name, justify="right", no_wrap=True, min_width=5)
        table.add_column("trend", no_wrap=True)
        for row in snap.latency:
            if row.count == 0:
                table.add_row(Text(row.metric, style="bold"), "0", "—", "—", "—", "")
                continue
            p99_style = "bold red" if row.p99 is not None and row.p50 and row.p99 > 10 * row.p50 else ""
            trend = Text(sparkline(row.spark), style="cyan") if row.spark else Text("")
            table.add_row(Text(row.metric, style="bold"), str(row.count), secs(row.p50), secs(row.p90),
                          Text(secs(row.p99), style=p99_style), trend)
        self.update(Group(table, *(Text(note, style="dim") for note in latency_notes(snap.latency))))


def latency_notes(rows: Sequence[LatencyRow]) -> list[str]:
    """Where the figures come from, or why there are none; a note about some of the rows names them
    (`TTFT, ITL: no timings…` beside `E2E: none finished…`)."""
    notes: dict[str, list[str]] = {}  # note -> the rows it is about
    for row in rows:
        if row.count == 0 or row.source == "metrics":
            notes.setdefault(_SOURCE_NOTE.get(row.source, ""), []).append(row.metric)
    return [f"{', '.join(about)}: {note}" if len(about) < len(rows) else note
            for note, about in sorted(notes.items()) if note]
