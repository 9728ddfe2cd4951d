"""Helpers for the tests that need a real NVIDIA GPU: nvidia-smi as the ground truth, and a process that
holds GPU memory so the per-process list has an entry to compare. Every test using them is skipped on a
machine without a GPU (CI, macOS, the project's own VM); they ran on a lent H200 (see the issue notes)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from types import TracebackType

MIB = 1 << 20
HELD_BYTES = 1 << 30

# Through the CUDA driver API with ctypes, so no CUDA toolkit or framework is needed: only the driver that
# NVML itself comes with. The primary context is the one every CUDA runtime uses; cuMemAlloc makes the
# allocation show in NVML's process list. The child says "ready" once it holds the memory and keeps it
# until its stdin closes.
_HOLDER = f"""
import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1")
def ok(code, what):
    if code != 0:
        print("error", what, code, flush=True)
        sys.exit(1)
ok(cuda.cuInit(0), "cuInit")
dev = ctypes.c_int()
ok(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
ctx = ctypes.c_void_p()
ok(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
ok(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
ptr = ctypes.c_uint64()
ok(cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t({HELD_BYTES})), "cuMemAlloc_v2")
print("ready", flush=True)
sys.stdin.read()
"""


@dataclass(frozen=True)
class SmiGpu:
    index: int
    uuid: str
    name: str
    memory_total_mib: int
    memory_used_mib: int
    temperature_c: int | None
    power_limit_w: float | None


def _number(text: str) -> float | None:
    text = text.strip()
    try:
        return float(text)
    except ValueError:  # "[N/A]", "[Not Supported]"
        return None


def smi_gpus() -> list[SmiGpu]:
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,uuid,name,memory.total,memory.used,temperature.gpu,power.limit",
         "--format=csv,noheader,nounits"], capture_output=True, text=True, check=True, timeout=60).stdout
    gpus = []
    for row in out.strip().splitlines():
        idx, uuid, name, total, used, temp, limit = (c.strip() for c in row.split(","))
        t = _number(temp)
        gpus.append(SmiGpu(int(idx), uuid, name, int(total), int(used), None if t is None else int(t), _number(limit)))
    return gpus


def smi_processes() -> dict[int, int]:
    """pid -> used MiB of the compute processes nvidia-smi lists (all GPUs)."""
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    procs = {}
    for row in out.strip().splitlines():
        pid, used = (c.strip() for c in row.split(","))
        procs[int(pid)] = int(used) if used.isdigit() else -1
    return procs


def have_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return bool(smi_gpus())
    except (subprocess.SubprocessError, OSError, ValueError):
        return False


class GpuMemoryHolder:
    """A child process holding HELD_BYTES on GPU 0 while the ``with`` block runs."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _HOLDER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def __enter__(self) -> GpuMemoryHolder:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            self.__exit__(None, None, None)
            raise RuntimeError(f"the GPU memory holder failed: {line!r}")
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        try:
            self.proc.communicate(timeout=30)  # closes stdin (the child lets go) and stdout
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
