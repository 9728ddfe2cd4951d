"""The Memory panel on a machine with a real NVIDIA GPU: the live dashboard samples NVML and shows the
GPU, its memory and a process holding memory on it. Skipped without a GPU (see tests/gpu_support.py).

With IETOP_ARTIFACTS set to a folder, the screen is saved there as gpu-dashboard.svg for a person to see.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from rich.console import Group
from rich.text import Text

from ietop.pipeline.discover import Plan
from ietop.tui.format import size
from ietop.tui.run import live_app
from ietop.tui.widgets.memory import MemoryPanel
from tests.gpu_support import GpuMemoryHolder, have_gpu, smi_gpus, smi_processes

pytestmark = pytest.mark.skipif(not have_gpu(), reason="needs an NVIDIA GPU and nvidia-smi")


def _panel_text(panel: MemoryPanel) -> str:
    content = panel.content
    assert isinstance(content, Group)
    return "\n".join(t.plain for t in content.renderables if isinstance(t, Text))


async def test_memory_panel_shows_the_gpu_and_who_holds_its_memory(tmp_path: Path) -> None:
    log = tmp_path / "ollama.log"
    log.write_text("")
    with GpuMemoryHolder() as holder:
        app = live_app(Plan(logs=[("ollama", str(log))]))
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(100):  # the holder was ready before the app started: the first sample has it
                if app.hardware is not None:
                    break
                await pilot.pause(0.1)
            app.refresh_view()
            await pilot.pause()
            hw = app.hardware
            assert hw is not None and hw.gpus, hw
            text = _panel_text(app.query_one(MemoryPanel))
            smi = smi_gpus()[0]
            assert f"GPU0 {smi.name.removeprefix('NVIDIA ')}" in text, text
            assert f"/{size(hw.gpus[0].memory_total)}" in text, text
            if holder.pid in smi_processes():
                assert f"pid {holder.pid} (other)" in text, text
            assert "RAM  " in text, text  # host memory from psutil next to the GPU
            if out := os.environ.get("IETOP_ARTIFACTS"):
                app.save_screenshot(filename="gpu-dashboard.svg", path=out)
