"""The dashboard at the sizes people use (80x24 in tmux, 120x40, 200x50): every value whole or elided with
"…", the least telling columns leaving first, and what was left out said on the panel's border."""

from __future__ import annotations

from pathlib import Path

import pytest

from ietop.tui.panels import screen_text
from ietop.tui.run import replay_app
from ietop.tui.widgets.events import EventsTable
from ietop.tui.widgets.hints import HintsTable
from ietop.tui.widgets.requests import DROP_ORDER, RequestsTable
from ietop.tui.widgets.residency import ResidencyTable
from ietop.tui.widgets.rowtable import RowTable
from tests.tui.cuts import cut, hint_cuts, table_cuts
from tests.tui.support import INCIDENT, ROOT, SCREENS, moment, replay_to_end

SIZES = ((80, 24), (120, 40), (200, 50))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_no_value_is_cut_at_any_size(size: tuple[int, int]) -> None:
    app = replay_app([str(INCIDENT)], 0, until=moment())
    async with app.run_test(size=size) as pilot:
        await SCREENS["dashboard"](pilot)
        problems = [p for t in app.query(RowTable) if t.display for p in table_cuts(t)]
        assert problems == []
        assert hint_cuts(app.query_one(HintsTable)) == []
        requests = app.query_one(RequestsTable)
        # What every size keeps, and what the widest shows in full.
        assert {"time", "model", "status", "prompt", "TTFT", "total"} <= set(requests.columns) - set(requests.hidden)
        if size[0] >= 200:
            assert requests.hidden == ()
        else:
            # A column leaves only after every column after it in the drop order: no gaps in priority.
            gone = [c for c in DROP_ORDER if c in requests.hidden]
            assert gone == list(DROP_ORDER[:len(gone)]) or len(gone) < len(requests.hidden)
            assert requests.border_subtitle and f"+{len(requests.hidden)} col" in str(requests.border_subtitle)


def test_the_walker_catches_a_cut_number() -> None:
    assert cut("TT", "TTFT") is not None
    assert cut("1.", "1.0s") is not None
    assert cut("RTX 40…", "RTX 4090") is not None
    assert cut("waited for a…", "waited for a model load") is None
    assert cut("  812", "812") is None


async def test_sorting_by_a_dropped_column_brings_it_back() -> None:
    app = replay_app([str(INCIDENT)], 0, until=moment())
    async with app.run_test(size=(80, 24)) as pilot:
        await SCREENS["dashboard"](pilot)
        requests = app.query_one(RequestsTable)
        assert "ITL" in requests.hidden
        requests.sort_by("ITL")
        requests.show(app.snap, force=True)
        await pilot.pause()
        assert "ITL" not in requests.hidden
        assert table_cuts(requests) == []


async def test_c_hides_a_column_and_the_border_says_so() -> None:
    app = replay_app([str(INCIDENT)], 0, until=moment())
    async with app.run_test(size=(200, 50)) as pilot:
        await SCREENS["dashboard"](pilot)
        requests = app.query_one(RequestsTable)
        requests.focus()
        await pilot.press("c")
        # The chooser lists the columns a row can do without, all shown; space unticks the highlighted one.
        await pilot.press("space", "escape")
        await pilot.pause()
        assert requests.chosen_hidden == {"engine"} and "engine" in requests.hidden
        assert "1 hidden" in str(requests.border_subtitle)
        assert "engine" not in [name for _i, name, _x, _w in requests.column_spans()]


def _saved_text(directory: Path) -> str:
    (saved,) = directory.glob("ietop-screen-*.txt")
    return saved.read_text(encoding="utf-8")


async def test_ctrl_s_saves_the_screen_as_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    app = replay_app([str(INCIDENT)], 0, until=moment())
    async with app.run_test(size=(120, 40)) as pilot:
        await SCREENS["dashboard"](pilot)
        await pilot.press("ctrl+s")
        await pilot.pause()
        text = _saved_text(tmp_path)
        lines = text.splitlines()
        assert len(lines) == 40 and max(map(len, lines)) <= 120
        assert "Requests" in text and "qwen3:8b" in text and "\x1b" not in text
        # Every request row shown is in the file as drawn.
        requests = app.query_one(RequestsTable)
        assert requests.cell_text(0, 0) in text


async def test_memory_says_the_logged_reading_predates_the_resident_model() -> None:
    app = replay_app([str(INCIDENT)], 0, until=moment())
    async with app.run_test(size=(120, 40)) as pilot:
        await SCREENS["dashboard"](pilot)
        (resident,) = app.snap.resident
        (gpu,) = app.snap.log_gpus
        assert gpu.at is not None and resident.loaded_since and resident.loaded_since > gpu.at.timestamp()
        shot = app.export_screenshot().replace("&#160;", " ")
        assert f"before {resident.model} loaded" in shot


async def test_residency_and_events_keep_their_names_at_80_columns() -> None:
    app = replay_app([str(INCIDENT)], 0, until=moment())
    async with app.run_test(size=(80, 24)) as pilot:
        await SCREENS["dashboard"](pilot)
        residency = app.query_one(ResidencyTable)
        assert "model" not in residency.hidden and "VRAM" not in residency.hidden
        await pilot.press("e")
        await pilot.pause()
        events = app.query_one(EventsTable)
        assert events.display and "what" not in events.hidden and table_cuts(events) == []


async def test_a_long_header_stays_one_line_and_panels_keep_their_borders() -> None:
    """fixtures/ollama/012-…: at 80x24 the header (a long log name, then the replay state) wrapped to a second
    line, and Requests was drawn over the Latency panel's bottom border."""
    log = ROOT / "fixtures" / "ollama" / "012-v032-vulkan-evict-idle-runner-debug.log"
    app = replay_app([str(log)], 0)
    async with app.run_test(size=(80, 24)) as pilot:
        await replay_to_end(pilot)
        lines = screen_text(app).splitlines()
        assert lines[0].lstrip().startswith("replay finished") and lines[0].rstrip().endswith("…")
        assert lines[1].startswith("╭─ Residency")
        requests_top = next(i for i, line in enumerate(lines) if line.startswith("╭─ Requests"))
        assert lines[requests_top - 1].startswith("╰"), lines[requests_top - 1]  # Latency's bottom border
        assert "no timings in these sources (see ?)" in "\n".join(lines)
