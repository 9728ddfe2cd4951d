"""The request detail tells the request's story (issue 23): the proportional bar of its known parts, the part
that dominates with its fix, and the cold start's chain as sentences, at a large and a small terminal."""

from __future__ import annotations

import re

import pytest

from ietop.tui.run import replay_app
from ietop.tui.screens.detail import DetailScreen
from tests.tui.support import INCIDENT, moment, open_slowest_request


def _screen_text(app: object) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())  # type: ignore[attr-defined]


def _inside(text: str) -> str:
    """The dialog's text, one string: what lies between its left and right borders on each row (the dashboard
    shows at both sides of it)."""
    rows = [line[line.index("█") + 1:line.rindex("█")] for line in text.split("\n") if line.count("█") >= 2]
    return " ".join(" ".join(rows).split())


def _line_of(needle: str) -> int:
    return next(i for i, text in enumerate(INCIDENT.read_text().split("\n"), 1) if needle in text)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_slowest_request_detail_shows_bar_and_chain(size: tuple[int, int]) -> None:
    app = replay_app([str(INCIDENT)], 0, until=moment())
    async with app.run_test(size=size) as pilot:
        await open_slowest_request(pilot)
        assert isinstance(app.screen, DetailScreen)
        top = _screen_text(app)
        # The bar is one line: each known part's label followed by its blocks, decode the longest run.
        bar = next(line for line in top.split("\n") if "load █" in line)
        assert "prefill █" in bar and "decode █" in bar
        runs = {label: len(run) for label, run in re.findall(r"(load|prefill|decode) (█+)", bar)}
        assert runs["decode"] > runs["load"] > runs["prefill"]
        assert "Most of it: decode" in top and "cap the output (640 output tokens)" in " ".join(top.split())
        # The chain, further down at 80x24: scroll to it.
        seen = top
        for _ in range(6):
            await pilot.press("pagedown")
            await pilot.pause()
            seen += "\n" + _screen_text(app)
        flat = _inside(seen)
        done, evicting = _line_of("llama-server started in 12.41 seconds"), _line_of("evicting")
        assert f"for the load of gemma3:27b (incident.log:{done})" in flat
        assert f"evicted qwen3:8b (incident.log:{evicting})" in flat
        assert "This request triggered it" in flat
