"""The Models screen (`m`) replaying the bundled incident: it opens at the sizes people use, shows every model the
log served or loaded, and its figures are `ietop analyze`'s for the same log (the dashboard holds all of this
small log's requests and residencies). Snapshots at 120x40 and 80x24, as tests/tui/test_snapshots.py takes them.

Update the snapshots after an intended change with `pytest tests/tui/test_models_screen.py --snapshot-update`."""

from __future__ import annotations

from typing import Any

import pytest

from ietop.analyze.report import Analysis
from ietop.tui.panels import screen_text
from ietop.tui.run import replay_app
from ietop.tui.screens.models import ModelsScreen
from tests.tui.support import INCIDENT, moment, replay_settled, replay_to_end

SIZES = ((120, 40), (80, 24))
SAME = ("requests", "cold_loads", "cold_load_share", "ttft_p50_s", "ttft_p90_s", "decode_tps_p50", "prefill_tps_p50",
        "prompt_tokens_p50", "prompt_tokens_p90", "output_tokens_p50", "output_tokens_p90", "loads", "load_s_median",
        "evictions_suffered", "evicted_for", "evictions_caused", "evicted_by_this", "truncations")
"""What the dashboard and `analyze` must agree on. Not failed loads (the timeline holds completed ones) nor the
residency share (the dashboard's window ends at its clock, analyze's at the log's last line)."""


@pytest.fixture(scope="module")
def analyzed() -> list[dict[str, Any]]:
    an = Analysis([str(INCIDENT)])
    try:
        return an.models()
    finally:
        an.close()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_m_opens_the_models_of_the_incident(size: tuple[int, int], analyzed: list[dict[str, Any]]) -> None:
    app = replay_app([str(INCIDENT)], 0)
    async with app.run_test(size=size) as pilot:
        await replay_to_end(pilot)
        await pilot.press("m")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ModelsScreen)
        shown = [(r.engine, r.model) for r in screen.rows]
        assert shown == [(m["engine"], m["model"]) for m in analyzed]
        assert {m["model"] for m in analyzed} - {None} == {"qwen3:8b", "gemma3:27b"}  # None: a request of no model
        for row, want in zip(screen.rows, analyzed, strict=True):
            got = row.as_dict()
            assert {k: got[k] for k in SAME} == {k: want[k] for k in SAME}, row.model
        # The gemma3:27b residency ended by the eviction that brought qwen3:8b back: both sides of it show.
        gemma = next(r for r in screen.rows if r.model == "gemma3:27b")
        assert gemma.evicted_for == (("qwen3:8b", 1),) and gemma.evicted_by_this == (("qwen3:8b", 1),)
        assert gemma.resident_share is not None and 0 < gemma.resident_share < 1
        # Every model's name is on screen (scrolled into view where the terminal is short).
        body = screen.query_one("#models-body")
        for name in ("qwen3:8b", "gemma3:27b"):
            body.scroll_visible()
            assert name in screen_text(app)
        await pilot.press("m")
        await pilot.pause()
        assert not isinstance(app.screen, ModelsScreen)


async def _open_models(pilot: Any) -> None:
    await replay_settled(pilot)
    await pilot.press("m")
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_models_snapshot(snap_compare: Any, size: tuple[int, int]) -> None:
    app = replay_app([str(INCIDENT)], 0, until=moment())
    assert snap_compare(app, terminal_size=size, run_before=_open_models)
