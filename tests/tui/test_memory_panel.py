"""The Memory panel fits its lines to its width, at the sizes the README promises (120x40 and 80x24).

The GPU readings are the ones NVML gave on a lent NVIDIA H200 (driver 580.159.04) while a test process held
1 GiB on it (see tests/sources/test_gpu_device.py); the host figures are a 128 GiB machine's. A line wider
than the panel wraps, and the panel's last lines (the per-model budget) fall off its bottom edge.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Group
from rich.text import Text

from ietop.pipeline.discover import plan
from ietop.pipeline.hardware import EngineProcess, Hardware
from ietop.sources.samples import GpuProcess, GpuSample, HostMemory
from ietop.tui.app import HardwareSampled
from ietop.tui.run import live_app, replay_app
from ietop.tui.widgets.memory import MemoryPanel
from tests.tui.support import INCIDENT, ROOT, moment, replay_settled

GIB = 1 << 30
H200 = GpuSample(index=0, name="NVIDIA H200", uuid="GPU-df2b2301-2f49-d39a-e374-d30245875b8d",
                 memory_total=150754820096, memory_used=1626341376, util_percent=0, power_w=121.612,
                 power_limit_w=700.0, temperature_c=34, processes=(GpuProcess(487, 1616904192),))
HOST = HostMemory(total=128 * GIB, available=100 * GIB, used=28 * GIB, swap_total=8 * GIB, swap_used=0,
                  wired=21 * GIB)  # wired: as macOS reports it (the Linux sampler leaves it None)


def _lines(panel: MemoryPanel) -> list[str]:
    content = panel.content
    assert isinstance(content, Group)
    return [t.plain for t in content.renderables if isinstance(t, Text)]


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_every_line_fits_the_panel(size: tuple[int, int]) -> None:
    app = replay_app([str(INCIDENT)], 0)
    app.setup.hardware = False
    async with app.run_test(size=size) as pilot:
        hw = Hardware(HOST, (H200,), None, {487: "ollama"}, wired_limit=96 * GIB,
                      engines=(EngineProcess("ollama", 487, 3 * GIB, 12.0, None),))
        app.post_message(HardwareSampled(hw, []))
        await pilot.pause()
        app.refresh_view()
        await pilot.pause()
        panel = app.query_one(MemoryPanel)
        lines = _lines(panel)
        width = panel.content_size.width
        assert lines[0] == "GPU0 H200  0% 122W 34°C"
        assert lines[1].endswith("░ 1.5/140.4 GiB") and lines[2].strip() == "pid 487 (ollama) 1.5 GiB"
        assert lines[3] == "RAM  swap 0 B/8.0 GiB" and lines[4].endswith("░ 28.0/128.0 GiB")
        assert lines[5:7] == ["  wired 21.0 GiB", "  GPU may wire 96.0 GiB"]
        too_wide = [line for line in lines if len(line) > width]
        assert not too_wide, (width, too_wide)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_replay_lines_fit_the_panel(size: tuple[int, int]) -> None:
    """In a replay the panel shows what the log says: the GPU Ollama found, how much of it was in use at the
    newest line that said (before the latest load: 23.6 GiB free), when that was, and the resident models."""
    app = replay_app([str(INCIDENT)], 0, until=moment())
    async with app.run_test(size=size) as pilot:
        await replay_settled(pilot)
        panel = app.query_one(MemoryPanel)
        lines = _lines(panel)
        width = panel.content_size.width
        assert lines[0].startswith("GPU GeForce RTX") and lines[0].endswith(" (log)")
        assert lines[1].endswith(" 409.6 MiB/24.0 GiB")  # 24 GiB, 23.6 GiB free (the log's `gpu memory`)
        assert lines[2] == "  in use at 14:05:41"
        # The log's reading is from before the resident model's load: it does not count it, and says so.
        assert lines[3] == "  before qwen3:8b loaded"
        # The budget, what would not fit beside it (gemma3:27b: 6.6 + 19.4 GiB of 24.0; its load took 12.4 s),
        # then the models it sums (the last lines are what a short panel loses).
        assert lines[4] == "budget 27% of VRAM" and lines[5].endswith(" 6.6/24.0 GiB")
        assert lines[6] == "+gemma3 ✗ swap 12.4s"
        assert lines[7:] == [f"  {'qwen3:8b':<{width - 10}} 6.6 GiB"]
        too_wide = [line for line in lines if len(line) > width]
        assert not too_wide, (width, too_wide)


async def test_a_new_sample_lays_the_screen_out_again_only_when_the_panel_may_change_height() -> None:
    # Host memory moves by MiBs on every sample (2 s): re-laying the whole screen for it was most of the idle
    # dashboard's main-thread work. Counted here: the panel's requests for a layout pass.
    app = replay_app([str(INCIDENT)], 0)
    app.setup.hardware = False
    async with app.run_test(size=(120, 40)) as pilot:
        await replay_settled(pilot)
        panel = app.query_one(MemoryPanel)
        layouts: list[bool] = []
        refresh = panel.refresh

        def counted(*regions: object, **kw: bool) -> object:
            layouts.append(kw.get("layout", False))
            return refresh(*regions, **kw)  # type: ignore[arg-type]

        panel.refresh = counted  # type: ignore[method-assign]

        async def sample(host: HostMemory, gpus: tuple[GpuSample, ...] = (H200,)) -> list[str]:
            app.post_message(HardwareSampled(Hardware(host, gpus, None, {487: "ollama"}), []))
            await pilot.pause()
            app.refresh_view()
            await pilot.pause()
            return _lines(panel)

        first = await sample(HOST)
        layouts.clear()
        same = await sample(HostMemory(total=128 * GIB, available=100 * GIB, used=28 * GIB + (1 << 20),
                                       swap_total=8 * GIB, swap_used=0, wired=21 * GIB))
        assert same == first and layouts == [], "the same on screen: not even repainted"
        moved = await sample(HostMemory(total=128 * GIB, available=90 * GIB, used=38 * GIB, swap_total=8 * GIB,
                                        swap_used=0, wired=21 * GIB))
        assert moved != first and len(moved) == len(first)
        assert layouts and not any(layouts), "another reading, as many lines: repainted, not laid out"
        layouts.clear()
        fewer = await sample(HOST, ())
        assert len(fewer) < len(first) and any(layouts), "fewer lines: the screen is laid out again"


@pytest.mark.parametrize(("log", "until", "advice"), [
    ("fixtures/mlx/006-turboquant-mlx-11-stock-0.31-info-log.txt", None, "MLX: its process's RSS, live"),
    # The incident while gemma3:27b loads: its blob is resident, no line has given its size yet.
    ("ietop/demo/incident.log", "2026-11-28T14:03:45Z", "Ollama: poll /api/ps, or OLLAMA_DEBUG logs"),
])
async def test_unknown_sizes_say_where_they_would_come_from(log: str, until: str | None, advice: str) -> None:
    from ietop.pipeline.ingest import parse_time_arg

    app = replay_app([str(ROOT / log)], 0, until=parse_time_arg(until) if until else None)
    async with app.run_test(size=(160, 48)) as pilot:
        await replay_settled(pilot)
        assert app.snap is not None and app.snap.resident and not any(r.size_bytes for r in app.snap.resident)
        assert " ".join(_lines(app.query_one(MemoryPanel))).endswith(f"per-model sizes: unknown ({advice})")


async def test_live_before_any_sample_does_not_speak_of_a_replay(tmp_path: Path) -> None:
    # Live, the panel had nothing of this host yet and said "replay: no device in the log" until the first
    # sample came. With sampling off (as here) it says so for good.
    log = tmp_path / "server.log"
    log.write_bytes(INCIDENT.read_bytes())
    app = live_app(plan([], [], [], [f"ollama:{log}"], [], []), poll_interval=30)
    app.setup.hardware = False
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        app.refresh_view()
        await pilot.pause()
        assert _lines(app.query_one(MemoryPanel))[0] == "host and GPU not sampled"
