"""Shared helpers for the dashboard tests: replay a fixture to its end, deterministically."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from ietop.tui.app import IetopApp

ROOT = Path(__file__).resolve().parents[2]
INCIDENT = ROOT / "ietop" / "demo" / "incident.log"
HOSTILE = ROOT / "fixtures" / "synthetic" / "hostile-markup.log"


async def replay_to_end(pilot: Pilot[None]) -> None:
    """Wait until the replay feed has posted its last batch and the screen shows it."""
    app = pilot.app
    assert isinstance(app, IetopApp)
    for _ in range(400):
        if app._replay_done:
            break
        await pilot.pause(0.05)
    assert app._replay_done, "replay did not finish"
    await pilot.pause()
    app.refresh_view()
    await pilot.pause()


MOMENT = "2026-11-28T14:06:30Z"
"""The incident's most telling moment: qwen3:8b back after the thrash, truncations and slow requests in
the 5-minute window. Snapshots and the README's screenshots are taken here."""


def moment() -> float:
    from ietop.pipeline import parse_time_arg

    return parse_time_arg(MOMENT)


async def replay_settled(pilot: Pilot[None]) -> None:
    """Wait until the replay stopped at `--until` (or ended) and the screen shows it."""
    app = pilot.app
    assert isinstance(app, IetopApp)
    for _ in range(400):
        if app._replay_done or app.replay_held:
            break
        await pilot.pause(0.05)
    assert app._replay_done or app.replay_held, "replay did not settle"
    await pilot.pause()
    app.refresh_view()
    await pilot.pause()
