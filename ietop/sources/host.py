"""Engine processes and host memory, through psutil: the only module that imports it.

Keeping psutil behind these few functions (as nvitop keeps NVML behind one wrapper) means the rest of
ietop sees plain NamedTuples, and every platform quirk is handled once, here:

- Processes come and go, and other users' processes refuse inspection: ``NoSuchProcess``,
  ``ZombieProcess`` and ``AccessDenied`` never escape. A process that is gone (or a zombie, which has
  exited but is not reaped yet) samples as ``alive=False``; a field we may not read is None.
- Several fields are read inside ``Process.oneshot()``, so psutil reads ``/proc/<pid>/stat`` and
  friends once per sample instead of once per field.
- ``cpu_percent`` is a rate between two calls on the same ``psutil.Process`` object. Sampling keeps
  those objects per pid, so the first sample of a pid reports None (unknown) rather than psutil's
  meaningless first 0.0, and later samples cover the time since the previous one.

Blocking calls: everything here does file system or syscall work; run it in a thread worker.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import psutil

from ietop.sources.samples import HostMemory

__all__ = [
    "ProcessSample", "find_processes", "gpu_wired_limit_bytes", "host_memory", "parse_wired_limit_mb",
    "sample_process",
]

_T = TypeVar("_T")

_MAX_TRACKED = 256
"""Processes whose psutil objects are kept for cpu_percent; the oldest is dropped beyond this."""
_tracked: dict[int, Any] = {}
_tracked_lock = threading.Lock()


class ProcessSample(NamedTuple):
    """One process at one instant."""

    pid: int
    alive: bool
    """False when the process does not exist or has exited (a zombie counts as exited)."""
    rss_bytes: int | None
    """Resident set size; None when dead or not readable."""
    cpu_percent: float | None
    """Percent of one core since the previous sample of this pid (can exceed 100); None on the first."""
    create_time: float | None
    """Start time, seconds since the epoch; with ``pid`` it identifies the process across pid reuse."""
    cmdline: str
    """The command line joined with spaces; "" when dead or not readable."""




def _serves_loopback(ip: str) -> bool:
    """True for an address that a client on this host reaches through 127.0.0.1 or ::1."""
    try:
        addr = ipaddress.ip_address(ip.split("%", 1)[0])  # drop an IPv6 zone id
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.is_loopback or addr.is_unspecified


def _is_local_listener(conn: Any, port: int) -> bool:
    if conn.status != psutil.CONN_LISTEN or not conn.laddr:
        return False
    return bool(conn.laddr.port == port and _serves_loopback(conn.laddr.ip))


def _listening_on(port: int) -> set[int]:
    try:
        conns = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:
        # macOS needs root for the system-wide table; asking each process works for our own user's.
        return _listening_on_per_process(port)
    # On Linux without root, other users' sockets are listed with pid None: nothing to report for them.
    return {c.pid for c in conns if c.pid and _is_local_listener(c, port)}


def _listening_on_per_process(port: int) -> set[int]:
    return {proc.pid for proc in psutil.process_iter() if _listens(proc, port)}


def _listens(proc: Any, port: int) -> bool:
    try:
        return any(_is_local_listener(c, port) for c in proc.net_connections(kind="tcp"))
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _outermost(pids: set[int], port: int) -> set[int]:
    """Map each listener to its outermost ancestor that holds the same socket.

    A forked child inherits the listening socket (seen with mlx_lm.server's helper processes), and the
    system-wide table names only one holder per socket, picked arbitrarily: the server is the process
    that opened it, the outermost one.
    """
    kept: set[int] = set()
    for pid in pids:
        top = pid
        try:
            proc = psutil.Process(pid)
        except psutil.NoSuchProcess:
            continue  # exited since the table was read (a short-lived helper): it holds nothing now
        try:
            # Every ancestor, not only the parent: a fork of a fork may sit between the two holders.
            for parent in proc.parents():
                if parent.pid > 1 and _listens(parent, port):
                    top = parent.pid
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
        kept.add(top)
    return kept


def _cmdline_contains(text: str) -> set[int]:
    pids: set[int] = set()
    # With attrs, process_iter skips processes that vanish and gives ad_value for denied fields.
    for proc in psutil.process_iter(["cmdline"], ad_value=None):
        cmdline = proc.info.get("cmdline")
        if cmdline and text in " ".join(cmdline):
            pids.add(proc.pid)
    # ietop's own command line names what it looks for (`ietop --ollama ...`): never report ourselves.
    pids.discard(os.getpid())
    return pids


def find_processes(port: int | None = None, cmdline_contains: str | None = None) -> list[int]:
    """Pids listening on ``port`` on loopback or all interfaces, or whose command line contains the text.

    Of a process tree sharing one listening socket, only the outermost process is reported.

    The two criteria are alternatives (a union). A process that cannot be inspected is left out, never
    an error. Raises ValueError only when neither criterion is given (a caller's mistake).
    """
    if port is None and not cmdline_contains:
        raise ValueError("give a port, a command-line text, or both")
    pids: set[int] = set()
    if port is not None:
        listeners = _listening_on(port)
        found = _outermost(listeners, port)
        if listeners and not found:
            # The table named only a holder that has exited since (CI met mlx_lm.server's helper so): the
            # socket's other holders are still there, and a second read names one of them.
            found = _outermost(_listening_on(port), port)
        pids |= found
    if cmdline_contains:
        pids |= _cmdline_contains(cmdline_contains)
    return sorted(pids)


def _dead(pid: int) -> ProcessSample:
    return ProcessSample(pid, False, None, None, None, "")


def _forget(pid: int) -> None:
    with _tracked_lock:
        _tracked.pop(pid, None)


def _tracked_process(pid: int) -> tuple[Any, bool] | None:
    """The kept psutil object for ``pid`` (new if needed) and whether it was kept already."""
    with _tracked_lock:
        proc = _tracked.get(pid)
        # is_running() compares the start time too, so a reused pid gets a fresh object.
        if proc is not None and proc.is_running():
            return proc, True
        _tracked.pop(pid, None)
        try:
            proc = psutil.Process(pid)
        except (psutil.NoSuchProcess, ValueError):  # ValueError: a negative pid
            return None
        if len(_tracked) >= _MAX_TRACKED:
            del _tracked[next(iter(_tracked))]
        _tracked[pid] = proc
        return proc, False


def _readable(read: Callable[[], _T]) -> _T | None:
    try:
        return read()
    except psutil.AccessDenied:
        return None


def sample_process(pid: int) -> ProcessSample:
    """Sample ``pid``: never raises for a missing, exited or protected process."""
    found = _tracked_process(pid)
    if found is None:
        return _dead(pid)
    proc, primed = found
    try:
        with proc.oneshot():
            if proc.status() == psutil.STATUS_ZOMBIE:
                _forget(pid)
                return _dead(pid)
            rss = _readable(lambda: int(proc.memory_info().rss))
            cpu = _readable(lambda: float(proc.cpu_percent(None)))
            created = _readable(lambda: float(proc.create_time()))
            cmdline = _readable(lambda: " ".join(proc.cmdline())) or ""
    except psutil.NoSuchProcess:  # also ZombieProcess
        _forget(pid)
        return _dead(pid)
    except psutil.AccessDenied:  # status() itself refused: alive, but nothing readable
        return ProcessSample(pid, True, None, None, None, "")
    return ProcessSample(pid, True, rss, cpu if primed else None, created, cmdline)


def host_memory() -> HostMemory:
    """Physical memory and swap of this host."""
    vm = psutil.virtual_memory()
    swap = psutil.swap_memory()
    return HostMemory(
        total=int(vm.total),
        available=int(vm.available),
        used=int(vm.total - vm.available),
        swap_total=int(swap.total),
        swap_used=int(swap.used),
        wired=_optional_int(getattr(vm, "wired", None)),
    )


def _optional_int(value: object) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


_SYSCTL_TIMEOUT_S = 1.0


def parse_wired_limit_mb(text: str) -> int | None:
    """``sysctl -n iogpu.wired_limit_mb`` output → bytes; None for 0 (the default) or anything unreadable."""
    value = text.strip()
    if not value.isascii() or not value.isdigit():
        return None
    mb = int(value)
    return mb << 20 if mb > 0 else None


def gpu_wired_limit_bytes() -> int | None:
    """macOS on Apple silicon: how much memory the GPU may wire, if the user raised or lowered it.

    ``sudo sysctl iogpu.wired_limit_mb=N`` (macOS 14+) changes the cap on GPU-wired memory, which
    decides whether a large model fits at all. 0, the default, means macOS's own cap (roughly 2/3 of RAM
    on smaller machines, 3/4 on larger ones), which the sysctl does not state: that is None here, as
    are other OSes, an older macOS without the sysctl, and any failure or a run over 1 s.
    """
    if sys.platform != "darwin":
        return None
    try:
        # A GUI-launched process may have a PATH without /usr/sbin.
        sysctl = shutil.which("sysctl") or "/usr/sbin/sysctl"
        done = subprocess.run([sysctl, "-n", "iogpu.wired_limit_mb"], capture_output=True, text=True,
                              timeout=_SYSCTL_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_wired_limit_mb(done.stdout) if done.returncode == 0 else None
