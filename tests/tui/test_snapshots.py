"""SVG snapshots of the dashboard replaying the bundled incident (pytest-textual-snapshot).

Update after an intended change with `pytest tests/tui/test_snapshots.py --snapshot-update` and review the
diff of tests/tui/__snapshots__/. screenshots/regenerate.py renders the README's images from the same replay.
"""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot

from ietop.tui.run import replay_app
from ietop.tui.widgets.hints import HintsTable
from ietop.tui.widgets.requests import RequestsTable
from tests.tui.support import INCIDENT, moment, replay_settled

SIZE = (140, 44)


def _app() -> Any:
    return replay_app([str(INCIDENT)], 0, until=moment())


def test_main_screen(snap_compare: Any) -> None:
    assert snap_compare(_app(), terminal_size=SIZE, run_before=replay_settled)


def test_request_detail(snap_compare: Any) -> None:
    async def open_slowest(pilot: Pilot[None]) -> None:
        await replay_settled(pilot)
        table = pilot.app.query_one(RequestsTable)
        table.sort_by("total")
        table.show(pilot.app.snap, force=True)  # type: ignore[attr-defined]
        table.focus()
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(_app(), terminal_size=SIZE, run_before=open_slowest)


def test_hint_detail(snap_compare: Any) -> None:
    async def open_hint(pilot: Pilot[None]) -> None:
        await replay_settled(pilot)
        pilot.app.query_one(HintsTable).focus()
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(_app(), terminal_size=SIZE, run_before=open_hint)


def test_timeline(snap_compare: Any) -> None:
    async def open_timeline(pilot: Pilot[None]) -> None:
        await replay_settled(pilot)
        await pilot.press("t")
        await pilot.pause()

    assert snap_compare(_app(), terminal_size=SIZE, run_before=open_timeline)
