"""Events: loads, "evicted X to load Y", expiries, truncations and errors, newest first."""

from __future__ import annotations

from typing import Any

from ietop.model.snapshot import EventRow, Snapshot
from ietop.tui.format import cell, clock
from ietop.tui.widgets.rowtable import RowTable

KIND_STYLE = {"load": "green", "load_failed": "bold red", "evict": "bold magenta", "expire": "yellow",
              "switch": "magenta", "unload": "yellow", "crash": "bold red", "truncation": "bold yellow",
              "error": "red"}
SHOWN = 300


class EventsTable(RowTable):
    BORDER_TITLE = "Events"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(("time", "kind", "engine", "what"), flex="what", drop_order=("engine",), **kwargs)
        self.records: tuple[EventRow, ...] = ()

    def show(self, snap: Snapshot) -> None:
        rows = snap.events[:SHOWN]
        if rows == self.records:
            return
        self.records = rows
        # An event's text can grow (a load learns who waited for it): its time, kind and first line name it.
        self.set_rows([((clock(e.time, e.t), ""), (e.kind, KIND_STYLE.get(e.kind, "")), cell(e.engine), cell(e.text))
                       for e in rows], [(e.t, e.kind, e.refs[:1]) for e in rows])

    def selected(self) -> EventRow | None:
        if not self.records or self.cursor_row >= len(self.records):
            return None
        return self.records[self.cursor_row]
