"""Regenerate the README's screenshots (SVG) from a replay of the bundled incident.

    python screenshots/regenerate.py

The same replay and steps as tests/tui/test_snapshots.py (both take them from tests/tui/support.py).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ietop.tui.run import replay_app  # noqa: E402
from tests.tui.support import INCIDENT, SCREENS, Step, moment  # noqa: E402

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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
