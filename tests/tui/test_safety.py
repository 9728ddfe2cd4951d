"""Text from logs is untrusted: markup is shown literally and escape sequences never reach the terminal."""

from __future__ import annotations

from rich.console import Console

from ietop.model.snapshot import WINDOWS
from ietop.tui.format import clean, safe
from ietop.tui.run import replay_app
from ietop.tui.screens.detail import DetailScreen
from ietop.tui.widgets.events import EventsTable
from ietop.tui.widgets.requests import RequestsTable
from tests.tui.support import HOSTILE, replay_to_end


def test_clean_makes_controls_visible() -> None:
    assert clean("a\x1b[2Jb\x07c\x9bd") == "a␛[2Jb\\x07c\\x9bd"
    assert clean("tab\tok") == "tab\tok"


def test_safe_text_is_not_markup() -> None:
    console = Console(record=True, width=80, color_system=None)
    console.print(safe("[bold red]pwned[/bold red] [link=http://evil]x[/link]"))
    assert "[bold red]pwned[/bold red] [link=http://evil]x[/link]" in console.export_text()


async def test_hostile_log_line_is_shown_literally() -> None:
    app = replay_app([str(HOSTILE)], 0)
    async with app.run_test(size=(160, 40)) as pilot:
        await replay_to_end(pilot)
        table = app.query_one(EventsTable)
        cells = [table.cell_text(r, 3) for r in range(table.row_count)]
        hostile = next(c for c in cells if "pwned" in c)
        assert "[bold red]pwned[/bold red] [link=http://evil]x[/link]" in hostile
        # The parser strips ANSI sequences from messages (they are paste artefacts): nothing raw remains.
        assert "\x1b" not in hostile and "\x07" not in hostile
        # The whole rendered screen holds no raw escape from the log.
        svg = app.export_screenshot()
        assert "pwned[/bold red]" in svg.replace("&#160;", " ")
        assert "\x1b" not in svg and "\x07" not in svg
        # The detail view of that event shows the raw line, equally inert.
        table.focus()
        table.move_cursor(row=cells.index(hostile))
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        body = app.export_screenshot().replace("&#160;", " ")
        # The evidence is the raw line: its escapes are shown as visible stand-ins, not sent.
        assert "hostile-markup.log:2" in body
        assert "␛[2J" in body and "\\x07" in body
        assert "\x1b" not in body and "\x07" not in body


async def test_a_redraw_while_the_panels_go_is_not_a_crash() -> None:
    # At exit Textual removes the panels while a redraw timer set by the last batch may still fire (seen in
    # CI with the in-dashboard proxy): that redraw must draw nothing rather than raise NoMatches.
    app = replay_app([str(HOSTILE)], 0)
    async with app.run_test(size=(160, 40)) as pilot:
        await replay_to_end(pilot)
        await app.query_one(EventsTable).remove()
        app.window_index = (app.window_index + 1) % len(WINDOWS)  # a new snapshot: the redraw is not skipped
        app.refresh_view()  # raised NoMatches before
        app.query_one(RequestsTable)  # the rest of the screen is still there
