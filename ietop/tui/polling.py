"""The dashboard's polling and sampling loops: engine endpoints (async, on the app's loop) and host, GPU
and engine processes (a thread). Results go to the store through the app, on the main thread."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ietop.pipeline import apply_poll

if TYPE_CHECKING:

    from ietop.tui.app import IetopApp

PATHS = {
    "ollama": (("version", "/api/version"), ("ps", "/api/ps")),
    "vllm": (("models", "/v1/models"), ("metrics", "/metrics")),
    "mlx": (("health", "/health"), ("models", "/v1/models")),
}
"""What is polled per engine: never an endpoint that loads a model (see reference/ollama-api.md)."""
SAMPLE_S = 2.0


def poll_urls(endpoints: list[tuple[str, str]]) -> dict[str, tuple[str, str, str]]:
    """URL → (engine, kind, base URL)."""
    urls: dict[str, tuple[str, str, str]] = {}
    for engine, base in endpoints:
        base = base.rstrip("/")
        for kind, path in PATHS.get(engine, ()):
            urls[base + path] = (engine, kind, base)
    return urls


async def poll_forever(app: IetopApp, endpoints: list[tuple[str, str]], interval: float) -> None:
    import asyncio

    import httpx

    from ietop.sources.http import Poller, PollResult

    urls = poll_urls(endpoints)
    never = asyncio.Event()  # the app cancels this worker when it exits

    def on_result(result: PollResult) -> None:
        engine, kind, base = urls[result.url]
        # On the app's loop, i.e. the main thread: the store's single writer.
        apply_poll(app.store, engine, kind, base, result.status, result.body, result.error,
                   datetime.now(timezone.utc))

    # trust_env=False: an HTTP(S)_PROXY in the environment must not capture polls of local engines.
    async with httpx.AsyncClient(trust_env=False) as client:
        poller = Poller(client, list(urls), interval=interval, timeout=min(2.0, max(interval, 0.5)))
        await poller.run(on_result, never)


def _port(base: str) -> int | None:
    try:
        return urlsplit(base).port or (443 if base.startswith("https") else 80)
    except ValueError:
        return None


def _local(base: str) -> bool:
    host = urlsplit(base).hostname or ""
    return host in ("127.0.0.1", "localhost", "::1", "0.0.0.0")


def sample_forever(app: IetopApp, endpoints: list[tuple[str, str]], stop: threading.Event) -> None:
    """Host memory, GPUs and engine processes every SAMPLE_S seconds, posted to the app."""
    from ietop.sources.gpu import Nvml
    from ietop.sources.host import find_processes, gpu_wired_limit_bytes, host_memory, sample_process
    from ietop.tui.app import HardwareSampled
    from ietop.tui.widgets.memory import EngineProcess, Hardware

    nvml = Nvml()
    note = nvml.start()
    wired_limit = gpu_wired_limit_bytes()
    ports = {port: engine for engine, base in endpoints if (port := _port(base)) is not None and _local(base)}
    try:
        while not stop.is_set():
            pids: dict[int, str] = {}
            answering = {_port(st.endpoint) for st in list(app.store.engines.values()) if st.state in ("up", "dead")}
            for port, engine in ports.items():
                if port not in answering:
                    continue  # nothing listens: skip the system-wide connection scan (idle CPU)
                for pid in find_processes(port=port):
                    pids[pid] = engine
            processes: list[tuple[int, float, int | None, bool]] = []
            now = time.time()
            for src, info in enumerate(app.store.sources):
                if info.engine == "mlx":
                    found = find_processes(cmdline_contains="mlx_lm.server")
                    if found:
                        sample = sample_process(found[0])
                        processes.append((src, now, sample.rss_bytes, sample.alive))
            engines = []
            for pid, engine in pids.items():
                sample = sample_process(pid)
                if sample.alive:
                    engines.append(EngineProcess(engine, pid, sample.rss_bytes, sample.cpu_percent,
                                                 sample.create_time))
            hw = Hardware(host_memory(), nvml.sample(), note, pids, wired_limit, tuple(engines))
            app.post_message(HardwareSampled(hw, processes))
            stop.wait(SAMPLE_S)
    finally:
        nvml.close()
