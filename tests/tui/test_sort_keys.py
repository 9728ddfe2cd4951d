"""Sorting the Requests panel (issue 22): `s` never reversed a sort (README said it did), reaching `total` took
11 presses, and only a 2 s toast said what the sort was. Now `S` goes back a column, `r` reverses, and the
sorted column's heading carries ▼/▲ for as long as the sort holds."""

from __future__ import annotations

from ietop.tui.widgets.requests import RequestsTable
from tests.tui.support import bare_app, chat


def _header(table: RequestsTable) -> str:
    return "".join(seg.text for seg in table.render_line(0))


async def test_keys_sort_and_the_heading_says_how() -> None:
    app, src = bare_app()
    for i, latency in enumerate((3.0, 1.0, 2.0)):
        event = chat(i, latency)
        assert event.ts is not None
        app.store.apply(src, event.ts.timestamp(), event)
    async with app.run_test(size=(160, 40)) as pilot:
        app.refresh_view()
        table = app.query_one(RequestsTable)
        await pilot.pause()
        assert "time ▼" in _header(table)
        await pilot.press("S")  # back from the first column: the last, total
        await pilot.pause()
        assert (table.sort_column, table.sort_reverse) == ("total", True)
        assert "total ▼" in _header(table) and "time ▼" not in _header(table)
        assert [r.latency_s for r in table.records] == [3.0, 2.0, 1.0]
        await pilot.press("r")
        await pilot.pause()
        assert (table.sort_column, table.sort_reverse) == ("total", False)
        assert "total ▲" in _header(table)
        assert [r.latency_s for r in table.records] == [1.0, 2.0, 3.0]
        await pilot.press("s")  # forward from the last: the first again
        await pilot.pause()
        assert table.sort_column == "time" and "time ▼" in _header(table)
