"""Host probing finds a real engine-like process by port and by command line, samples it, and notices its death.

The child is a real ``python -c`` process that listens on a free 127.0.0.1 port and holds about 50 MB,
so the psutil paths (connection table, /proc reads, oneshot) run for real; nothing is faked.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from ietop.sources import host
from ietop.sources.host import ProcessSample, find_processes, host_memory, sample_process
from ietop.sources.samples import HostMemory

CHILD = """
import socket, sys
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen()
ballast = b"\\x01" * (50 << 20)  # written, so the pages are resident
print(sock.getsockname()[1], flush=True)
sys.stdin.read()
"""


class Child(NamedTuple):
    proc: subprocess.Popen[str]
    port: int
    marker: str


@pytest.fixture
def child() -> Iterator[Child]:
    marker = f"ietop-test-engine-{uuid.uuid4().hex}"
    with subprocess.Popen([sys.executable, "-c", CHILD, marker], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            yield Child(proc, int(proc.stdout.readline()), marker)
        finally:
            proc.kill()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_find_by_port(child: Child) -> None:
    assert find_processes(port=child.port) == [child.proc.pid]
    assert find_processes(port=_free_port()) == []


def test_find_by_port_without_the_system_table(child: Child, monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS refuses the system-wide connection table to non-root users; each process is asked instead."""

    def denied(kind: str = "inet") -> None:
        raise host.psutil.AccessDenied()

    monkeypatch.setattr(host.psutil, "net_connections", denied)
    assert find_processes(port=child.port) == [child.proc.pid]


@pytest.mark.parametrize(
    ("ip", "local"),
    [("127.0.0.1", True), ("127.0.1.1", True), ("0.0.0.0", True), ("::", True), ("::1", True),
     ("::ffff:127.0.0.1", True), ("192.168.1.5", False), ("10.0.0.1", False), ("fe80::1%eth0", False), ("", False)],
)
def test_which_listen_addresses_count(ip: str, local: bool) -> None:
    assert host._serves_loopback(ip) is local


def test_find_by_cmdline(child: Child) -> None:
    assert find_processes(cmdline_contains=child.marker) == [child.proc.pid]
    assert find_processes(cmdline_contains="no-such-process-" + uuid.uuid4().hex) == []


def test_criteria_are_a_union(child: Child) -> None:
    assert find_processes(port=_free_port(), cmdline_contains=child.marker) == [child.proc.pid]
    assert find_processes(port=child.port, cmdline_contains=child.marker) == [child.proc.pid]


def test_no_criteria_is_a_usage_error() -> None:
    with pytest.raises(ValueError, match="port"):
        find_processes()


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_never_finds_itself() -> None:
    own = Path("/proc/self/cmdline").read_bytes().split(b"\0")[0].decode()
    assert os.getpid() not in find_processes(cmdline_contains=own)


def test_sample_live_process(child: Child) -> None:
    first = sample_process(child.proc.pid)
    assert first.pid == child.proc.pid and first.alive
    assert first.rss_bytes is not None and first.rss_bytes > 40 << 20
    assert first.cpu_percent is None  # no previous sample to measure a rate against
    assert first.create_time is not None and abs(first.create_time - time.time()) < 120
    assert child.marker in first.cmdline
    second = sample_process(child.proc.pid)
    assert second.cpu_percent is not None and second.cpu_percent >= 0
    assert second.create_time == first.create_time


def test_killed_process_samples_as_dead(child: Child) -> None:
    pid = child.proc.pid
    assert sample_process(pid).alive
    child.proc.kill()
    # Not reaped yet: a zombie, which has exited and must read as dead too.
    deadline = time.monotonic() + 10
    while sample_process(pid).alive:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert sample_process(pid) == ProcessSample(pid, False, None, None, None, "")
    child.proc.wait()
    assert sample_process(pid) == ProcessSample(pid, False, None, None, None, "")
    assert find_processes(port=child.port) == []


@pytest.mark.parametrize("pid", [2**31 - 1, -5])
def test_missing_pid_samples_as_dead(pid: int) -> None:
    assert sample_process(pid) == ProcessSample(pid, False, None, None, None, "")


