"""Plain data types the sources produce and the dashboard displays (no I/O here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A process holding a context on a GPU."""

    pid: int
    used_bytes: int | None
    """GPU memory it uses; None where NVML cannot tell (Windows WDDM, some containers)."""


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at one instant. Every None means N/A: this GPU or driver does not report it."""

    index: int
    name: str
    """Product name, e.g. "NVIDIA GeForce RTX 4090"; "" when unreadable."""
    uuid: str
    """Stable identity across reboots and re-enumeration ("GPU-..."); "" when unreadable."""
    memory_total: int | None
    memory_used: int | None
    util_percent: int | None
    """Percent of the last sample period in which a kernel ran (not how much of the GPU it used)."""
    power_w: float | None
    power_limit_w: float | None
    temperature_c: int | None
    processes: tuple[GpuProcess, ...]
    """Compute and graphics contexts merged by pid, sorted by pid; empty also when NVML refuses the list."""


class HostMemory(NamedTuple):
    """Host memory in bytes."""

    total: int
    available: int
    """Memory a new process could get without swapping (includes reclaimable cache)."""
    used: int
    """``total - available``: psutil's own ``used`` means different things on each OS."""
    swap_total: int
    swap_used: int
    wired: int | None = None
    """macOS/BSD: memory the kernel may not page out. On Apple silicon this includes what Metal has
    wired for the GPU (model weights, KV cache), so it is where an MLX or Ollama model lives. None
    elsewhere."""
    compressed: int | None = None
    """macOS: memory held by the compressor (Activity Monitor's "Compressed"). psutil does not report
    it, so it stays None until a source that can read it is worth its cost."""
