"""SVG snapshots of the dashboard replaying the bundled incident (pytest-textual-snapshot), each screen at the
sizes people use: 80x24 (a tmux pane), 120x40 and 200x50.

Update after an intended change with `pytest tests/tui/test_snapshots.py --snapshot-update` and review the
diff of tests/tui/__snapshots__/. screenshots/regenerate.py renders the README's images with the same steps.
"""

from __future__ import annotations

from typing import Any

import pytest

from ietop.tui.run import replay_app
from tests.tui.support import INCIDENT, ROOT, SCREENS, moment, replay_settled

SIZES = ((80, 24), (120, 40), (200, 50))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
def test_screen(snap_compare: Any, screen: str, size: tuple[int, int]) -> None:
    app = replay_app([str(INCIDENT)], 0, until=moment())
    assert snap_compare(app, terminal_size=size, run_before=SCREENS[screen])


SEED_BUDGET = ROOT / "fixtures" / "synthetic" / "seed-budget.log"
"""The seeds' budget example (fixtures/synthetic/make_seed_budget.py): four models, one that fits beside none."""


async def _open_budget(pilot: Any) -> None:
    await replay_settled(pilot)
    await pilot.press("b")
    await pilot.pause()


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_budget_screen(snap_compare: Any, size: tuple[int, int]) -> None:
    """`b` over the seed replayed to its end: the pair matrix at 120 columns, a list of pairs at 80."""
    app = replay_app([str(SEED_BUDGET)], 0)
    assert snap_compare(app, terminal_size=size, run_before=_open_budget)
