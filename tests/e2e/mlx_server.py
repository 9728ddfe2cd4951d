"""Run a real ``mlx_lm.server`` on 127.0.0.1 for a test, and stop it by PID.

    with MlxServer(models.default, log_level="INFO", log_path=tmp_path / "server.log") as server:
        httpx.get(server.url + "/health")
    # stopped: SIGTERM to server.pid, SIGKILL after a grace period

The server's stdout and stderr are appended (unbuffered) to ``log_path``: exactly what a user's
``mlx_lm.server ... 2>>server.log`` would hold, nothing of ours is written into it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from e2e_support.procs import HOST, free_port, log_tail, pid_alive, port_refuses, stop_pid
from e2e_support.server import LOG_LEVELS, ServerProcess, check_log_level

__all__ = ["HOST", "LOG_LEVELS", "MlxServer", "MlxServerError", "free_port", "log_tail", "pid_alive",
           "port_refuses"]

_THREAD_DIED = "generation thread died"


class MlxServerError(RuntimeError):
    """The server did not come up (or died); the message carries the tail of its log."""


class MlxServer(ServerProcess):
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

    error = MlxServerError
    engine = "mlx_lm.server"
    poll_interval = 0.1
    health_timeout = 1.0

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
        self.model = str(model_dir)
        self.log_level = check_log_level(log_level)
        self._tmp = Path(tempfile.mkdtemp(prefix="ietop-mlx-server-"))
        self.log_path = Path(log_path) if log_path is not None else self._tmp / "server.log"
        self._server_cmd = str(server) if server is not None else None
        self.hf_hub_cache = Path(hf_hub_cache) if hf_hub_cache is not None else self._tmp / "hf-hub"
        self.extra_args = list(extra_args)
        self.startup_timeout = startup_timeout
        self.stop_grace = stop_grace
        self._init_state()

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

    def _pick_port(self) -> int:
        return free_port()  # this module's name, so a test can monkeypatch mlx_server.free_port

    def _unhealthy(self, status: int | None) -> str | None:
        # 0.32.2: a model that fails to load kills the generation thread; /health then stays 503.
        if status == 503 and _THREAD_DIED in self._log_since(0):
            return f"is up but its generation thread died (model {self.model!r} failed to load?)"
        return None

    def _stop_locked(self, cleanup: bool = True) -> int | None:
        """SIGTERM to the PID, SIGKILL after ``stop_grace`` s, reap it."""
        proc = self._proc
        if proc is None or self.t_stopped is not None:
            if cleanup:
                self._cleanup_tmp()
            return self.returncode
        self.returncode = stop_pid(proc, self.stop_grace)
        self._stopped()
        if cleanup:
            self._cleanup_tmp()
        return self.returncode

    def _cleanup_tmp(self) -> None:
        # Keep the temp dir if the log lives there (the caller did not give a log_path): it may be read later.
        if self.log_path.parent != self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
