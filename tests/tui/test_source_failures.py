"""The dashboard says, for as long as it runs, that a source failed and why; and an empty Requests panel says
why no request can come.

`ietop --docker ollama` with no Docker daemon: the `docker` that runs is a script on a temporary PATH that
writes the real Docker 28.2.2 message to stderr and exits 1 (tests/pipeline/test_command_failures.py).
`ietop --ollama URL` alone: the endpoint is polled (a closed port here), no log is followed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from ietop.model.snapshot import Snapshot
from ietop.pipeline.discover import Plan
from ietop.pipeline.setup import live_feeds, new_store
from ietop.tui.app import IetopApp, Setup
from ietop.tui.screens.detail import DetailScreen
from ietop.tui.widgets.engines import header_text, requests_note
from ietop.tui.widgets.events import EventsTable
from ietop.tui.widgets.requests import RequestsTable
from tests.command_support import NO_DAEMON, fake_command
from tests.tui.support import until

HOSTILE = "\x1b]0;owned\x07Cannot connect [bold red]to[/] the \u202eDocker daemon\x1b[2J"
"""A stderr line that would act if printed raw: an OSC title, Rich markup, a bidi override, a CSI clear."""


def _app(plan: Plan) -> IetopApp:
    store, view, evidence = new_store()
    feeds = live_feeds(store, evidence, plan, lambda: None)  # type: ignore[arg-type,return-value]
    return IetopApp(store, view, evidence, Setup(feeds=feeds, endpoints=plan.endpoints, hardware=False))


async def _until_failed(pilot: Pilot[None], app: IetopApp) -> Snapshot:
    """Wait for the feed to report its source failed; the screen then shows it."""
    await until(pilot, lambda: any(s.failed for s in app.store.sources))
    app.refresh_view()
    await pilot.pause()
    assert app.snap is not None
    return app.snap


def _panel_text(table: RequestsTable) -> str:
    """The lines the panel draws under its heading, as the terminal gets them."""
    return " ".join(table.render_line(y).text.strip() for y in range(1, table.size.height))


async def test_docker_without_daemon_stays_failed_in_header_and_events(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    fake_command(tmp_path, "docker", NO_DAEMON, 1)
    monkeypatch.setenv("PATH", str(tmp_path))
    app = _app(Plan(dockers=[("ollama", "ollama")]))
    async with app.run_test(size=(120, 40)) as pilot:
        snap = await _until_failed(pilot, app)
        header = header_text(snap)
        assert header.plain == "docker:ollama failed (exit 1)"
        failed_at = header.plain.index("docker:ollama failed")
        assert any(span.start <= failed_at < span.end and "red" in str(span.style) for span in header.spans)
        events = app.query_one(EventsTable)
        assert events.row_count == 1
        assert (events.cell_text(0, 1), events.cell_text(0, 2)) == ("error", "ollama")
        assert events.cell_text(0, 3) == f"source_failed: docker:ollama failed (exit 1): {NO_DAEMON}"
        # The Requests panel says why it stays empty.
        requests = app.query_one(RequestsTable)
        assert requests.row_count == 0
        assert "docker:ollama failed (see Events)" in _panel_text(requests)
        # Enter on the row opens it whole (it has no log line for evidence: the command said it, not the log).
        events.focus()
        await pilot.press("enter")
        assert isinstance(app.screen, DetailScreen)
        shown = " ".join(strip.text.strip(" █") for strip in app.screen._compositor.render_strips())
        assert "source_failed: docker:ollama failed (exit 1): Cannot connect to the Docker daemon" in shown
        assert "no log line" in shown and "line no longer in memory" not in shown


async def test_a_hostile_stderr_line_is_shown_inert(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_command(tmp_path, "docker", HOSTILE, 1)
    monkeypatch.setenv("PATH", str(tmp_path))
    app = _app(Plan(dockers=[("ollama", "[bold]x")]))
    async with app.run_test(size=(120, 40)) as pilot:
        await _until_failed(pilot, app)
        assert header_text(app.snap).plain == "docker:[bold]x failed (exit 1)"  # literal, not markup
        what = app.query_one(EventsTable).cell_text(0, 3)
        assert "[bold red]to[/]" in what  # shown as written, never parsed as markup
        assert not any(c in what for c in "\x1b\x07\u202e"), repr(what)


async def test_no_docker_binary_in_the_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    app = _app(Plan(dockers=[("ollama", "ollama")]))
    async with app.run_test(size=(120, 40)) as pilot:
        await _until_failed(pilot, app)
        assert header_text(app.snap).plain == "docker:ollama failed (docker not found)"
        assert app.query_one(EventsTable).cell_text(0, 3) == (
            "source_failed: docker:ollama failed (docker not found)")


async def test_an_endpoint_alone_explains_the_empty_requests_panel() -> None:
    """`ietop --ollama URL`: residency and status come from the endpoint, requests only from a log."""
    app = _app(Plan(endpoints=[("ollama", "http://127.0.0.1:9")]))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        app.refresh_view()
        await pilot.pause()
        assert app.snap is not None and not app.snap.sources
        requests = app.query_one(RequestsTable)
        assert requests.row_count == 0
        shown = _panel_text(requests)
        assert "no log followed: requests come from the engine's log" in shown
        assert "--log PATH, --journal UNIT or --docker NAME (or --proxy PORT)" in shown


def test_the_note_is_gone_once_a_log_is_followed() -> None:
    _store, bare, _evidence = new_store()
    assert requests_note(bare.snapshot(0.0, 300)) is not None
    store, view, _evidence = new_store()
    store.add_source("server.log", "ollama")
    assert requests_note(view.snapshot(0.0, 300)) is None
