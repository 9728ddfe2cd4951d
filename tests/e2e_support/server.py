"""A base class for a real engine server on 127.0.0.1: start with retry on a taken port, wait for health, stop.

Subclasses define :meth:`command`, :meth:`environment`, :meth:`_stop_locked` (by PID or by process group) and
set ``error`` (the exception class raised when the server does not come up), ``engine`` (its name in messages),
``health_path``, ``poll_interval`` and ``health_timeout``.
"""

from __future__ import annotations

import atexit
import subprocess
import threading
import time
import weakref
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import httpx

from e2e_support.procs import HOST, free_port, log_since, log_tail

ADDRESS_IN_USE = "Address already in use"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

_live: weakref.WeakSet[ServerProcess] = weakref.WeakSet()
_S = TypeVar("_S", bound="ServerProcess")


class ServerProcess:
    """Shared lifecycle of a server process whose stdout+stderr are appended to ``self.log_path``."""

    error: type[RuntimeError] = RuntimeError
    engine = "server"
    health_path = "/health"
    poll_interval = 0.1
    health_timeout = 1.0
    start_new_session = False

    model: str
    log_level: str
    log_path: Path
    startup_timeout: float
    stop_grace: float
    _tmp: Path

    def _init_state(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._lock = threading.Lock()
        self.returncode: int | None = None
        self.t_spawn: float | None = None  # time.time() at Popen
        self.t_healthy: float | None = None  # time.time() when /health first answered 200
        self.t_stopped: float | None = None

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

    # --- to define ---------------------------------------------------------------------------------
    def command(self, port: int) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        raise NotImplementedError

    def _stop_locked(self, cleanup: bool = True) -> int | None:
        raise NotImplementedError

    def _prepare(self) -> None:
        """Called under the lock before the first spawn (e.g. create private cache dirs)."""

    def _pick_port(self) -> int:
        return free_port()

    def _unhealthy(self, status: int | None) -> str | None:
        """A reason to give up at once although the process lives (default: none)."""
        return None

    # --- lifecycle ---------------------------------------------------------------------------------
    def start(self: _S) -> _S:
        with self._lock:
            if self._proc is not None:
                name = type(self).__name__
                raise RuntimeError(f"{name}.start() called twice; make a new {name}")
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._prepare()
            env = self.environment()
            # The port is free when picked but could be taken before the server binds it: retry on EADDRINUSE.
            for attempt in range(3):
                port = self._pick_port()
                offset = self.log_path.stat().st_size if self.log_path.exists() else 0
                with open(self.log_path, "ab", buffering=0) as log:
                    self.t_spawn = time.time()
                    self._proc = subprocess.Popen(self.command(port), stdout=log, stderr=subprocess.STDOUT,
                                                  stdin=subprocess.DEVNULL, env=env, cwd=self._tmp,
                                                  start_new_session=self.start_new_session)
                self._port = port
                _live.add(self)
                try:
                    self._wait_healthy()
                    return self
                except self.error:
                    self._stop_locked(cleanup=False)
                    if attempt < 2 and ADDRESS_IN_USE in self._log_since(offset):
                        self._proc = None
                        self.returncode = None
                        self.t_stopped = None
                        continue
                    raise
        raise AssertionError("unreachable")

    def _log_since(self, offset: int) -> str:
        return log_since(self.log_path, offset)

    def _wait_healthy(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        with httpx.Client(timeout=self.health_timeout, trust_env=False) as client:
            while True:
                code = self._proc.poll()
                if code is not None:
                    raise self.error(
                        f"{self.engine} exited with {code} before {self.health_path} answered "
                        f"(cmd: {' '.join(self.command(self.port))}); log tail of {self.log_path}:\n"
                        f"{log_tail(self.log_path)}")
                try:
                    status: int | None = client.get(self.url + self.health_path).status_code
                except httpx.HTTPError:
                    status = None
                if status == 200:
                    self.t_healthy = time.time()
                    return
                reason = self._unhealthy(status)
                if reason is not None:
                    raise self.error(f"{self.engine} (pid {self._proc.pid}) {reason}; log tail of {self.log_path}:\n"
                                     f"{log_tail(self.log_path)}")
                if time.monotonic() > deadline:
                    raise self.error(
                        f"{self.engine} (pid {self._proc.pid}) did not answer {self.health_path} with 200 within "
                        f"{self.startup_timeout:.0f} s (last status {status}); log tail of {self.log_path}:\n"
                        f"{log_tail(self.log_path)}")
                time.sleep(self.poll_interval)

    def stop(self) -> int | None:
        """End the server (see the subclass for how); return its exit code. Safe to call again."""
        with self._lock:
            return self._stop_locked()

    def _stopped(self) -> None:
        self.t_stopped = time.time()
        _live.discard(self)

    def __enter__(self: _S) -> _S:
        if self._proc is None:
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped" if self.t_stopped else "new"
        port = self._port if self._port is not None else "-"
        return f"{type(self).__name__}(model={self.model!r}, level={self.log_level}, port={port}, {state})"


def check_log_level(log_level: str) -> str:
    level = log_level.upper()
    if level not in LOG_LEVELS:
        raise ValueError(f"log_level must be one of {LOG_LEVELS}, got {log_level!r}")
    return level


@atexit.register
def _stop_leftovers(*_: Any) -> None:
    for server in list(_live):
        server.stop()
