"""Hints: diagnoses from the symptom table, most severe first; Enter opens the evidence."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from ietop.model.hints import Hint
from ietop.model.snapshot import Snapshot
from ietop.tui.format import safe

SEVERITY_STYLE = {"crit": "bold white on red", "warn": "bold yellow", "info": "cyan"}


class HintsTable(DataTable[object]):
    BORDER_TITLE = "Hints"

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.hints: tuple[Hint, ...] = ()
        self._drawn = False

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.add_columns("sev", "hint", "detail")

    def show(self, snap: Snapshot) -> None:
        if snap.hints == self.hints and self._drawn:
            return
        self.hints, self._drawn = snap.hints, True
        self.clear()
        if not snap.hints:
            self.add_row(Text(""), Text("no hints in this window", style="dim"), Text(""))
        for i, h in enumerate(snap.hints):
            self.add_row(Text(h.severity, style=SEVERITY_STYLE.get(h.severity, "")), safe(h.title, "bold"),
                         safe(h.detail), key=str(i))

    def selected(self) -> Hint | None:
        if not self.hints or self.cursor_row >= len(self.hints):
            return None
        return self.hints[self.cursor_row]
