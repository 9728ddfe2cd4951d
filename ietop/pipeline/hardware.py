"""What the hardware sampler posts: host memory, GPUs and engine processes at one instant (plain data)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # psutil and NVML load in the sampling worker, not before the first frame
    from ietop.sources.samples import GpuSample, HostMemory


@dataclass(frozen=True, slots=True)
class EngineProcess:
    """An engine's server process on this host (found by its listening port)."""

    engine: str
    pid: int
    rss_bytes: int | None
    cpu_percent: float | None
    started: float | None
    """Process start time (epoch seconds): the engine's real uptime."""


@dataclass(frozen=True, slots=True)
class Hardware:
    """What the sampling worker last saw (posted to the app, shown here)."""

    host: HostMemory | None
    gpus: tuple[GpuSample, ...]
    gpu_note: str | None
    """Why there is no GPU data ("no NVIDIA GPU: …"), or None."""
    engine_pids: dict[int, str]
    """pid → engine, for naming GPU processes."""
    wired_limit: int | None = None
    engines: tuple[EngineProcess, ...] = ()
