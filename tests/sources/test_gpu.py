"""NVML sampling turns every way a GPU or driver can refuse into None, and a host without one into a reason.

Most tests drive ``Nvml`` with ``FakeNvml``, an object with pynvml's function names that raises pynvml's
*real* error classes (``pynvml.NVMLError(code)`` maps the code to its subclass, as the C wrapper does), so
the error handling under test is the one that meets real NVML. One test uses the real pynvml on this
machine, which has no NVIDIA GPU: it must come out as a reason string, not an exception.
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from ietop.sources.gpu import Nvml
from ietop.sources.samples import GpuProcess, GpuSample

NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30


class FakeNvml:
    """Two GPUs by default; ``fail`` maps (function name, device index) to an NVML error code."""

    def __init__(self, devices: list[dict[str, Any]] | None = None, *, init_error: int | None = None,
                 fail: dict[tuple[str, int], int] | None = None) -> None:
        self.devices = devices if devices is not None else [
            {"name": b"NVIDIA GeForce RTX 4090", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
             "total": 24 * GIB, "used": 6 * GIB, "util": 87, "power_mw": 312_456, "limit_mw": 450_000, "temp": 71,
             "compute": [(4242, 5 * GIB)], "graphics": [(1337, 300 << 20)]},
            {"name": "NVIDIA RTX A2000", "uuid": "GPU-66666666-7777-8888-9999-000000000000",
             "total": 12 * GIB, "used": 1 * GIB, "util": 0, "power_mw": 9_000, "limit_mw": 70_000, "temp": 40,
             "compute": [], "graphics": []},
        ]
        self.init_error = init_error
        self.fail = fail or {}
        self.init_calls = 0
        self.shutdown_calls = 0

    def _dev(self, name: str, handle: int) -> dict[str, Any]:
        code = self.fail.get((name, handle))
        if code is not None:
            raise pynvml.NVMLError(code)
        return self.devices[handle]

    def nvmlInit(self) -> None:
        self.init_calls += 1
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdown_calls += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._dev("handle", index)
        return index

    def nvmlDeviceGetName(self, handle: int) -> str | bytes:
        return self._dev("name", handle)["name"]

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return self._dev("uuid", handle)["uuid"]

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        d = self._dev("memory", handle)
        return SimpleNamespace(total=d["total"], used=d["used"], free=d["total"] - d["used"])

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=self._dev("util", handle)["util"], memory=0)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return self._dev("power", handle)["power_mw"]

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: int) -> int:
        return self._dev("limit", handle)["limit_mw"]

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._dev("temperature", handle)["temp"]

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self._dev("compute", handle)["compute"]]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: int) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self._dev("graphics", handle)["graphics"]]


def _started(fake: FakeNvml) -> Nvml:
    nvml = Nvml(fake)
    assert nvml.start() is None
    return nvml


def test_fake_raises_the_real_subclasses() -> None:
    """The premise of every other test: pynvml maps a code to the class real NVML calls raise."""
    assert type(pynvml.NVMLError(NOT_SUPPORTED)) is pynvml.NVMLError_NotSupported


def test_two_gpus() -> None:
    nvml = _started(FakeNvml())
    assert nvml.available
    first, second = nvml.sample()
    assert first == GpuSample(
        index=0, name="NVIDIA GeForce RTX 4090", uuid="GPU-11111111-2222-3333-4444-555555555555",
        memory_total=24 * GIB, memory_used=6 * GIB, util_percent=87, power_w=312.456, power_limit_w=450.0,
        temperature_c=71, processes=(GpuProcess(1337, 300 << 20), GpuProcess(4242, 5 * GIB)),
    )
    assert (second.index, second.name, second.memory_total, second.power_w, second.processes) == (
        1, "NVIDIA RTX A2000", 12 * GIB, 9.0, ())


class FakeNvmlV2(FakeNvml):
    """A driver with ``nvmlDeviceGetMemoryInfo_v2`` (R510+): ``used`` without what the driver reserves."""

    nvmlMemory_v2 = pynvml.nvmlMemory_v2
    RESERVED = 615 << 20

    def __init__(self, *, v2_error: int | None = None) -> None:
        super().__init__()
        self.v2_error = v2_error

    def nvmlDeviceGetMemoryInfo(self, handle: int, version: int | None = None) -> SimpleNamespace:
        d = self._dev("memory", handle)
        if not version:
            return SimpleNamespace(total=d["total"], used=d["used"] + self.RESERVED, free=d["total"] - d["used"])
        assert version == pynvml.nvmlMemory_v2
        if self.v2_error is not None:
            raise pynvml.NVMLError(self.v2_error)
        return SimpleNamespace(total=d["total"], reserved=self.RESERVED, used=d["used"],
                               free=d["total"] - d["used"] - self.RESERVED)


def test_memory_used_is_what_nvidia_smi_shows() -> None:
    """v1's used includes the driver's reservation; v2's, which nvidia-smi shows, does not."""
    first, _ = _started(FakeNvmlV2()).sample()
    assert (first.memory_total, first.memory_used) == (24 * GIB, 6 * GIB)


