"""Events: loads, "evicted X to load Y", expiries, truncations and errors, newest first."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from ietop.model.snapshot import EventRow, Snapshot
from ietop.tui.format import clock, safe

KIND_STYLE = {"load": "green", "load_failed": "bold red", "evict": "bold magenta", "expire": "yellow",
              "switch": "magenta", "unload": "yellow", "crash": "bold red", "truncation": "bold yellow",
              "error": "red"}
SHOWN = 300


class EventsTable(DataTable[object]):
    BORDER_TITLE = "Events"

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.records: tuple[EventRow, ...] = ()

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.add_columns("time", "kind", "engine", "what")

    def show(self, snap: Snapshot) -> None:
        rows = snap.events[:SHOWN]
        if rows == self.records:
            return
        self.records = rows
        self.clear()
        for e in rows:
            self.add_row(Text(clock(e.time, e.t)), Text(e.kind, style=KIND_STYLE.get(e.kind, "")), safe(e.engine),
                         safe(e.text))

    def selected(self) -> EventRow | None:
        if not self.records or self.cursor_row >= len(self.records):
            return None
        return self.records[self.cursor_row]
