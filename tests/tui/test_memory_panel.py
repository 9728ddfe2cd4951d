"""The Memory panel fits its lines to its width, at the sizes the README promises (120x40 and 80x24).

The GPU readings are the ones NVML gave on a lent NVIDIA H200 (driver 580.159.04) while a test process held
1 GiB on it (see tests/sources/test_gpu_device.py); the host figures are a 128 GiB machine's. A line wider
than the panel wraps, and the panel's last lines (the per-model budget) fall off its bottom edge.
"""

from __future__ import annotations

import pytest
from rich.console import Group
from rich.text import Text

from ietop.sources.gpu import GpuProcess, GpuSample
from ietop.sources.host import HostMemory
from ietop.tui.app import HardwareSampled
from ietop.tui.run import replay_app
from ietop.tui.widgets.memory import EngineProcess, Hardware, MemoryPanel
from tests.tui.support import INCIDENT, moment, replay_settled

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
    """In a replay the panel shows what the log says: the GPU Ollama found at start and the resident models."""
    app = replay_app([str(INCIDENT)], 0, until=moment())
    async with app.run_test(size=size) as pilot:
        await replay_settled(pilot)
        panel = app.query_one(MemoryPanel)
        lines = _lines(panel)
        width = panel.content_size.width
        assert lines[0].startswith("GPU GeForce RTX") and lines[0].endswith(" (log)")
        assert lines[1].endswith(" 409.6 MiB/24.0 GiB")  # 24 GiB, 23.6 GiB free at start (the log's line)
        assert lines[2:4] == ["resident:", f"  {'qwen3:8b':<{width - 10}} 6.6 GiB"]
        assert lines[4] == "budget 27% of VRAM" and lines[5].endswith(" 6.6/24.0 GiB")
        too_wide = [line for line in lines if len(line) > width]
        assert not too_wide, (width, too_wide)
