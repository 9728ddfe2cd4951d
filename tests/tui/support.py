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
