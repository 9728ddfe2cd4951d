"""RowTable, the line-drawn table of the Requests and Events panels: what DataTable gave them still holds
(cursor keys, scrolling, Enter and mouse selection, header clicks) and its cells stay inert and aligned."""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from textual.app import App, ComposeResult

from ietop.tui.format import cell
from ietop.tui.widgets import requests as requests_mod
from ietop.tui.widgets.requests import RequestsTable
from ietop.tui.widgets.rowtable import GAP, Cell, RowTable
from tests.tui.support import bare_app, chat


class TableApp(App[None]):
    def __init__(self, rows: list[tuple[Cell, ...]]) -> None:
        super().__init__()
        self.rows = rows
        self.selected: list[int] = []
        self.headers: list[str] = []

    def compose(self) -> ComposeResult:
        yield RowTable(("n", "name", "ms"), right=("ms",))

    def on_mount(self) -> None:
        table = self.query_one(RowTable)
        table.set_rows(self.rows)
        table.focus()

    def on_row_table_selected(self, event: RowTable.Selected) -> None:
        self.selected.append(event.row)

    def on_row_table_header_clicked(self, event: RowTable.HeaderClicked) -> None:
        self.headers.append(event.column)


def _rows(n: int) -> list[tuple[Cell, ...]]:
    return [((str(i), ""), cell(f"model-{i}"), (f"{i * 7}", "bold red" if i % 5 == 0 else "")) for i in range(n)]


def _text(table: RowTable, y: int) -> str:
    return "".join(seg.text for seg in table.render_line(y))


async def test_keys_move_the_cursor_and_scroll_it_into_view() -> None:
    app = TableApp(_rows(100))
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(RowTable)
        shown = table.scrollable_content_region.height - 1  # the heading takes a line
        assert table.cursor_row == 0 and table.scroll_y == 0
        await pilot.press("down", "down")
        assert table.cursor_row == 2
        await pilot.press("pagedown")
        assert table.cursor_row == 2 + shown - 1
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_row == 99
        assert table.scroll_y == 100 - shown, "the last row sits on the last line"
        assert _text(table, shown).split()[0] == "99"
        assert _text(table, 0).split() == ["n", "name", "ms"], "the heading stays while the rows scroll"
        await pilot.press("home")
        await pilot.pause()
        assert table.cursor_row == 0 and table.scroll_y == 0
        await pilot.press("up")
        assert table.cursor_row == 0
        await pilot.press("enter")
        assert app.selected == [0]