def test_host_memory_is_sane() -> None:
    mem = host_memory()
    assert isinstance(mem, HostMemory)
    assert mem.total > 64 << 20
    assert 0 < mem.available <= mem.total
    assert mem.used == mem.total - mem.available
    assert 0 <= mem.swap_used <= mem.swap_total or mem.swap_total == 0


FORKING = """
import os, socket, sys
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen()
pid = os.fork()
if pid == 0:  # the child inherits the listening socket, as a forked helper of a server does
    sys.stdin.read()
    os._exit(0)
print(sock.getsockname()[1], pid, flush=True)
sys.stdin.read()
"""


def test_forked_child_sharing_the_socket_is_not_the_server() -> None:
    with subprocess.Popen([sys.executable, "-c", FORKING], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True) as proc:
        try:
            assert proc.stdout is not None
            port, child_pid = map(int, proc.stdout.readline().split())
            assert child_pid != proc.pid
            assert find_processes(port=port) == [proc.pid]
        finally:
            proc.kill()
            os.kill(child_pid, 9)


def test_wired_memory_is_macos_only() -> None:
    mem = host_memory()
    if sys.platform == "darwin":  # pragma: no cover - macOS
        assert mem.wired is not None and 0 < mem.wired < mem.total
    else:
        assert mem.wired is None
    assert mem.compressed is None  # psutil does not report it on any OS


@pytest.mark.parametrize(("text", "expected"), [
    ("49152\n", 49152 << 20), ("1", 1 << 20), (" 8192 ", 8192 << 20),
    ("0\n", None), ("", None), ("-1", None), ("12.5", None), ("unknown oid 'iogpu.wired_limit_mb'", None), ("４", None),
])
def test_parse_wired_limit_mb(text: str, expected: int | None) -> None:
    assert host.parse_wired_limit_mb(text) == expected


def test_gpu_wired_limit_is_none_off_macos() -> None:
    if sys.platform == "darwin":  # pragma: no cover - macOS
        pytest.skip("this host is a Mac")
    assert host.gpu_wired_limit_bytes() is None


def _fake_sysctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    """A `sysctl` executable first on PATH, and a platform that says macOS."""
    exe = tmp_path / "sysctl"
    exe.write_text(f"#!{sys.executable}\nimport sys, time\n{script}\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setattr(host.sys, "platform", "darwin")


def test_gpu_wired_limit_on_macos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_sysctl(tmp_path, monkeypatch, "assert sys.argv[1:] == ['-n', 'iogpu.wired_limit_mb']\nprint(57344)")
    assert host.gpu_wired_limit_bytes() == 57344 << 20


@pytest.mark.parametrize("script", [
    "print(0)",  # the default cap, which the sysctl does not state
    "print(\"sysctl: unknown oid 'iogpu.wired_limit_mb'\", file=sys.stderr); sys.exit(1)",  # macOS 13 and older
    "print('garbage')",
])
def test_gpu_wired_limit_unknown_on_macos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    _fake_sysctl(tmp_path, monkeypatch, script)
    assert host.gpu_wired_limit_bytes() is None


def test_gpu_wired_limit_gives_up_after_a_second(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_sysctl(tmp_path, monkeypatch, "time.sleep(30)\nprint(1024)")
    began = time.monotonic()
    assert host.gpu_wired_limit_bytes() is None
    assert time.monotonic() - began < 5


def test_a_holder_gone_since_the_table_was_read(child: Child, monkeypatch: pytest.MonkeyPatch) -> None:
    """The system table names one holder per socket; when it names a forked helper that exits before it is
    looked at (seen in CI with mlx_lm.server), the server is found by reading the table again, not the dead
    helper's pid reported."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # reaped: its pid names no process
    reads: list[int] = []
    real = host._listening_on

    def first_names_the_gone_one(port: int) -> set[int]:
        reads.append(port)
        return {gone.pid} if len(reads) == 1 else real(port)

    monkeypatch.setattr(host, "_listening_on", first_names_the_gone_one)
    assert find_processes(port=child.port) == [child.proc.pid]
    assert len(reads) == 2
