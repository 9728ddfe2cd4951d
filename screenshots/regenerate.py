"""Regenerate the README's screenshots (SVG) from a replay of the bundled incident.

    python screenshots/regenerate.py

The same replay and the same steps as tests/tui/test_snapshots.py, at the size a README shows well.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.pilot import Pilot

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ietop.tui.run import replay_app  # noqa: E402
from ietop.tui.widgets.hints import HintsTable  # noqa: E402
from ietop.tui.widgets.requests import RequestsTable  # noqa: E402
from tests.tui.support import INCIDENT, moment, replay_settled  # noqa: E402

SIZE = (140, 44)
Step = Callable[[Pilot[None]], Awaitable[None]]


async def _main_screen(pilot: Pilot[None]) -> None:
    await replay_settled(pilot)


async def _request(pilot: Pilot[None]) -> None:
    await replay_settled(pilot)
    table = pilot.app.query_one(RequestsTable)
    table.sort_by("total")
    table.show(pilot.app.snap, force=True)  # type: ignore[attr-defined]
    table.focus()
    await pilot.press("enter")
    await pilot.pause()


async def _hint(pilot: Pilot[None]) -> None:
    await replay_settled(pilot)
    pilot.app.query_one(HintsTable).focus()
    await pilot.press("enter")
    await pilot.pause()


async def _timeline(pilot: Pilot[None]) -> None:
    await replay_settled(pilot)
    await pilot.press("t")
    await pilot.pause()


SHOTS: dict[str, Step] = {"dashboard": _main_screen, "request-detail": _request, "hint-detail": _hint,
                          "timeline": _timeline}


async def shoot(name: str, step: Step, out: Path) -> Path:
    app = replay_app([str(INCIDENT)], 0, until=moment())
    async with app.run_test(size=SIZE) as pilot:
        await step(pilot)
        path = out / f"{name}.svg"
        path.write_text(app.export_screenshot(title=f"ietop demo — {name}"), encoding="utf-8")
    return path


def main() -> int:
    out = Path(__file__).resolve().parent
    for name, step in SHOTS.items():
        print(asyncio.run(shoot(name, step, out)).relative_to(ROOT))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
