"""Shared helpers for the dashboard tests: replay a fixture to its end, deterministically."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from pathlib import Path

from textual.pilot import Pilot

from ietop.pipeline.setup import new_store
from ietop.tui.app import IetopApp, Setup
from parsers.events import HttpAccess

ROOT = Path(__file__).resolve().parents[2]
INCIDENT = ROOT / "ietop" / "demo" / "incident.log"
HOSTILE = ROOT / "fixtures" / "synthetic" / "hostile-markup.log"


def bare_app() -> tuple[IetopApp, int]:
    """The dashboard with no feed and no hardware sampling, over a store with one Ollama source (its index
    returned): tests apply events to `app.store` themselves."""
    store, view, evidence = new_store()
    src = store.add_source("server.log", "ollama")
    return IetopApp(store, view, evidence, Setup(feeds=[], hardware=False)), src


def chat(line: int, latency_s: float = 1.5) -> HttpAccess:
    """An inference access line's event: POST /api/chat, 200, at second `line` of a minute."""
    ts = datetime(2026, 11, 30, 10, 0, line % 60, tzinfo=timezone.utc)
    return HttpAccess(line, ts, 200, latency_s, f"{latency_s}s", "127.0.0.1", "POST", "/api/chat")


async def until(pilot: Pilot[None], done: Callable[[], bool], limit_s: float = 15.0) -> None:
    """Pause until `done()` holds (checked every 50 ms); fail after `limit_s`."""
    for _ in range(int(limit_s / 0.05)):
        if done():
            return
        await pilot.pause(0.05)
    raise AssertionError("timed out")


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
    from ietop.pipeline.ingest import parse_time_arg

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
    # DataTables size their columns on a later idle pass: on a loaded machine one pause() was sometimes
    # too early, and a snapshot caught the Events table with the columns of its previous contents.
    await pilot.wait_for_scheduled_animations()
    await pilot.pause(0.2)


# The steps to each screen the snapshot tests and screenshots/regenerate.py show: one definition for both.
async def open_slowest_request(pilot: Pilot[None]) -> None:
    from ietop.tui.widgets.requests import RequestsTable

    await replay_settled(pilot)
    table = pilot.app.query_one(RequestsTable)
    table.sort_by("total")
    table.show(pilot.app.snap, force=True)  # type: ignore[attr-defined]
    table.focus()
    await pilot.press("enter")
    await pilot.pause(0.2)


async def open_first_hint(pilot: Pilot[None]) -> None:
    from ietop.tui.widgets.hints import HintsTable

    await replay_settled(pilot)
    pilot.app.query_one(HintsTable).focus()
    await pilot.press("enter")
    await pilot.pause()


async def open_timeline(pilot: Pilot[None]) -> None:
    await replay_settled(pilot)
    await pilot.press("t")
    await pilot.pause()


Step = Callable[[Pilot[None]], Awaitable[None]]
SCREENS: dict[str, Step] = {"dashboard": replay_settled, "request-detail": open_slowest_request, "hint-detail": open_first_hint,
           "timeline": open_timeline}
"""Screen name → the steps that reach it from a replay of the incident stopped at MOMENT."""
