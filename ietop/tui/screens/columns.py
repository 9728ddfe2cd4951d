"""The `c` screen: choose which columns of a table to show (the rest come back as room allows)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Footer, SelectionList


class ColumnsScreen(ModalScreen[frozenset[str] | None]):
    """Dismissed with the columns to hide (escape or enter keeps the choice; `q` leaves it as it was)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,c", "done", "apply"),
        Binding("q", "cancel", "cancel"),
    ]
    DEFAULT_CSS = """
    ColumnsScreen { align: center middle; }
    ColumnsScreen > SelectionList { width: 40; height: auto; max-height: 80%; border: thick $accent;
                                    background: $surface; }
    """

    def __init__(self, table: str, columns: Sequence[str], hidden: frozenset[str], always: Sequence[str] = ()) -> None:
        """`always`: columns that cannot be hidden (they are what a row is)."""
        super().__init__()
        self.table = table
        self.columns = tuple(columns)
        self.hidden = hidden
        self.always = frozenset(always)

    def compose(self) -> ComposeResult:
        choices = SelectionList[str](*((c, c, c not in self.hidden) for c in self.columns if c not in self.always))
        choices.border_title = f"{self.table}: columns shown"
        choices.border_subtitle = "space: toggle · esc: apply"
        yield choices
        yield Footer()

    def action_done(self) -> None:
        shown = set(self.query_one(SelectionList).selected)
        self.dismiss(frozenset(c for c in self.columns if c not in self.always and c not in shown))

    def action_cancel(self) -> None:
        self.dismiss(None)
