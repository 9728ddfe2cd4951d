"""Requests: the newest inference requests with the facts ietop derived for each; sortable, filterable.

Enter opens the request with its evidence lines (the app handles RowTable.Selected)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

from rich.segment import Segment
from rich.text import Text
from textual.strip import Strip

from ietop.model.names import model_name
from ietop.model.records import Request
from ietop.model.snapshot import Snapshot
from ietop.tui.format import cell, clock, secs
from ietop.tui.widgets.engines import requests_note
from ietop.tui.widgets.rowtable import Cell, RowTable

SHOWN = 200
"""Rows in the table (the filter and the sort see every request kept)."""
CAPS = {"model": 48, "engine": 12, "path": 28, "client": 22}
"""The text columns' widest: longer names (a log can say anything) end in "…"; the detail screen has them whole."""
COLUMNS = ("time", "engine", "model", "status", "prompt", "trunc", "output", "load wait", "TTFT", "ITL", "total",
           "path", "client")
SORT_CYCLE = COLUMNS[:-2]
"""What `s` / `S` step through: time to total, so `total` is one `S` from `time` (a click on a heading sorts by
path or client too)."""
DROP_ORDER = ("client", "path", "engine", "ITL", "trunc", "output", "load wait", "total", "TTFT", "prompt")
"""What a narrow panel gives up first: the seeds' three questions (a load? the real prompt? how long?) stay
longest; time, model and status always stay."""
_NUMBERS = ("status", "prompt", "output", "load wait", "TTFT", "ITL", "total")
_SORT_KEYS: dict[str, Callable[[Request], Any]] = {
    "time": lambda r: r.t_end,
    "engine": lambda r: r.engine,
    "model": lambda r: r.model or "",
    "status": lambda r: r.status,
    "prompt": lambda r: r.prompt_tokens or -1,
    "trunc": lambda r: -1 if r.truncated is None else int(r.truncated),
    "output": lambda r: r.output_tokens or -1,
    "load wait": lambda r: r.load_s or -1.0,
    "TTFT": lambda r: r.ttft_s or -1.0,
    "ITL": lambda r: r.itl_s or -1.0,
    "total": lambda r: r.latency_s or -1.0,
    "path": lambda r: r.path,
    "client": lambda r: r.client or "",
}


def matches(req: Request, needle: str, model: str | None = None) -> bool:
    """`/` filter: a case-insensitive substring of model, path, engine, client or status."""
    hay = f"{req.model or ''} {model or ''} {req.path} {req.engine} {req.client or ''} {req.status}".lower()
    return needle.lower() in hay


def request_cells(r: Request, model: str | None) -> tuple[Cell, ...]:
    bad = r.status >= 400
    return (
        (clock(r.time, r.t_end), ""), cell(r.engine), cell(model_name(model) or "?"),
        (str(r.status), "bold red" if bad else "green") if r.status else ("none", "bold red"),  # 0: no answer
        ("—" if r.prompt_tokens is None else str(r.prompt_tokens), ""),
        ("yes", "bold yellow") if r.truncated else ("?", "dim") if r.truncated is None else ("", ""),
        ("—" if r.output_tokens is None else str(r.output_tokens), ""),
        (secs(r.load_s) if r.cold_load else "", "bold magenta"),
        (secs(r.ttft_s), ""), (secs(r.itl_s), ""),
        (secs(r.latency_s), "bold red" if (r.latency_s or 0) > 30 else ""),
        cell(r.path), cell(r.client or "—"),
    )


class RequestsTable(RowTable):
    BORDER_TITLE = "Requests"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(COLUMNS, right=_NUMBERS, caps=CAPS, flex="model", drop_order=DROP_ORDER, **kwargs)
        self.records: list[Request] = []
        self.filter_text = ""
        self.sort_column = "time"
        self.sort_reverse = True
        self._mark_sort()
        self._shown: tuple[int, ...] = ()
        self._asked: tuple[object, ...] = ()
        """What the last show() was asked (the snapshot's requests, by identity, and the filter and sort): the
        same again, as every second of an idle dashboard asks, is not filtered and sorted again."""
        self.note: str | None = None
        """Drawn in the empty panel: why no request can come, and what to pass (engines.requests_note)."""

    def show(self, snap: Snapshot, force: bool = False) -> None:
        note = requests_note(snap)
        if note != self.note:
            self.note = note
            self.refresh()
        asked = (snap.requests, len(snap.aliases), self.filter_text, self.sort_column, self.sort_reverse)
        if not force and self._asked and asked[0] is self._asked[0] and asked[1:] == self._asked[1:]:
            return
        self._asked = asked
        needle = self.filter_text
        rows = [r for r in snap.requests if not needle or matches(r, needle, snap.model_name(r.model))]
        rows.sort(key=_SORT_KEYS[self.sort_column], reverse=self.sort_reverse)
        rows = rows[:SHOWN]
        ident = (len(snap.aliases), *(id(r) for r in rows))
        if ident == self._shown and not force:
            return
        self._shown, self.records = ident, rows
        title = f"Requests · {len(snap.requests)} recent"
        if self.filter_text:
            title += f" · filter “{self.filter_text}” → {len(rows)}"
        self.border_title = Text(title).plain
        self.set_rows([request_cells(r, snap.model_name(r.model)) for r in rows], rows)

    def render_line(self, y: int) -> Strip:
        if not self.note or self.rows or y < 2:
            return super().render_line(y)
        width = self.scrollable_content_region.width
        lines = textwrap.wrap(self.note, max(10, width - 2))
        if y - 2 >= len(lines):
            return super().render_line(y)
        return Strip([Segment(f" {lines[y - 2]}", self.rich_style)]).crop(0, width).extend_cell_length(
            width, self.rich_style)

    def forget(self) -> None:
        """The next show() draws whatever it gets (the requests shown belong to a replay started over)."""
        self._shown, self._asked = (), ()

    def sort_by(self, column: str) -> None:
        """Sort by `column`, newest/largest first; the same column again reverses."""
        if column == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.set_header(self.sort_column, self.sort_column)
            self.sort_column, self.sort_reverse = column, True
        self._mark_sort()

    def _mark_sort(self) -> None:
        """The sort column's heading carries the direction: ▼ largest (or newest) first, ▲ smallest first.
        It stays on screen however narrow the panel: a sort by a column one cannot see reads as no order."""
        self.keep_column(self.sort_column)
        self.set_header(self.sort_column, f"{self.sort_column} {'▼' if self.sort_reverse else '▲'}", "bold")

    def on_row_table_header_clicked(self, event: RowTable.HeaderClicked) -> None:
        self.sort_by(event.column)
        self._shown, self._asked = (), ()

    def selected(self) -> Request | None:
        if not self.records or self.cursor_row >= len(self.records):
            return None
        return self.records[self.cursor_row]
