"""The dashboard replaying the bundled incident: panels show what the log says, and the keys work.

The incident (ietop/demo/incident.log) is built from real Ollama v0.30+ line shapes; its ground truth is
checked independently through `ietop analyze` in tests/cli/test_demo_incident.py. Here the same facts
must reach the screen."""

from __future__ import annotations

import pytest

from ietop.model.snapshot import WINDOWS
from ietop.tui.run import replay_app
from ietop.tui.screens.detail import DetailScreen
from ietop.tui.screens.help import HelpScreen
from ietop.tui.screens.timeline import TimelineScreen
from ietop.tui.widgets.events import EventsTable
from ietop.tui.widgets.hints import HintsTable
from ietop.tui.widgets.requests import RequestsTable
from ietop.tui.widgets.residency import ResidencyTable
from tests.tui.support import INCIDENT, replay_to_end


def _column(table: object, col: int) -> list[str]:
    return [str(table.get_cell_at((r, col))) for r in range(table.row_count)]  # type: ignore[attr-defined]


@pytest.fixture
def app():  # type: ignore[no-untyped-def]
    return replay_app([str(INCIDENT)], 0)


async def test_panels_show_the_incident(app) -> None:  # type: ignore[no-untyped-def]
    async with app.run_test(size=(160, 48)) as pilot:
        await replay_to_end(pilot)
        snap = app.snap
        assert snap is not None
        # Residency: the model the log left resident, with its load count and evictions.
        models = _column(app.query_one(ResidencyTable), 1)
        assert models and models[0] != "nothing resident"
        assert {r.model for r in snap.resident} <= set(models)
        # Requests: every inference request of the incident (bounded table), newest first.
        requests = app.query_one(RequestsTable)
        assert requests.row_count == len(snap.requests) >= 15
        assert requests.records[0].t_end >= requests.records[-1].t_end
        # Events: loads and "evicted X to load Y".
        whats = _column(app.query_one(EventsTable), 3)
        assert any(w.startswith("evicted ") and " to load " in w for w in whats)
        assert any(w.startswith("loaded ") for w in whats)
        assert any(w.startswith("prompt truncated") for w in whats)
        # Hints: the eviction thrash of the incident.
        assert "eviction-thrash" in {h.id for h in app.query_one(HintsTable).hints}


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
        model = next(r.model for r in app.snap.requests if r.model)
        await pilot.press("slash")
        await pilot.press(*model)
        await pilot.press("enter")
        assert table.filter_text == model
        assert table.records and all(r.model == model or model in r.path for r in table.records)
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
