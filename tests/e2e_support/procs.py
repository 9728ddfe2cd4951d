"""Processes and ports on 127.0.0.1: free ports, liveness, process trees, log files, stopping by PID or group."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

HOST = "127.0.0.1"  # never anything else


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def port_refuses(port: int, timeout: float = 1.0) -> bool:
    """True if a TCP connect to 127.0.0.1:port is refused (nothing listens)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect((HOST, port))
        except ConnectionRefusedError:
            return True
        except OSError:
            return False
        return False


def log_tail(path: Path, lines: int = 40) -> str:
    """The last lines of a server log, without the access lines of our own /health polling."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    kept = [line for line in text.splitlines() if '"GET /health HTTP/1.1"' not in line]
    return "\n".join(kept[-lines:])


def log_since(path: Path, offset: int) -> str:
    """What ``path`` holds from byte ``offset`` on ("" if it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name: [state, ppid, pgrp, session, ...], or None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2:].split()


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie (zombies are only told apart where /proc exists)."""
    fields = _stat_fields(pid)
    if fields is not None:
        return fields[0] != "Z"
    if sys.platform.startswith("linux"):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def process_tree(root: int) -> list[int]:
    """``root`` and every live (non-zombie) process in its process group or below it, sorted (Linux /proc)."""
    parents: dict[int, int] = {}
    groups: dict[int, int] = {}
    for pid in _all_pids():
        fields = _stat_fields(pid)
        if fields is None or fields[0] == "Z":
            continue
        parents[pid], groups[pid] = int(fields[1]), int(fields[2])
    found = {pid for pid, pgrp in groups.items() if pgrp == root}
    if root in parents:
        found.add(root)
    grew = True
    while grew:
        more = {pid for pid, ppid in parents.items() if ppid in found and pid not in found}
        found |= more
        grew = bool(more)
    return sorted(found)


def rss_bytes(pids: Sequence[int]) -> int:
    """Sum of the resident set sizes of ``pids`` (those still alive), from /proc/PID/status."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


def process_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def stop_pid(proc: subprocess.Popen[bytes], grace: float) -> int:
    """SIGTERM ``proc``, SIGKILL it after ``grace`` s, reap it; return its exit code."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    return int(proc.returncode)


def signal_group(pgid: int, pids: Sequence[int], sig: signal.Signals) -> None:
    """Send ``sig`` to process group ``pgid`` and to each of ``pids`` (children that left the group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def stop_group(proc: subprocess.Popen[bytes], grace: float) -> list[int]:
    """Stop ``proc`` (a session/group leader) and its whole tree: SIGTERM to the group, SIGKILL to whatever is
    left after ``grace`` s; reap ``proc``. Return the pids of the tree as it was when the stop began."""
    tree = process_tree(proc.pid)
    deadline = time.monotonic() + grace
    if proc.poll() is None:
        signal_group(proc.pid, tree, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    # Whatever is left of the tree after the grace period (a stuck leader, a child that outlived it) gets SIGKILL.
    while True:
        left = [pid for pid in set(tree) | set(process_tree(proc.pid)) if pid_alive(pid)]
        if not left:
            break
        if time.monotonic() > deadline:
            signal_group(proc.pid, left, signal.SIGKILL)
            deadline = time.monotonic() + 30.0
        time.sleep(0.1)
    if proc.poll() is None:
        signal_group(proc.pid, [proc.pid], signal.SIGKILL)
    proc.wait(timeout=30)
    return tree
