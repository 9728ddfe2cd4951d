"""A log can name a model with 5,000 characters (issue 21): the Requests panel used to grow its model column
to fit and push every other column off screen. Text columns now stop at a cap, the rest of the name elided
with "…"; numbers are never cut."""

from __future__ import annotations

from datetime import datetime, timezone

from textual.app import App, ComposeResult

from ietop.tui.format import cell
from ietop.tui.widgets.requests import CAPS, RequestsTable
from ietop.tui.widgets.rowtable import Cell, RowTable
from parsers.events import ProxyRequest
from tests.tui.support import bare_app

LONG = "hf.co/" + "x" * 5000 + ":Q4_K_M"


def _line(table: RowTable, y: int) -> str:
    return "".join(seg.text for seg in table.render_line(y))


class TableApp(App[None]):
    def __init__(self, rows: list[tuple[Cell, ...]]) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        yield RowTable(("n", "model", "ms"), right=("ms",), caps={"model": 12})

    def on_mount(self) -> None:
        self.query_one(RowTable).set_rows(self.rows)


async def test_a_capped_column_elides_at_its_end() -> None:
    app = TableApp([(("1", ""), cell(LONG), ("1234", "")), (("2", ""), cell("qwen3:8b"), ("7", ""))])
    async with app.run_test(size=(40, 8)):
        table = app.query_one(RowTable)
        header, first, second = (_line(table, y) for y in range(3))
        assert "ms" in header
        assert "hf.co/xxxxx…" in first and first.rstrip().endswith("1234")
        assert "qwen3:8b" in second and second.rstrip().endswith("7")


async def test_the_requests_panel_keeps_its_columns_beside_a_5000_character_model() -> None:
    app, src = bare_app()
    ts = datetime(2026, 11, 30, 10, 0, 1, tzinfo=timezone.utc)
    request = ProxyRequest(1, ts, "POST", "/api/chat", 200, LONG, True, 0.1, 0.25, 0.02, 3.5, 40, 812, 40,
                           None, None, 100, 2000)
    app.store.apply(src, ts.timestamp(), request)
    async with app.run_test(size=(120, 40)) as pilot:
        app.refresh_view()
        await pilot.pause()
        table = app.query_one(RequestsTable)
        assert table.row_count == 1
        header, row = _line(table, 0), _line(table, 1)
        assert "total" in header and "TTFT" in header
        assert "…" in row and "3.5s" in row and "812" in row
        assert table.cell_text(0, 2) == LONG[:len(table.cell_text(0, 2))]  # the cell keeps the whole name
        assert len(table.cell_text(0, 2)) > CAPS["model"]
