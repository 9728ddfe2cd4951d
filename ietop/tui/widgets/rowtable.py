"""A read-only table drawn line by line (Textual's Line API): what the busy panels (Requests, Events) use.

Textual's DataTable measures every cell of every new row with Rich and renders each visible cell through
Rich's pipeline. Those panels replace all their rows whenever requests arrive; with 200 requests and 300
events shown that was ~170 ms of measuring and ~100 ms of rendering per redraw on the main thread (py-spy and
cProfile of bench/dashboard_loaded.py), which the feeds then waited for. Here a cell is a plain string and a
style name: a column is as wide as its widest string (`cell_len`), and a visible line is a handful of
segments, so a redraw costs about what the rows it shows cost.

Text must be made inert before it gets here (`ietop.tui.format.clean`): cells go to the terminal as they are,
never through Rich's markup parser. Keys and mouse follow DataTable's: the cursor moves with the arrows and
pages, Enter or a click on the highlighted row selects it, a click on a heading reports the column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ietop.tui.format import elide

Cell = tuple[str, str]
"""A cell: its text (inert already) and a Rich style definition ("" for none)."""
GAP = 2
"""Blank cells between two columns (DataTable pads each cell by one on either side)."""
FLEX_MIN = 16
"""The narrowest a flexible column gets: below it a model name stops being recognisable."""


class RowTable(ScrollView, can_focus=True):
    COMPONENT_CLASSES: ClassVar[set[str]] = {"rowtable--header", "rowtable--cursor"}
    DEFAULT_CSS = """
    RowTable > .rowtable--header { text-style: bold; color: $foreground; background: $panel; }
    RowTable > .rowtable--cursor { background: $block-cursor-blurred-background; }
    RowTable:focus > .rowtable--cursor { color: $block-cursor-foreground; background: $block-cursor-background;
                                         text-style: $block-cursor-text-style; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select", "select", show=False),
        Binding("up", "cursor(-1)", "up", show=False),
        Binding("down", "cursor(1)", "down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home", "cursor_to(0)", "first", show=False),
        Binding("end", "cursor_to(-1)", "last", show=False),
    ]

    class Selected(Message):
        """Enter, or a click on the highlighted row."""

        def __init__(self, table: RowTable, row: int) -> None:
            super().__init__()
            self.table = table
            self.row = row

    class HeaderClicked(Message):
        def __init__(self, table: RowTable, column: str) -> None:
            super().__init__()
            self.table = table
            self.column = column

    class ColumnsFitted(Message):
        """The columns shown changed (the panel was resized, or a column was hidden or shown)."""

        def __init__(self, table: RowTable) -> None:
            super().__init__()
            self.table = table

    def __init__(self, columns: Sequence[str], *, right: Sequence[str] = (), caps: Mapping[str, int] | None = None,
                 flex: str | None = None, drop_order: Sequence[str] = (), **kwargs: Any) -> None:
        """`right`: the columns whose cells are right-aligned (numbers). `caps`: the widest a text column may
        grow. `flex`: a text column that gives up width, down to FLEX_MIN, when the table is wider than its
        panel. A longer cell ends in "…": a 5,000-character model name from a log must not push every other
        column off the screen. `drop_order`: the columns that leave, first one first, when the table is still
        wider than its panel: a column is shown whole or not at all, so no number is ever cut ("TT", "1." at
        80 columns was the alternative). The others always stay (the panel scrolls sideways if even they do
        not fit)."""
        super().__init__(**kwargs)
        self.columns = tuple(columns)
        self._right = frozenset(right)
        self._caps = tuple((caps or {}).get(c) for c in self.columns)
        self._flex = self.columns.index(flex) if flex is not None else None
        self._drop_order = tuple(self.columns.index(c) for c in drop_order)
        self.chosen_hidden: frozenset[str] = frozenset()
        """Columns the user hid (`c`): never shown, whatever the room."""
        self.absent: frozenset[str] = frozenset()
        """Columns with nothing to tell for the rows shown (Residency's `host` while one host is watched): not
        drawn, and not counted as hidden (the subtitle does not offer them)."""
        self.kept: str | None = None
        """A column that must stay whatever its place in `drop_order` (the sort column)."""
        self.hidden: tuple[str, ...] = ()
        """The columns not shown now, by choice or for want of room."""
        self._natural: tuple[int, ...] = ()
        self.rows: list[tuple[Cell, ...]] = []
        self.cursor_row = 0
        self._keys: list[object] = []
        self._widths = tuple(cell_len(c) for c in self.columns)
        self._header: tuple[Cell, ...] = tuple((c, "") for c in self.columns)
        self._styles: dict[str, Style] = {}

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def cell_text(self, row: int, column: int) -> str:
        return self.rows[row][column][0]

    def set_rows(self, rows: list[tuple[Cell, ...]], keys: Sequence[object] | None = None) -> None:
        """Replace the rows. `keys`: what each row shows, one per row (compared by identity, then equality).
        With them a cursor below the first row stays on what it was on, and the view scrolls with it, when
        newer rows come in above (Enter then opens what was highlighted); on the first row it stays there, with
        the newest. Without them, or when its row is gone, the cursor keeps its index (clamped), as DataTable's
        did after clear()."""
        old = self._keys[self.cursor_row] if keys is not None and 0 < self.cursor_row < len(self._keys) else None
        self._keys = list(keys) if keys is not None else []
        self.rows = rows
        widths = [cell_len(text) for text, _style in self._header]
        for i, column in enumerate(zip(*rows, strict=True)):
            texts = [text for text, _style in column]
            # cell_len() only for a column with a character that may be wide: most are ASCII, len() is C.
            wide = not "".join(texts).isascii()
            widths[i] = max(widths[i], max(map(cell_len if wide else len, texts)))
            cap = self._caps[i]
            if cap is not None and widths[i] > cap:
                widths[i] = max(cap, cell_len(self._header[i][0]))
        self._natural = tuple(widths)
        self._fit()
        index = self._index(old) if old is not None else None
        if index is not None and index != self.cursor_row:
            self.scroll_to(y=self.scroll_y + index - self.cursor_row, animate=False)
            self.move_cursor(index)
        else:
            self.cursor_row = max(0, min(self.cursor_row, len(rows) - 1))
        self.refresh()

    def _fit(self) -> None:
        """The widths for the panel's width: the flexible column narrowed by what the table overflows, then
        whole columns dropped in `drop_order` until the rest fits. A hidden column has width 0."""
        widths = list(self._natural or (cell_len(text) for text, _style in self._header))
        for i, name in enumerate(self.columns):
            if name in self.chosen_hidden or name in self.absent:
                widths[i] = 0
        room = self.scrollable_content_region.width
        # The vertical scrollbar comes and goes with the row count, after this: count it now, or the last
        # column is cut by it until the next resize ("tota" at 80 columns).
        needs_bar = len(self.rows) + 1 > self.scrollable_content_region.height
        if needs_bar != self.show_vertical_scrollbar and self.styles.overflow_y == "auto":
            room += -self.styles.scrollbar_size_vertical if needs_bar else self.styles.scrollbar_size_vertical

        def over() -> int:
            return sum(w + GAP for w in widths if w) - room

        if self._flex is not None and room > 0 and over() > 0 and widths[self._flex]:
            i = self._flex
            widths[i] = max(min(widths[i], max(FLEX_MIN, cell_len(self._header[i][0]))), widths[i] - over())
        kept = self.columns.index(self.kept) if self.kept in self.columns else None
        natural = list(widths)
        dropped = []
        for i in self._drop_order:
            if room <= 0 or over() <= 0:
                break
            if i != kept and widths[i]:
                widths[i] = 0
                dropped.append(i)
        for i in reversed(dropped[:-1]):  # a narrower, later column may fit where a wide one did not
            if over() + natural[i] + GAP <= 0:
                widths[i] = natural[i]
        hidden = tuple(name for name, w in zip(self.columns, widths, strict=True) if not w and name not in self.absent)
        self._widths = tuple(widths)
        self.virtual_size = Size(max(0, over() + room), len(self.rows) + 1)
        if hidden != self.hidden:
            self.hidden = hidden
            self.post_message(self.ColumnsFitted(self))

    def column_spans(self) -> list[tuple[int, str, int, int]]:
        """(index, name, x, width) of each column shown, x in the table's own (unscrolled) cells."""
        spans, x = [], GAP // 2
        for i, (name, w) in enumerate(zip(self.columns, self._widths, strict=True)):
            if w:
                spans.append((i, name, x, w))
                x += w + GAP
        return spans

    def hide_columns(self, names: Sequence[str]) -> None:
        """The user's choice of columns to hide (the others come back as room allows)."""
        self.chosen_hidden = frozenset(n for n in names if n in self.columns)
        self._fit()
        self.refresh()

    def set_absent(self, names: Sequence[str]) -> None:
        """The columns that have nothing to tell now (see `absent`); set before `set_rows`, which fits them."""
        self.absent = frozenset(n for n in names if n in self.columns)

    def keep_column(self, name: str | None) -> None:
        self.kept = name
        self._fit()
        self.refresh()

    def on_resize(self) -> None:
        self._fit()
        self.refresh()

    def set_header(self, column: str, text: str, style: str = "") -> None:
        """Show `text` over `column` (a sort marker, say); the column keeps its name for clicks and sorting."""
        i = self.columns.index(column)
        header = list(self._header)
        header[i] = (text, style)
        self._header = tuple(header)
        natural = list(self._natural or (cell_len(t) for t, _style in self._header))
        natural[i] = max(natural[i], cell_len(text))
        self._natural = tuple(natural)
        self._fit()
        self.refresh()

    def _index(self, key: object) -> int | None:
        try:
            return self._keys.index(key)
        except ValueError:
            return None

    def move_cursor(self, row: int) -> None:
        if not self.rows:
            return
        self.cursor_row = max(0, min(row, len(self.rows) - 1))
        shown = max(1, self.scrollable_content_region.height - 1)
        top = int(self.scroll_y)
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False)
        elif self.cursor_row >= top + shown:
            self.scroll_to(y=self.cursor_row - shown + 1, animate=False)
        self.refresh()

    # -- drawing -------------------------------------------------------------------------------
    def _style(self, spec: str) -> Style:
        style = self._styles.get(spec)
        if style is None:
            style = self._styles[spec] = Style.parse(spec) if spec else Style()
        return style

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        base = self.rich_style
        if y == 0:
            cells: Sequence[Cell] = self._header
            line_style = base + self.get_component_rich_style("rowtable--header")
        else:
            index = scroll_y + y - 1
            if index >= len(self.rows):
                return Strip.blank(width, base)
            cells = self.rows[index]
            line_style = base
            if index == self.cursor_row:
                line_style = base + self.get_component_rich_style("rowtable--cursor")
        segments = [Segment(" " * (GAP // 2), line_style)]
        right = self._right
        for name, (text, spec), w in zip(self.columns, cells, self._widths, strict=True):
            if not w:
                continue
            if name in right:
                padded = " " * (w - cell_len(text)) + text
            elif len(text) > w and cell_len(text) > w:
                padded = set_cell_size(elide(text, w), w)  # only a capped or flexible column holds a longer text
            else:
                padded = text + " " * (w - len(text)) if text.isascii() else set_cell_size(text, w)
            style = line_style + self._style(spec) if spec else line_style
            segments.append(Segment(padded, style))
            segments.append(Segment(" " * GAP, line_style))
        strip = Strip(segments).crop(scroll_x, scroll_x + width)
        return strip.extend_cell_length(width, line_style)

    # -- input ---------------------------------------------------------------------------------
    def action_select(self) -> None:
        if self.rows:
            self.post_message(self.Selected(self, self.cursor_row))

    def action_cursor(self, step: int) -> None:
        self.move_cursor(self.cursor_row + step)

    def action_page(self, direction: int) -> None:
        self.move_cursor(self.cursor_row + direction * max(1, self.scrollable_content_region.height - 2))

    def action_cursor_to(self, row: int) -> None:
        self.move_cursor(row if row >= 0 else len(self.rows) - 1)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            x = offset.x + int(self.scroll_x) - GAP // 2
            for name, w in zip(self.columns, self._widths, strict=True):
                if not w:
                    continue
                if x < w + GAP:
                    self.post_message(self.HeaderClicked(self, name))
                    return
                x -= w + GAP
            return
        row = int(self.scroll_y) + offset.y - 1
        if row >= len(self.rows):
            return
        if row == self.cursor_row:
            self.post_message(self.Selected(self, row))
        self.move_cursor(row)
        event.stop()
