"""SVG snapshots of the dashboard replaying the bundled incident (pytest-textual-snapshot).

Update after an intended change with `pytest tests/tui/test_snapshots.py --snapshot-update` and review the
diff of tests/tui/__snapshots__/. screenshots/regenerate.py renders the README's images with the same steps.
"""

from __future__ import annotations

from typing import Any

from ietop.tui.run import replay_app
from tests.tui.support import (
    INCIDENT,
    moment,
    open_first_hint,
    open_slowest_request,
    open_timeline,
    replay_settled,
)

SIZE = (140, 44)


def _app() -> Any:
    return replay_app([str(INCIDENT)], 0, until=moment())


def test_main_screen(snap_compare: Any) -> None:
    assert snap_compare(_app(), terminal_size=SIZE, run_before=replay_settled)


def test_request_detail(snap_compare: Any) -> None:
    assert snap_compare(_app(), terminal_size=SIZE, run_before=open_slowest_request)


def test_hint_detail(snap_compare: Any) -> None:
    assert snap_compare(_app(), terminal_size=SIZE, run_before=open_first_hint)


def test_timeline(snap_compare: Any) -> None:
    assert snap_compare(_app(), terminal_size=SIZE, run_before=open_timeline)
