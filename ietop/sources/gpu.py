"""NVIDIA GPUs through NVML: the only module that imports pynvml (package nvidia-ml-py).

A GPU is optional for ietop (Apple silicon and CPU-only hosts have none), and NVML fails in many
ordinary ways: no library, no driver, a driver/library mismatch after an upgrade, a consumer card
that does not report power, a GPU that falls off the bus. So, as in nvitop's ``libnvml``:

- ``Nvml.start`` turns a missing library or driver into a one-line reason, never an exception;
- each reading of each device is taken on its own, and one that NVML refuses (NotSupported,
  NoPermission, GpuIsLost, an old pynvml without the function, ...) becomes None, the "N/A" the
  widgets print, while the other readings of that device still come through.

Blocking calls (NVML queries the driver, tens of microseconds to milliseconds each): run ``sample`` in
a thread worker. ``sample`` and ``close`` may be called from different threads.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from ietop.sources.samples import GpuProcess, GpuSample

__all__ = ["Nvml"]

_T = TypeVar("_T")

_NOT_AVAILABLE = (1 << 64) - 1
"""NVML_VALUE_NOT_AVAILABLE for unsigned long long: a process's memory under WDDM or in a container."""

# NVML return codes (nvml.h); pynvml exposes the same numbers as NVML_ERROR_*.
_LIBRARY_NOT_FOUND = 12
_DRIVER_NOT_LOADED = 9
_NO_PERMISSION = 4
_LIB_RM_VERSION_MISMATCH = 18
_TEMPERATURE_GPU = 0
"""NVML_TEMPERATURE_GPU: the die sensor, the only one NVML defines."""
_INIT_REASONS = {
    _LIBRARY_NOT_FOUND: "no NVIDIA GPU: NVML library not found",
    _DRIVER_NOT_LOADED: "no NVIDIA GPU: driver not loaded",
    _NO_PERMISSION: "NVIDIA GPU not readable: no permission to use NVML",
    _LIB_RM_VERSION_MISMATCH: "NVIDIA GPU not readable: driver and NVML versions differ (reboot after an update?)",
}






class _NoError(Exception):
    """Stands in for pynvml.NVMLError when pynvml is not importable: nothing raises it."""


