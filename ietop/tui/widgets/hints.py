"""Hints: diagnoses from the symptom table, most severe first; Enter opens the evidence.

A hint's detail is most of what it says ("2 of 13 requests waited 12.4 s for gemma3:27b"), and a table
column cut it to "2 of" at 120 columns. Each hint is now one option: wrapped to the panel's width when every
hint fits that way, else one line each, the detail elided at a word with "…" (Enter opens the whole hint), so
a small terminal still lists every hint rather than the first one and a half."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from ietop.model.hints import Hint
from ietop.model.snapshot import Snapshot
from ietop.tui.format import clean, elide

SEVERITY_STYLE = {"crit": "bold white on red", "warn": "bold yellow", "info": "cyan"}


def hint_text(h: Hint, width: int | None = None) -> Text:
    """Severity, title, then the detail; never markup (the detail quotes model names from logs). With `width`,
    one line of at most that many cells."""
    text = Text()
    text.append(h.severity, style=SEVERITY_STYLE.get(h.severity, ""))
    text.append(" ")
    title = clean(h.title)
    if width is not None:
        title = elide(title, max(1, width - text.cell_len))
    text.append(title, style="bold")
    if h.detail:
        room = None if width is None else width - text.cell_len - 3
        if room is None or room >= 8:
            text.append(" — ")
            text.append(clean(h.detail) if room is None else elide(clean(h.detail), room))
        elif not title.endswith("…"):
            text.append(" …")  # there is more: Enter shows it
    return text


def wrapped_lines(texts: list[Text], width: int, console: Console) -> int:
    return sum(len(t.wrap(console, width)) for t in texts)


class HintsTable(OptionList):
    BORDER_TITLE = "Hints"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(markup=False, **kwargs)
        self.hints: tuple[Hint, ...] = ()
        self._drawn = False
        self._one_line = False

    def show(self, snap: Snapshot) -> None:
        if snap.hints == self.hints and self._drawn:
            return
        self.hints, self._drawn = snap.hints, True
        was = self.highlighted
        self.clear_options()
        self.border_title = f"Hints · {len(snap.hints)}" if snap.hints else "Hints"
        if not snap.hints:
            self.add_option(Option(Text("no hints in this window", style="dim"), disabled=True))
            return
        self.add_options([Option(t, id=str(i)) for i, t in enumerate(self._texts())])
        self.highlighted = min(was or 0, len(snap.hints) - 1)

    def _texts(self) -> list[Text]:
        width = self.scrollable_content_region.width or self.size.width
        whole = [hint_text(h) for h in self.hints]
        if width <= 0 or wrapped_lines(whole, width, self.app.console) <= self._room_lines():
            self._one_line = False
            return whole
        self._one_line = True
        if len(self.hints) > self._room_lines() and not self.show_vertical_scrollbar:
            width -= self.styles.scrollbar_size_vertical  # it comes with these lines: they must fit beside it
        return [hint_text(h, width) for h in self.hints]

    def _room_lines(self) -> int:
        """The rows the panel may grow to (its max-height less the border), or its height now."""
        cap = self.styles.max_height
        if cap is not None and cap.is_cells:
            return max(1, int(cap.value) - 2)
        return max(1, self.size.height - 2)

    def on_resize(self) -> None:
        if self.hints:
            was = self.highlighted
            self.clear_options()
            self.add_options([Option(t, id=str(i)) for i, t in enumerate(self._texts())])
            self.highlighted = was

    @property
    def cursor_row(self) -> int:
        return self.highlighted or 0

    def selected(self) -> Hint | None:
        if not self.hints or self.cursor_row >= len(self.hints):
            return None
        return self.hints[self.cursor_row]
