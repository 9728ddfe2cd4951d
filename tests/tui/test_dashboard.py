"""The dashboard replaying the bundled incident: panels show what the log says, and the keys work.

The incident (ietop/demo/incident.log) is built from real Ollama v0.30+ line shapes; its ground truth is
checked independently through `ietop analyze` in tests/cli/test_demo_incident.py. Here the same facts
must reach the screen."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.coordinate import Coordinate
from textual.widgets import DataTable

from ietop.model.snapshot import WINDOWS
from ietop.tui.run import replay_app
from ietop.tui.screens.detail import DetailScreen
from ietop.tui.screens.help import HelpScreen
from ietop.tui.screens.timeline import TimelineScreen
from ietop.tui.widgets.events import EventsTable
from ietop.tui.widgets.hints import HintsTable
from ietop.tui.widgets.requests import RequestsTable
from ietop.tui.widgets.residency import ResidencyTable
from ietop.tui.widgets.rowtable import RowTable
from tests.tui.support import INCIDENT, replay_to_end


def _column(table: DataTable[object] | RowTable, col: int) -> list[str]:
    if isinstance(table, RowTable):
        return [table.cell_text(r, col) for r in range(table.row_count)]
    return [str(table.get_cell_at(Coordinate(r, col))) for r in range(table.row_count)]


@pytest.fixture
def app():  # type: ignore[no-untyped-def]
    return replay_app([str(INCIDENT)], 0)


async def test_panels_show_the_incident(app) -> None:  # type: ignore[no-untyped-def]
    async with app.run_test(size=(160, 48)) as pilot:
        await replay_to_end(pilot)
        snap = app.snap
        assert snap is not None
        # Residency at the end: the keep-alive expired the last model (14:12:03), nothing is resident.
        assert _column(app.query_one(ResidencyTable), 0) == ["nothing resident"]
        # The timeline: qwen3:8b evicted for gemma3:27b, gemma3:27b evicted for qwen3:8b, then expiry.
        assert [(i.model, i.ended_by, i.for_model) for i in snap.timeline] == [
            ("qwen3:8b", "evicted", "gemma3:27b"), ("gemma3:27b", "evicted", "qwen3:8b"),
            ("qwen3:8b", "expired", None)]
        assert [i.load_s for i in snap.timeline] == [4.17, 12.41, 2.86]
        # Requests: every inference request of the incident, newest first, named by model.
        requests = app.query_one(RequestsTable)
        assert requests.row_count == len(snap.requests) == 19
        assert requests.records[0].t_end >= requests.records[-1].t_end
        # The 499 never reached a model, but it gave up during the gemma3:27b load: named by it (issue 23).
        assert set(_column(requests, 2)) == {"qwen3:8b", "gemma3:27b"}
        # Events: loads and "evicted X to load Y".
        whats = _column(app.query_one(EventsTable), 3)
        assert "evicted qwen3:8b to load gemma3:27b" in whats
        assert "evicted gemma3:27b to load qwen3:8b" in whats
        assert "loaded gemma3:27b in 12.4s" in whats
        assert sum(w.startswith("prompt truncated") for w in whats) == 4
        # Hints: the 5-minute window holds only what is still true at the end; 15 minutes hold the thrash.
        assert "eviction-thrash" not in {h.id for h in app.query_one(HintsTable).hints}
        await pilot.press("3")
        assert "eviction-thrash" in {h.id for h in app.query_one(HintsTable).hints}


async def test_residency_mid_incident(tmp_path: Path) -> None:
    """Replay the incident up to 14:05, when gemma3:27b is resident after evicting qwen3:8b."""
    lines = INCIDENT.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "14:05:" in line)
    prefix = tmp_path / "incident-to-1405.log"
    prefix.write_text("".join(lines[:cut]))
    app = replay_app([str(prefix)], 0)
    async with app.run_test(size=(160, 48)) as pilot:
        await replay_to_end(pilot)
        (row,) = app.snap.resident
        assert (row.engine, row.model, row.source, row.loads, row.last_load_s) == ("ollama", "gemma3:27b", "log", 1,
                                                                                     12.41)
        assert row.ctx == 8192 and row.ctx_configured == 8192 and row.parallel == 2
        table = app.query_one(ResidencyTable)
        assert _column(table, 0) == ["gemma3:27b"]
        # The only interval still open is the resident model's.
        assert [i.model for i in app.snap.timeline if i.end is None] == ["gemma3:27b"]


async def test_keys(app) -> None:  # type: ignore[no-untyped-def]
    async with app.run_test(size=(160, 48)) as pilot:
        await replay_to_end(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.press("t")
        assert isinstance(app.screen, TimelineScreen)
        assert app.screen.snap.timeline
        await pilot.press("escape")
        assert not isinstance(app.screen, TimelineScreen)
        for key, index in (("1", 0), ("3", 2), ("2", 1)):
            await pilot.press(key)
            assert app.snap.window_s == WINDOWS[index]
        # Sort: `s` moves to the next column; the rows follow.
        table = app.query_one(RequestsTable)
        await pilot.press("s")
        assert table.sort_column == "engine"
        # Filter: `/`, type, enter.
        model = "gemma3:27b"
        await pilot.press("slash")
        await pilot.press(*model)
        await pilot.press("enter")
        assert table.filter_text == model
        assert table.records and all(app.snap.model_name(r.model) == model for r in table.records)
        assert table.row_count < len(app.snap.requests)
        await pilot.press("escape")
        assert table.filter_text == "" and table.row_count == len(app.snap.requests)
        # Enter on a request opens it with its evidence line.
        table.focus()
        await pilot.press("enter")
        assert isinstance(app.screen, DetailScreen)
        shot = app.export_screenshot().replace("&#160;", " ")
        assert "incident.log:" in shot and "Evidence" in shot
        await pilot.press("escape")
        # Enter on a hint opens its evidence and next step.
        hints = app.query_one(HintsTable)
        hints.focus()
        await pilot.press("enter")
        assert isinstance(app.screen, DetailScreen)
        assert "Next step" in app.export_screenshot().replace("&#160;", " ")
        await pilot.press("escape")
        # Tab moves focus between panels.
        before = app.focused
        await pilot.press("tab")
        assert app.focused is not before


async def test_pause_and_step_hold_the_replay_clock() -> None:
    app = replay_app([str(INCIDENT)], 1.0, paused=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.5)
        clock = app.setup.clock
        assert clock is not None and clock.paused
        applied = app.store.version
        await pilot.pause(0.5)
        assert app.store.version == applied, "a paused replay must not advance"
        await pilot.press("n")
        for _ in range(40):
            await pilot.pause(0.05)
            if app.store.version > applied:
                break
        assert app.store.version > applied, "n releases the next event"
        await pilot.press("p")
        assert not clock.paused
        await pilot.press("plus")
        assert clock.speed == 2.0


async def test_small_terminal_swaps_requests_and_events(app) -> None:  # type: ignore[no-untyped-def]
    """At 80x24 Requests and Events share one place (there is no room for both): `e` swaps them, and a key
    that acts on requests (filter, sort) brings Requests back. Taller, `e` only moves the focus."""
    async with app.run_test(size=(80, 24)) as pilot:
        await replay_to_end(pilot)
        requests, events = app.query_one(RequestsTable), app.query_one(EventsTable)
        assert requests.display and not events.display
        assert "e: events" in app.export_screenshot().replace("&#160;", " ")
        await pilot.press("e")
        assert events.display and not requests.display
        assert app.focused is events
        shot = app.export_screenshot().replace("&#160;", " ")
        assert "qwen3:8b expired" in shot and "e: requests" in shot
        # Enter opens the highlighted event, as in the tall layout.
        await pilot.press("enter")
        assert isinstance(app.screen, DetailScreen)
        await pilot.press("e")  # over the detail screen: nothing moves underneath
        await pilot.press("escape")
        assert events.display and not requests.display
        await pilot.press("e")
        assert requests.display and not events.display
        assert app.focused is requests
        await pilot.press("e", "slash")
        assert requests.display and not events.display
        await pilot.press("escape")
        # The Events panel focused on a tall screen stays on screen when the window shrinks.
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        assert requests.display and events.display
        assert "e: events" not in str(requests.border_subtitle or "")
        await pilot.press("e")
        assert app.focused is events
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert events.display and not requests.display and app.focused is events


async def test_resize_under_an_open_screen_lays_out_the_panels(app) -> None:  # type: ignore[no-untyped-def]
    async with app.run_test(size=(120, 40)) as pilot:
        await replay_to_end(pilot)
        await pilot.press("question_mark")
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.press("escape")
        assert app.screen.has_class("-compact")
        assert app.query_one(RequestsTable).display and not app.query_one(EventsTable).display


async def test_the_header_shows_a_new_speed_while_paused() -> None:
    """`+`/`-` while paused: the clock changed but no new snapshot came, so the header kept the old speed until
    `n` or `p` (issue 22)."""
    from ietop.tui.widgets.engines import EnginesBar

    app = replay_app([str(INCIDENT)], 1.0, paused=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.5)
        bar = app.query_one(EnginesBar)
        assert "1x" in bar.status
        await pilot.press("plus")
        await pilot.pause()
        assert "PAUSED" in bar.status and "2x" in bar.status
        await pilot.press("minus", "minus")
        await pilot.pause()
        assert "0.5x" in bar.status
