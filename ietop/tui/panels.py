"""What the dashboard's keys do to its panels: which columns show (`c`), the filter (`/`) and sort (`s`, `S`, `r`)
of Requests, Events in a small terminal (`e`); what a narrow panel hid (its subtitle); the screen as plain
text (`ctrl+s`), for a bug report or a chat where an SVG will not do, and the palette's screenshot; the per-model
figures (`m`) and the memory budget (`b`)."""

from __future__ import annotations

import io
import os
import time
from typing import Any

from rich.console import Console
from textual import on
from textual.app import App
from textual.css.query import NoMatches
from textual.widgets import Input

from ietop.model.snapshot import Snapshot
from ietop.pipeline.hardware import Hardware
from ietop.tui.format import clean
from ietop.tui.screens.budget import BudgetScreen
from ietop.tui.screens.columns import ColumnsScreen
from ietop.tui.screens.models import ModelsScreen
from ietop.tui.widgets.events import EventsTable
from ietop.tui.widgets.requests import SORT_CYCLE, RequestsTable
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
    """The app's panel keys (mixed into IetopApp): columns, the text dump, Events, the filter and the sort."""

    snap: Snapshot | None
    hardware: Hardware | None

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

    def action_models(self) -> None:
        """`m`: per engine and model, the figures `ietop analyze` lists under `models`, for what the view holds."""
        if self.snap is not None:
            self.push_screen(ModelsScreen(self.snap))

    def action_budget(self) -> None:
        """`b`: which models fit together and what a swap costs; it follows new loads while open."""
        if self.snap is not None:
            self.push_screen(BudgetScreen(lambda: (self.snap, self.hardware)))

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

    def deliver_screenshot(self, filename: str | None = None, path: str | None = None,
                           time_format: str | None = None) -> str | None:
        """The command palette's "Screenshot": an SVG in the current directory (Textual's default, the
        Downloads folder, is often missing on a server) and a toast naming the file, or why it was not saved."""
        directory = path or os.getcwd()
        try:
            saved = self.save_screenshot(filename, directory, time_format)
        except OSError as exc:
            self.notify(clean(f"screenshot not saved in {directory}: {exc.strerror or exc}"), severity="error",
                        timeout=8, markup=False)
            return None
        self.notify(clean(f"screenshot saved: {saved}"), timeout=6, markup=False)
        return saved

    # -- Requests: filter and sort -------------------------------------------------------------
    def action_events(self) -> None:
        """The Events panel. On a small terminal it shares its place with Requests: `e` swaps the two."""
        main = self.screen_stack[0]
        if main.has_class("-compact"):
            show = not main.has_class("-events")
            main.set_class(show, "-events")
            (self.query_one(EventsTable) if show else self.query_one(RequestsTable)).focus()
        else:
            self.query_one(EventsTable).focus()

    def _requests_on_screen(self) -> None:
        """Before a key that acts on Requests (filter, sort): on a small terminal, show them."""
        self.screen_stack[0].remove_class("-events")

    def action_filter(self) -> None:
        self._requests_on_screen()
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        table = self.query_one(RequestsTable)
        box.value, box.display, table.filter_text = "", False, ""
        if self.snap is not None:
            table.show(self.snap, force=True)
        table.focus()

    def action_sort(self, step: int = 1) -> None:
        """`s` the next column, `S` the one before (so `total`, the last, is one key from `time`), `r` the same
        column reversed (step 0). The heading shows the column and direction (▼/▲)."""
        self._requests_on_screen()
        table = self.query_one(RequestsTable)
        at = SORT_CYCLE.index(table.sort_column) if table.sort_column in SORT_CYCLE else 0
        table.sort_by(SORT_CYCLE[(at + step) % len(SORT_CYCLE)])
        if self.snap is not None:
            table.show(self.snap, force=True)

    @on(Input.Submitted, "#filter")
    def _apply_filter(self, event: Input.Submitted) -> None:
        table = self.query_one(RequestsTable)
        table.filter_text = event.value.strip()
        event.input.display = False
        if self.snap is not None:
            table.show(self.snap, force=True)
        table.focus()
