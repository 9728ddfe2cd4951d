"""Regenerate the README's screenshots (SVG) from a replay of the bundled incident, and the Budget screen (`b`)
from a replay of the seeds' budget example (fixtures/synthetic/seed-budget.log, labelled synthetic).

    python screenshots/regenerate.py

The same replays and steps as tests/tui/test_snapshots.py (both take them from tests/tui/support.py).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ietop.tui.run import replay_app  # noqa: E402
from tests.tui.support import INCIDENT, SCREENS, Step, moment, replay_settled  # noqa: E402

SEED_BUDGET = ROOT / "fixtures" / "synthetic" / "seed-budget.log"

SIZE = (120, 40)
SMALL = (80, 24)
"""The README shows every screen at 120x40, and the dashboard also as it reads in an 80x24 tmux pane."""


async def shoot(name: str, step: Step, out: Path, size: tuple[int, int] = SIZE) -> Path:
    app = replay_app([str(INCIDENT)], 0, until=moment())
    async with app.run_test(size=size) as pilot:
        await step(pilot)
        path = out / f"{name}.svg"
        path.write_text(app.export_screenshot(title=f"ietop demo — {name}"), encoding="utf-8")
    return path


def main() -> int:
    out = Path(__file__).resolve().parent
    for name, step in SCREENS.items():
        print(asyncio.run(shoot(name, step, out)).relative_to(ROOT))
    print(asyncio.run(shoot("dashboard-80x24", SCREENS["dashboard"], out, SMALL)).relative_to(ROOT))
    print(asyncio.run(shoot_budget(out)).relative_to(ROOT))
    return 0


async def shoot_budget(out: Path) -> Path:
    app = replay_app([str(SEED_BUDGET)], 0)
    async with app.run_test(size=SIZE) as pilot:
        await replay_settled(pilot)
        await pilot.press("b")
        await pilot.pause()
        path = out / "budget.svg"
        path.write_text(app.export_screenshot(title="ietop — budget (the seeds' example)"), encoding="utf-8")
    return path


if __name__ == "__main__":
    raise SystemExit(main())
