"""Run a real ``mlx_lm.server`` on 127.0.0.1 for a test, and stop it by PID.

    with MlxServer(models.default, log_level="INFO", log_path=tmp_path / "server.log") as server:
        httpx.get(server.url + "/health")
    # stopped: SIGTERM to server.pid, SIGKILL after a grace period

The server's stdout and stderr are appended (unbuffered) to ``log_path``: exactly what a user's
``mlx_lm.server ... 2>>server.log`` would hold, nothing of ours is written into it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from pathlib import Path
from types import TracebackType

import httpx

HOST = "127.0.0.1"  # never anything else
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_ADDRESS_IN_USE = "Address already in use"
_THREAD_DIED = "generation thread died"

_live: weakref.WeakSet[MlxServer] = weakref.WeakSet()


class MlxServerError(RuntimeError):
    """The server did not come up (or died); the message carries the tail of its log."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def log_tail(path: Path, lines: int = 40) -> str:
    """The last lines of a server log, without the access lines of our own /health polling."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    kept = [line for line in text.splitlines() if '"GET /health HTTP/1.1"' not in line]
    return "\n".join(kept[-lines:])


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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


class MlxServer:
    """A real ``mlx_lm.server`` process bound to 127.0.0.1 on a free port.

    ``model_dir``: the ``--model`` (a local directory, or a repo id found in ``hf_hub_cache``).
    ``log_level``: ``--log-level``. ``log_path``: stdout+stderr are appended here (default: a temp file).
    ``server``: the ``mlx_lm.server`` console script (default: the cached venv's, see ``mlx_env``).
    ``hf_hub_cache``: ``HF_HUB_CACHE`` for the server (default: an empty temp dir; it must exist, or
    ``/v1/models`` answers 200 with an empty body). ``HF_HOME`` is always a private temp dir and
    ``HF_HUB_OFFLINE=1``, so nothing is downloaded and ``~/.cache/huggingface`` is never touched.
    ``extra_args``: more server flags (e.g. ``["--prompt-cache-size", "4"]``).

    ``start()`` (or ``with``) launches it and waits for ``GET /health`` → 200 (``startup_timeout`` s).
    Note that 0.31.3+ answers /health before the model's weights are loaded; the first request waits for them.
    ``stop()`` sends SIGTERM to the PID, SIGKILL after ``stop_grace`` s, reaps it; it is idempotent.
    """

    def __init__(
        self,
        model_dir: Path | str,
        log_level: str = "INFO",
        log_path: Path | str | None = None,
        *,
        server: Path | str | None = None,
        hf_hub_cache: Path | str | None = None,
        extra_args: list[str] | tuple[str, ...] = (),
        startup_timeout: float = 120.0,
        stop_grace: float = 5.0,
    ) -> None:
        level = log_level.upper()
        if level not in LOG_LEVELS:
            raise ValueError(f"log_level must be one of {LOG_LEVELS}, got {log_level!r}")
        self.model = str(model_dir)
        self.log_level = level
        self._tmp = Path(tempfile.mkdtemp(prefix="ietop-mlx-server-"))
        self.log_path = Path(log_path) if log_path is not None else self._tmp / "server.log"
        self._server_cmd = str(server) if server is not None else None
        self.hf_hub_cache = Path(hf_hub_cache) if hf_hub_cache is not None else self._tmp / "hf-hub"
        self.extra_args = list(extra_args)
        self.startup_timeout = startup_timeout
        self.stop_grace = stop_grace
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

    # --- lifecycle ---------------------------------------------------------------------------------
    def command(self, port: int) -> list[str]:
        if self._server_cmd is None:
            from mlx_env import ensure_mlx_env  # the cached venv; built on first use

            self._server_cmd = str(ensure_mlx_env().server)
        return [self._server_cmd, "--model", self.model, "--host", HOST, "--port", str(port),
                "--log-level", self.log_level, *self.extra_args]

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
        hf_home = self._tmp / "hf-home"
        hf_home.mkdir(exist_ok=True)
        self.hf_hub_cache.mkdir(parents=True, exist_ok=True)
        env.update(
            PYTHONUNBUFFERED="1",
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            HF_HUB_DISABLE_TELEMETRY="1",
            HF_HOME=str(hf_home),
            HF_HUB_CACHE=str(self.hf_hub_cache),
            TOKENIZERS_PARALLELISM="false",
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
        )
        return env

    def start(self) -> MlxServer:
        with self._lock:
            if self._proc is not None:
                raise RuntimeError("MlxServer.start() called twice; make a new MlxServer")
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            env = self.environment()
            # The port is free when picked but could be taken before the server binds it: retry on EADDRINUSE.
            for attempt in range(3):
                port = free_port()
                offset = self.log_path.stat().st_size if self.log_path.exists() else 0
                with open(self.log_path, "ab", buffering=0) as log:
                    self.t_spawn = time.time()
                    self._proc = subprocess.Popen(self.command(port), stdout=log, stderr=subprocess.STDOUT,
                                                  stdin=subprocess.DEVNULL, env=env, cwd=self._tmp)
                self._port = port
                _live.add(self)
                try:
                    self._wait_healthy()
                    return self
                except MlxServerError:
                    self._stop_locked(cleanup=False)
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
        with httpx.Client(timeout=1.0, trust_env=False) as client:
            while True:
                code = self._proc.poll()
                if code is not None:
                    raise MlxServerError(
                        f"mlx_lm.server exited with {code} before /health answered "
                        f"(cmd: {' '.join(self.command(self.port))}); log tail of {self.log_path}:\n"
                        f"{log_tail(self.log_path)}")
                try:
                    status = client.get(self.url + "/health").status_code
                except httpx.HTTPError:
                    status = None
                if status == 200:
                    self.t_healthy = time.time()
                    return
                # 0.32.2: a model that fails to load kills the generation thread; /health then stays 503.
                if status == 503 and _THREAD_DIED in self._log_since(0):
                    raise MlxServerError(
                        f"mlx_lm.server (pid {self._proc.pid}) is up but its generation thread died "
                        f"(model {self.model!r} failed to load?); log tail of {self.log_path}:\n"
                        f"{log_tail(self.log_path)}")
                if time.monotonic() > deadline:
                    raise MlxServerError(
                        f"mlx_lm.server (pid {self._proc.pid}) did not answer /health with 200 within "
                        f"{self.startup_timeout} s; log tail of {self.log_path}:\n{log_tail(self.log_path)}")
                time.sleep(0.1)

    def stop(self) -> int | None:
        """End the server by PID (SIGTERM, then SIGKILL); return its exit code. Safe to call again."""
        with self._lock:
            return self._stop_locked()

    def _stop_locked(self, cleanup: bool = True) -> int | None:
        proc = self._proc
        if proc is None or self.t_stopped is not None:
            if cleanup:
                self._cleanup_tmp()
            return self.returncode
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=self.stop_grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        self.returncode = proc.returncode
        self.t_stopped = time.time()
        _live.discard(self)
        if cleanup:
            self._cleanup_tmp()
        return self.returncode

    def _cleanup_tmp(self) -> None:
        # Keep the temp dir if the log lives there (the caller did not give a log_path): it may be read later.
        if self.log_path.parent != self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> MlxServer:
        if self._proc is None:
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped" if self.t_stopped else "new"
        port = self._port if self._port is not None else "-"
        return f"MlxServer(model={self.model!r}, level={self.log_level}, port={port}, {state})"


@atexit.register
def _stop_leftovers() -> None:
    for server in list(_live):
        server.stop()
