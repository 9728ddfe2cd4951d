"""What the dashboard's keys do to its panels' layout: which columns show (`c`), what a narrow panel hid (its
subtitle), and the screen as plain text (`ctrl+s`), for a bug report or a chat where an SVG will not do."""

from __future__ import annotations

import io
import os
import time
from typing import Any

from rich.console import Console
from textual.app import App
from textual.css.query import NoMatches

from ietop.tui.format import clean
from ietop.tui.screens.columns import ColumnsScreen
from ietop.tui.widgets.events import EventsTable
from ietop.tui.widgets.requests import RequestsTable
from ietop.tui.widgets.rowtable import RowTable

ALWAYS = {"Requests": ("time", "model", "status"), "Events": ("time", "kind", "what"), "Residency": ("model",)}
"""Columns that are what a row is: they cannot be hidden."""


def screen_text(app: App[Any]) -> str:
    """The screen as the terminal shows it, characters only. Textual's own export_screenshot() renders the
    same compositor update to SVG; there is no public call for the text."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True, force_terminal=True,
                      color_system="truecolor", legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return "\n".join(line.rstrip() for line in console.export_text(styles=False).splitlines()) + "\n"


def subtitle(table: RowTable, compact: bool) -> str | None:
    """What the panel's bottom border says: the columns a narrow panel hides, and on a small terminal which
    key swaps Requests and Events."""
    parts = []
    auto = [c for c in table.hidden if c not in table.chosen_hidden]
    if auto:
        parts.append(f"+{len(auto)} col{'s' if len(auto) > 1 else ''} when wider · c: choose")
    elif table.chosen_hidden:
        parts.append(f"{len(table.chosen_hidden)} hidden · c: choose")
    if compact and isinstance(table, RequestsTable):
        parts.append("e: events")
    elif compact and isinstance(table, EventsTable):
        parts.append("e: requests")
    return " · ".join(parts) or None


class PanelControls(App[None]):
    """The app's panel keys (mixed into IetopApp)."""

    def _compact(self) -> bool:
        return self.screen_stack[0].has_class("-compact")

    def on_row_table_columns_fitted(self, event: RowTable.ColumnsFitted) -> None:
        event.table.border_subtitle = subtitle(event.table, self._compact())

    def refresh_subtitles(self) -> None:
        compact = self._compact()
        for table in self.screen_stack[0].query(RowTable):
            table.border_subtitle = subtitle(table, compact)

    def action_columns(self) -> None:
        """Choose the columns of the focused table (Requests when no table has the focus)."""
        try:
            focused = self.screen.focused
            table = focused if isinstance(focused, RowTable) else self.screen_stack[0].query_one(RequestsTable)
        except NoMatches:
            return
        name = str(table.BORDER_TITLE)

        def chosen(hidden: frozenset[str] | None) -> None:
            if hidden is not None:
                table.hide_columns(sorted(hidden))
                self.refresh_subtitles()

        self.push_screen(ColumnsScreen(name, table.columns, table.chosen_hidden, ALWAYS.get(name, ())), chosen)

    def action_dump(self) -> None:
        """ctrl+s: the screen as plain text, in the current directory; the toast names the file."""
        path = os.path.join(os.getcwd(), time.strftime("ietop-screen-%Y%m%d-%H%M%S.txt"))
        try:
            with open(path, "x", encoding="utf-8") as out:
                out.write(screen_text(self))
        except OSError as exc:
            self.notify(clean(f"screen not saved: {exc.strerror or exc}"), severity="error", timeout=8,
                        markup=False)
            return
        self.notify(clean(f"screen saved as text: {path}"), timeout=6, markup=False)