def test_driver_without_memory_v2_falls_back_to_v1() -> None:
    first, _ = _started(FakeNvmlV2(v2_error=pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)).sample()
    assert (first.memory_total, first.memory_used) == (24 * GIB, 6 * GIB + FakeNvmlV2.RESERVED)


def test_unsupported_readings_are_none_and_the_rest_still_come() -> None:
    fake = FakeNvml(fail={("power", 0): NOT_SUPPORTED, ("limit", 0): NOT_SUPPORTED,
                          ("temperature", 0): NOT_SUPPORTED, ("util", 1): pynvml.NVML_ERROR_NO_PERMISSION})
    first, second = _started(fake).sample()
    assert (first.power_w, first.power_limit_w, first.temperature_c) == (None, None, None)
    assert (first.memory_used, first.util_percent, first.name) == (6 * GIB, 87, "NVIDIA GeForce RTX 4090")
    assert second.util_percent is None
    assert (second.power_w, second.temperature_c) == (9.0, 40)


def test_lost_gpu_is_listed_with_nothing_readable() -> None:
    fake = FakeNvml(fail={("handle", 1): pynvml.NVML_ERROR_GPU_IS_LOST})
    first, second = _started(fake).sample()
    assert first.name == "NVIDIA GeForce RTX 4090"
    assert second == GpuSample(1, "", "", None, None, None, None, None, None, ())


def test_process_lists_are_merged_by_pid() -> None:
    fake = FakeNvml()
    fake.devices[0]["compute"] = [(4242, 5 * GIB), (77, None), (9001, 2 * GIB)]
    # 4242 also has a graphics context (reported with the same memory); 77's memory is only known there.
    fake.devices[0]["graphics"] = [(4242, 5 * GIB), (77, 64 << 20), (1337, (1 << 64) - 1)]
    (first, _) = _started(fake).sample()
    assert first.processes == (
        GpuProcess(77, 64 << 20), GpuProcess(1337, None), GpuProcess(4242, 5 * GIB), GpuProcess(9001, 2 * GIB))


def test_process_list_refused_gives_no_processes() -> None:
    fake = FakeNvml(fail={("compute", 0): NOT_SUPPORTED})
    (first, _) = _started(fake).sample()
    assert first.processes == (GpuProcess(1337, 300 << 20),)  # the graphics list still came


@pytest.mark.parametrize(("code", "reason"), [
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "no NVIDIA GPU: NVML library not found"),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "no NVIDIA GPU: driver not loaded"),
])
def test_init_failure_is_a_reason(code: int, reason: str) -> None:
    fake = FakeNvml(init_error=code)
    nvml = Nvml(fake)
    assert nvml.start() == reason
    assert not nvml.available
    assert nvml.reason == reason
    assert nvml.sample() == ()
    nvml.close()
    assert fake.shutdown_calls == 0  # nothing was initialised, so nothing is shut down


def test_other_init_failures_say_what_nvml_said() -> None:
    reason = Nvml(FakeNvml(init_error=pynvml.NVML_ERROR_UNKNOWN)).start()
    assert reason is not None and "NVML init failed" in reason and "\n" not in reason


def test_no_devices() -> None:
    nvml = _started(FakeNvml(devices=[]))
    assert nvml.available and nvml.sample() == ()


def test_close_shuts_down_once() -> None:
    fake = FakeNvml()
    nvml = _started(fake)
    assert nvml.start() is None  # a second start is a no-op, not a second init
    nvml.close()
    nvml.close()
    assert (fake.init_calls, fake.shutdown_calls) == (1, 1)
    assert not nvml.available
    assert nvml.sample() == ()


def test_real_pynvml_without_a_gpu() -> None:
    """This machine has no NVIDIA driver: the real library must say so in one line and raise nothing."""
    nvml = Nvml()
    reason = nvml.start()
    if reason is None:  # pragma: no cover - only on a machine with an NVIDIA GPU
        try:
            samples = nvml.sample()
            assert samples and all(s.name for s in samples)
        finally:
            nvml.close()
        return
    assert reason.startswith("no NVIDIA GPU"), reason
    assert "\n" not in reason
    assert not nvml.available
    assert nvml.sample() == ()
    nvml.close()
    nvml.close()


def test_only_gpu_py_imports_pynvml() -> None:
    """One module owns the C library (ARCHITECTURE.md house style 3); imports inside functions count."""
    owners = set()
    for path in [*(ROOT / "ietop").rglob("*.py"), *(ROOT / "parsers").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            if any(n.split(".")[0] == "pynvml" for n in names):
                owners.add(path.relative_to(ROOT).as_posix())
    assert owners == {"ietop/sources/gpu.py"}