async def test_a_click_moves_the_cursor_a_second_selects_and_a_heading_reports_its_column() -> None:
    app = TableApp(_rows(10))
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(RowTable)
        await pilot.click(RowTable, offset=(2, 4))  # the fourth row: line 0 is the heading
        assert table.cursor_row == 3 and app.selected == []
        await pilot.click(RowTable, offset=(2, 4))
        assert app.selected == [3]
        # "n" is 1 cell wide, "name" 7 ("model-0"), "ms" 2: each column then GAP blank cells.
        name_x = GAP // 2 + 1 + GAP
        ms_x = name_x + cell_len("model-0") + GAP
        for x, want in ((GAP // 2, "n"), (name_x - 1, "n"), (name_x, "name"), (ms_x - 1, "name"), (ms_x, "ms")):
            await pilot.click(RowTable, offset=(x, 0))
            assert app.headers[-1] == want
        assert table.cursor_row == 3, "a heading click does not move the cursor"


async def test_cells_are_aligned_by_their_width_on_screen() -> None:
    rows: list[tuple[Cell, ...]] = [(("1", ""), cell("qwen3:8b"), ("5", "")),
                                    (("2", ""), cell("模型模型模型"), ("12345", "")),
                                    (("3", ""), cell("a\tb"), ("7", ""))]
    app = TableApp(rows)
    async with app.run_test(size=(40, 8)) as pilot:
        await pilot.pause()
        table = app.query_one(RowTable)
        lines = [_text(table, y) for y in range(4)]
        ends = {cell_len(line.rstrip()) for line in lines}
        assert len(ends) == 1, f"right-aligned numbers end in one column: {lines}"
        starts = {cell_len(line[: line.index(name)]) for line, name in zip(lines, ("name", "qwen3", "模型", "a b"),
                                                                                 strict=True)}
        assert len(starts) == 1, f"a left-aligned column starts in one column: {lines}"
        assert "模型模型模型" in lines[2], "a column is as wide as its widest text on screen, not in characters"
        assert "a b" in lines[3] and "\t" not in "".join(lines)


async def test_hostile_text_is_shown_not_sent() -> None:
    hostile = "\x1b[2J[bold red]pwned[/bold red]\x07"
    app = TableApp([(("1", ""), cell(hostile), ("1", ""))])
    async with app.run_test(size=(60, 6)) as pilot:
        await pilot.pause()
        line = _text(app.query_one(RowTable), 1)
        assert "␛[2J[bold red]pwned[/bold red]\\x07" in line
        svg: Any = app.export_screenshot()
        assert "\x1b" not in svg and "\x07" not in svg


async def test_new_rows_keep_the_cursor_within_them() -> None:
    app = TableApp(_rows(50))
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(RowTable)
        await pilot.press("end")
        table.set_rows(_rows(5))
        await pilot.pause()
        assert table.cursor_row == 4
        table.set_rows([])
        await pilot.pause()
        assert table.cursor_row == 0 and table.row_count == 0
        await pilot.press("enter", "down", "pagedown")
        assert app.selected == [], "nothing to select in an empty table"


def _keyed(keys: list[int]) -> tuple[list[tuple[Cell, ...]], list[int]]:
    return [((str(k), ""), cell(f"model-{k}"), (str(k * 7), "")) for k in keys], keys


async def test_the_cursor_stays_on_what_it_showed_when_newer_rows_come_in_above() -> None:
    app = TableApp([])
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(RowTable)
        table.set_rows(*_keyed(list(range(100, 0, -1))))  # newest first, as the panels show them
        await pilot.press("down", "down", "down")
        assert table.cursor_row == 3 and _text(table, 4).split()[0] == "97"
        table.set_rows(*_keyed(list(range(102, 2, -1))))  # two newer rows; the oldest two fall off
        await pilot.pause()
        assert table.cursor_row == 5, "still on the row of key 97"
        assert table.scroll_y == 2, "and the view moved with it: the same rows on the same lines"
        assert _text(table, 4).split()[0] == "97"
        await pilot.press("enter")
        assert app.selected == [5]
        table.set_rows(*_keyed(list(range(102, 97, -1)) + list(range(96, 2, -1))))  # 97 is gone
        await pilot.pause()
        assert table.cursor_row == 5, "its row gone, the cursor keeps its place"


async def test_a_cursor_on_the_first_row_follows_the_newest() -> None:
    app = TableApp([])
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(RowTable)
        table.set_rows(*_keyed([5, 4, 3]))
        table.set_rows(*_keyed([7, 6, 5, 4, 3]))
        await pilot.pause()
        assert table.cursor_row == 0 and table.scroll_y == 0
        assert _text(table, 1).split()[0] == "7"


async def test_the_requests_panel_keeps_the_highlighted_request_as_new_ones_arrive() -> None:
    app, src = bare_app()
    store = app.store

    def arrive(i: int) -> None:
        event = chat(i, 1.0 + i / 100)
        assert event.ts is not None
        store.apply(src, event.ts.timestamp(), event)

    async with app.run_test(size=(120, 40)) as pilot:
        for i in range(10):
            arrive(i)
        app.refresh_view()
        table = app.query_one(RequestsTable)
        table.focus()
        await pilot.press("down", "down")
        chosen = table.selected()
        assert chosen is not None and chosen.latency_s == 1.07
        for i in range(10, 13):
            arrive(i)
        app.refresh_view()
        await pilot.pause()
        assert table.cursor_row == 5 and table.selected() is chosen


async def test_the_same_requests_asked_again_are_not_sorted_again(monkeypatch: Any) -> None:
    # An idle dashboard redraws every second (ages move): the 2,000 requests were filtered and sorted each time.
    app, src = bare_app()
    store, view = app.store, app.view
    for i in range(5):
        event = chat(i, 1.0)
        assert event.ts is not None
        store.apply(src, event.ts.timestamp(), event)
    keyed: list[float] = []

    def by_time(r: Any) -> float:
        keyed.append(r.t_end)
        return float(r.t_end)

    monkeypatch.setitem(requests_mod._SORT_KEYS, "time", by_time)
    async with app.run_test(size=(120, 40)):
        table = app.query_one(requests_mod.RequestsTable)
        snap = view.snapshot(store.now + 1, 300.0)
        later = view.snapshot(store.now + 2, 300.0)
        assert later is not snap and later.requests is snap.requests, "a second later, the same records"
        table.forget()
        keyed.clear()  # what the app's own first redraw sorted
        table.show(snap)
        assert len(keyed) == 5
        table.show(later)
        assert len(keyed) == 5, "the same records, filter and sort: not sorted again"
        assert table.row_count == 5
        table.show(later, force=True)
        assert len(keyed) == 10, "forced (a new filter or sort): sorted again"
