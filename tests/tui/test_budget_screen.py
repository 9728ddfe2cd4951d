"""The Budget screen (`b`) and the Memory panel's `next:` line (issue 25).

fixtures/synthetic/seed-budget.log is the seeds' budget example (made by fixtures/synthetic/make_seed_budget.py,
in Ollama 0.12.3's line shapes): usable 78.0 GiB (its `inference compute` line), workhorse 22.0 GiB and
vision 29.0 GiB fit together with 27.0 GiB to spare, reasoner (77.8 GiB, a 58.3 s load) fits beside no other
model, and the embedder loads on demand for `/api/embed` and evicted vision. The sizes asserted are the totals
its `total memory` and `runner.size` lines give, not the weights or KV lines (another parser change may add those).
The incident (ietop/demo/incident.log) is a real log: 24.0 GiB RTX 4090, qwen3:8b 6.6 GiB, gemma3:27b 19.4 GiB.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from rich.console import Console, Group
from rich.text import Text
from textual.containers import VerticalScroll
from textual.pilot import Pilot

from ietop.model.budget import GIB, BudgetInputs, Figure, ModelSizes, Usable, build
from ietop.pipeline.hardware import Hardware
from ietop.pipeline.ingest import parse_time_arg
from ietop.tui.app import HardwareSampled, IetopApp
from ietop.tui.format import clean
from ietop.tui.panels import screen_text
from ietop.tui.run import replay_app
from ietop.tui.screens.budget import BudgetScreen, budget_view
from ietop.tui.widgets.memory import MemoryPanel, _next_line
from tests.tui.support import INCIDENT, ROOT, moment, replay_settled, replay_to_end, until
from tests.tui.test_memory_panel import H200, HOST

SEED = ROOT / "fixtures" / "synthetic" / "seed-budget.log"
WORKHORSE, VISION, EMBEDDER, REASONER = "workhorse:35b-q4", "vision:27b-q8", "embedder:0.3b", "reasoner:120b-q4"


async def _open(pilot: Pilot[None]) -> BudgetScreen:
    await pilot.press("b")
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, BudgetScreen)
    return screen


async def _all_text(pilot: Pilot[None], screen: BudgetScreen) -> str:
    """Everything the screen shows, scrolled through a page at a time (80x24 holds a part of it)."""
    scroll = screen.query_one(VerticalScroll)
    scroll.scroll_home(animate=False)
    await pilot.pause()
    pages = []
    for _ in range(20):
        pages.append(screen_text(pilot.app))
        if scroll.scroll_y >= scroll.max_scroll_y:
            break
        scroll.scroll_page_down(animate=False)
        await pilot.pause()
    return "\n".join(pages)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_b_shows_the_seed_budget(size: tuple[int, int]) -> None:
    app = replay_app([str(SEED)], 0)
    async with app.run_test(size=size) as pilot:
        await replay_to_end(pilot)
        screen = await _open(pilot)
        budget = screen.budget
        assert budget is not None and budget.usable.size == 78 * GIB
        assert [m.model for m in budget.models] == [WORKHORSE, VISION, EMBEDDER, REASONER]
        pairs = {frozenset((p.a, p.b)): p for p in budget.pairs}
        together = pairs[frozenset((WORKHORSE, VISION))]
        assert together.fits is True and together.margin is not None and round(together.margin / GIB, 1) == 27.0
        assert all(p.fits is False for key, p in pairs.items() if REASONER in key)
        text = await _all_text(pilot, screen)
        # Where the usable size comes from: the device the log names, and its line (wrapped at 80 columns).
        assert "usable model memory: 78.0 GiB — the log's devices: Apple M3 Ultra" in text
        assert "(seed-budget.log:4)" in text
        assert f"{REASONER} runs alone: it fits beside no other model" in text
        # The embedder's rule is longer than the screen: the parts either side of where it wraps.
        assert f"{EMBEDDER} loads on demand (1 load for embedding calls)" in text
        assert "seed-budget.log:33" in text
        if size[0] >= 120:  # the matrix: the row of workhorse, a cell per column
            row = next(line for line in text.splitlines() if f" {WORKHORSE}  " in line and "—" in line)
            cells = row[row.index(WORKHORSE) + len(WORKHORSE):].split()
            assert cells[:7] == ["—", "✓", "27.0", "✓", "55.7", "✗", "-21.8"]
        else:  # too narrow for it: one line per pair
            assert f"{WORKHORSE} + {VISION}: ✓ 27.0 GiB spare" in text
            assert f"{WORKHORSE} + {REASONER}: ✗ 21.8 GiB short · swap 58.3s" in text
            assert f"{EMBEDDER} + {REASONER}: ✗ 0.1 GiB short · swap 58.3s" in text
        await pilot.press("b")
        await pilot.pause()
        assert not isinstance(app.screen, BudgetScreen)


async def test_the_open_screen_follows_new_loads() -> None:
    """Opened before reasoner's first load (09:06:41), the screen shows it once the replay has read it."""
    app = replay_app([str(SEED)], 0, until=parse_time_arg("2026-11-30T09:05:00Z"))
    async with app.run_test(size=(120, 40)) as pilot:
        await replay_settled(pilot)
        screen = await _open(pilot)
        assert screen.budget is not None and REASONER not in {m.model for m in screen.budget.models}
        assert REASONER not in screen_text(app)
        app.action_pause()  # play on from --until
        await until(pilot, lambda: screen.budget is not None and REASONER in {m.model for m in screen.budget.models})
        await pilot.pause()
        assert app.screen is screen and REASONER in screen_text(app)