def _text(value: object) -> str:
    # pynvml returned bytes before 11.5 and str after.
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class Nvml:
    """NVML session: ``start()``, then ``sample()`` as often as wanted, then ``close()``.

    Args:
        lib: an object with pynvml's function names; the pynvml module itself when None (imported on
            ``start``, so importing this module never loads NVML). Tests pass a fake.
    """

    def __init__(self, lib: Any = None) -> None:
        self._lib = lib
        self._error: type[BaseException] = _NoError
        self._started = False
        self._lock = threading.Lock()
        self.reason: str | None = None
        """Why no GPU can be read (from ``start``); None while available or before ``start``."""

    def __repr__(self) -> str:
        return f"Nvml(available={self._started}, reason={self.reason!r})"

    @property
    def available(self) -> bool:
        """True between a successful ``start`` and ``close``."""
        return self._started

    def start(self) -> str | None:
        """Initialise NVML; None on success, else one line saying why no GPU can be read."""
        with self._lock:
            if self._started:
                return None
            reason = self._init()
            self.reason = reason
            self._started = reason is None
            return reason

    def _init(self) -> str | None:
        try:
            if self._lib is None:
                import pynvml

                self._lib = pynvml
            self._error = self._error_class()
            self._lib.nvmlInit()
        except ImportError:
            return "no NVIDIA GPU: pynvml (nvidia-ml-py) is not installed"
        except OSError as exc:  # a library that exists but cannot be loaded (wrong architecture...)
            return f"no NVIDIA GPU: NVML could not be loaded ({exc.strerror or exc})"
        except self._error as exc:
            code = getattr(exc, "value", None)
            known = _INIT_REASONS.get(code) if isinstance(code, int) else None
            return known or f"NVIDIA GPU not readable: NVML init failed ({exc})"
        return None

    def _error_class(self) -> type[BaseException]:
        own = getattr(self._lib, "NVMLError", None)
        if isinstance(own, type) and issubclass(own, BaseException):
            return own
        try:  # a fake library raising pynvml's real errors
            import pynvml
        except ImportError:
            return _NoError
        return pynvml.NVMLError  # type: ignore[no-any-return]

    def close(self) -> None:
        """Shut NVML down; a second call, or one without a successful ``start``, does nothing."""
        with self._lock:
            if not self._started:
                return
            self._started = False
            # A failure here means the driver went away meanwhile: nothing is left to release.
            with contextlib.suppress(self._error):
                self._lib.nvmlShutdown()

    def sample(self) -> tuple[GpuSample, ...]:
        """Read every GPU; () when NVML is not available or cannot count the devices."""
        with self._lock:
            if not self._started:
                return ()
            count = self._query(self._lib.nvmlDeviceGetCount)
            return tuple(self._device(i) for i in range(count or 0))

    def _query(self, call: Callable[..., _T], *args: Any) -> _T | None:
        """One NVML call; None when NVML refuses it or pynvml lacks the function (AttributeError)."""
        try:
            return call(*args)
        except (self._error, AttributeError):
            return None

    def _device(self, index: int) -> GpuSample:
        lib, q = self._lib, self._query
        handle = q(lib.nvmlDeviceGetHandleByIndex, index)
        if handle is None:  # GPU lost, or hidden from this process
            return GpuSample(index, "", "", None, None, None, None, None, None, ())
        name, uuid = q(lib.nvmlDeviceGetName, handle), q(lib.nvmlDeviceGetUUID, handle)
        memory = self._memory(handle)
        util = q(lib.nvmlDeviceGetUtilizationRates, handle)
        power_mw = q(lib.nvmlDeviceGetPowerUsage, handle)
        limit_mw = q(lib.nvmlDeviceGetEnforcedPowerLimit, handle)
        temperature = q(lib.nvmlDeviceGetTemperature, handle, _TEMPERATURE_GPU)
        return GpuSample(
            index=index,
            name="" if name is None else _text(name),
            uuid="" if uuid is None else _text(uuid),
            memory_total=None if memory is None else int(memory.total),
            memory_used=None if memory is None else int(memory.used),
            util_percent=None if util is None else int(util.gpu),
            power_w=None if power_mw is None else power_mw / 1000,
            power_limit_w=None if limit_mw is None else limit_mw / 1000,
            temperature_c=None if temperature is None else int(temperature),
            processes=self._processes(handle),
        )

    def _memory(self, handle: Any) -> Any:
        """Memory info as nvidia-smi reports it: the v2 call, whose ``used`` leaves out what the driver
        reserves. v1's ``used`` counts the reservation too: 615 MiB "used" on an idle H200 (driver 580)
        whose nvidia-smi said 0 MiB. Drivers before R510 have no v2; then v1 is the best there is."""
        version = getattr(self._lib, "nvmlMemory_v2", None)
        if version is not None:
            memory = self._query(partial(self._lib.nvmlDeviceGetMemoryInfo, version=version), handle)
            if memory is not None:
                return memory
        return self._query(self._lib.nvmlDeviceGetMemoryInfo, handle)

    def _processes(self, handle: Any) -> tuple[GpuProcess, ...]:
        used: dict[int, int | None] = {}
        for call in (self._lib.nvmlDeviceGetComputeRunningProcesses, self._lib.nvmlDeviceGetGraphicsRunningProcesses):
            for proc in self._query(call, handle) or ():
                pid = int(proc.pid)
                amount = getattr(proc, "usedGpuMemory", None)
                amount = None if amount is None or amount == _NOT_AVAILABLE else int(amount)
                # A process with both a compute and a graphics context is listed twice with the
                # memory of the one process: keep one entry, never the sum.
                if pid not in used or (amount is not None and (used[pid] or 0) < amount):
                    used[pid] = amount
        return tuple(GpuProcess(pid, used[pid]) for pid in sorted(used))


def gpu_totals() -> tuple[tuple[str, int], ...]:
    """(name, memory in bytes) of each NVIDIA GPU, read once (a command that asks once, e.g. `ietop budget`);
    empty without NVML or a GPU."""
    nvml = Nvml()
    if nvml.start() is not None:
        return ()
    try:
        return tuple((g.name or f"GPU {g.index}", g.memory_total) for g in nvml.sample() if g.memory_total is not None)
    finally:
        nvml.close()