async def test_no_device_in_the_log_takes_this_hosts_memory() -> None:
    """fixtures/ollama/009: Ollama 0.7 names no device's total; the model's `required` is 14.9 GiB. Once the
    dashboard has sampled this host (here an H200's NVML reading), the usable memory is that GPU's."""
    log = ROOT / "fixtures" / "ollama" / "009-v07-two-gpu-ollama-engine-tensor-split.log"
    app = replay_app([str(log)], 0)
    async with app.run_test(size=(120, 40)) as pilot:
        await replay_to_end(pilot)
        screen = await _open(pilot)
        assert screen.budget is not None and screen.budget.usable.size is None
        assert "usable model memory: ? — unknown" in screen_text(app)
        app.post_message(HardwareSampled(Hardware(HOST, (H200,), None, {}), []))
        await until(pilot, lambda: screen.budget is not None and screen.budget.usable.size is not None)
        await pilot.pause()
        assert screen.budget.usable.size == H200.memory_total
        assert "usable model memory: 140.4 GiB — this machine's GPUs (NVML): NVIDIA H200 140.4 GiB" in screen_text(app)
        assert app.snap is not None and app.snap.budget is not None and app.snap.budget.usable.size is None


@pytest.mark.parametrize(("size", "line"), [((200, 50), "next: gemma3:27b no (swap 12.4s)"),
                                            ((120, 40), "+gemma3 ✗ swap 12.4s"), ((80, 40), "+gemma3 ✗ swap 12.4s")])
async def test_memory_panel_says_what_would_fit_next(size: tuple[int, int], line: str) -> None:
    """The incident at its moment: qwen3:8b (6.6 GiB) resident; gemma3:27b (19.4 GiB) does not fit beside it in
    24.0 GiB, and loading it cost 12.4 s. The line comes right under the budget's gauge."""
    app = replay_app([str(INCIDENT)], 0, until=moment())
    async with app.run_test(size=size) as pilot:
        await replay_settled(pilot)
        panel = app.query_one(MemoryPanel)
        content = panel.content
        assert isinstance(content, Group)
        lines = [t.plain for t in content.renderables if isinstance(t, Text)]
        at = lines.index("budget 27% of VRAM")
        assert lines[at + 2] == line and len(line) <= panel.content_size.width


async def test_next_line_fits_its_words_to_the_width() -> None:
    """The seed's budget with the residency its log ends with (workhorse reloaded; reasoner, vision and the
    embedder unloaded: the timeline's open interval). Vision and the embedder fit beside workhorse, reasoner
    does not; narrower, the names lose their tags, then the words become marks with reasoner first, and names
    that fit leave from the end, never the swap's cost."""
    app = replay_app([str(SEED)], 0)
    async with app.run_test(size=(120, 40)) as pilot:
        await replay_to_end(pilot)
        snap = app.snap
        assert isinstance(app, IetopApp) and snap is not None and snap.budget is not None
    open_now = {i.model for i in snap.timeline if i.end is None}
    assert open_now == {WORKHORSE}
    ended = replace(snap, resident=tuple(r for r in snap.resident if r.model in open_now))

    def line(width: int) -> str | None:
        got = _next_line(snap.budget, ended, width)
        return None if got is None else got.plain

    assert line(200) == f"next: {VISION} fits · {EMBEDDER} fits · {REASONER} no (swap 58.3s)"
    assert line(60) == "next: vision fits · embedder fits · reasoner no (swap 58.3s)"
    assert line(59) == "+reasoner ✗ swap 58.3s · +vision ✓ · +embedder ✓"
    assert line(40) == "+reasoner ✗ swap 58.3s · +vision ✓ · …"
    assert line(24) == "+reasoner ✗ swap 58.3s…"  # the narrowest panel
    assert _next_line(snap.budget, replace(snap, resident=()), 200) is None  # nothing resident: nothing beside it


@pytest.mark.parametrize("width", [120, 60])
def test_model_names_are_shown_literally(width: int) -> None:
    """A model name is log text (Ollama logs the name a client asked for): markup in it is shown as written and an
    escape sequence as its visible stand-in, in the table, the matrix (120) or the pair list (60), and the rules."""
    hostile = "[bold red]x[/bold red]\x1b[2J:7b"
    inputs = BudgetInputs([ModelSizes("ollama", hostile, total=[Figure(8 * GIB, "test")]),
                           ModelSizes("ollama", "plain:7b", total=[Figure(20 * GIB, "test")])],
                          Usable(24 * GIB, "--memory 24.0 GiB (given)"))
    console = Console(record=True, width=width, color_system=None)
    console.print(budget_view(build(inputs), (), width))
    out = console.export_text()
    assert "\x1b" not in out
    shown = clean(hostile)
    assert shown.startswith("[bold red]x[/bold red]␛")
    assert out.count(shown) >= (4 if width == 120 else 3)  # table, matrix header and row (or pair line), rules
