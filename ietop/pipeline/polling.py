"""Polling and sampling, headless: engine endpoints (async, on the caller's loop) and host, GPU and engine
processes (a thread). Poll answers are applied to the store on the caller's loop (its single writer); hardware
samples go to a callback, which the dashboard turns into a message for its main thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from urllib.parse import urlsplit

from ietop.model.store import Store
from ietop.pipeline.hardware import EngineProcess, Hardware
from parsers.ollama.gofmt import epoch

ProcessSamples = list[tuple[int, float, int | None, bool]]
"""(source, t, rss, alive) samples of engine processes behind log sources."""

PATHS = {
    "ollama": (("version", "/api/version"), ("ps", "/api/ps")),
    "vllm": (("models", "/v1/models"), ("metrics", "/metrics")),
    # Not MLX's /v1/models: mlx_lm (0.32, server.py handle_models_request) answers it by scanning the Hugging
    # Face cache, and where there is none it logs a CacheNotFound traceback each time, an error ietop's own
    # poll would put in the log every few seconds. What it lists is the cache, not the loaded model, anyway.
    "mlx": (("health", "/health"),),
}
"""What is polled per engine: never an endpoint that loads a model (see reference/ollama-api.md), and never one
whose answer makes the engine log an error."""
SAMPLE_S = 2.0
BACKOFF_MAX_S = 10.0
"""Longest wait between two tries of an engine address where nothing listens (``Poller``'s backoff): an engine
started after ietop shows within this many seconds (plus one poll timeout at worst), and three engines that are
not running cost a try each per 10 s instead of five refused GETs every 2 s (bench/polling_idle.py)."""


def poll_urls(endpoints: list[tuple[str, str]]) -> dict[str, tuple[str, str, str]]:
    """URL → (engine, kind, base URL)."""
    urls: dict[str, tuple[str, str, str]] = {}
    for engine, base in endpoints:
        base = base.rstrip("/")
        for kind, path in PATHS.get(engine, ()):
            urls[base + path] = (engine, kind, base)
    return urls


async def poll_forever(store_of: Callable[[], Store], endpoints: list[tuple[str, str]], interval: float) -> None:
    """Poll every endpoint each `interval` seconds until cancelled; `store_of()` is the store to apply to.
    An address that refused three rounds in a row is tried less and less often, up to every BACKOFF_MAX_S (or
    `interval`, if longer): its state stays "down" meanwhile, and an answer puts it back on `interval` at once."""
    import asyncio

    import httpx

    from ietop.sources.http import Poller, PollResult

    urls = poll_urls(endpoints)
    never = asyncio.Event()  # the caller cancels this task when it exits

    def on_result(result: PollResult) -> None:
        engine, kind, base = urls[result.url]
        # On the caller's loop, i.e. its main thread: the store's single writer.
        apply_poll(store_of(), engine, kind, base, result.status, result.body, result.error,
                   datetime.now(timezone.utc))

    # trust_env=False: an HTTP(S)_PROXY in the environment must not capture polls of local engines.
    async with httpx.AsyncClient(trust_env=False) as client:
        poller = Poller(client, list(urls), interval=interval, timeout=min(2.0, max(interval, 0.5)),
                        backoff_max=max(BACKOFF_MAX_S, interval))
        await poller.run(on_result, never)


def _port(base: str) -> int | None:
    try:
        return urlsplit(base).port or (443 if base.startswith("https") else 80)
    except ValueError:
        return None


def _local(base: str) -> bool:
    host = urlsplit(base).hostname or ""
    return host in ("127.0.0.1", "localhost", "::1", "0.0.0.0")


def sample_forever(store_of: Callable[[], Store], endpoints: list[tuple[str, str]], stop: threading.Event,
                   post: Callable[[Hardware, ProcessSamples], None]) -> None:
    """Host memory, GPUs and engine processes every SAMPLE_S seconds, handed to `post` (from this thread)."""
    from ietop.sources.gpu import Nvml
    from ietop.sources.host import find_processes, gpu_wired_limit_bytes, host_memory, sample_process

    nvml = Nvml()
    note = nvml.start()
    wired_limit = gpu_wired_limit_bytes()
    ports = {port: engine for engine, base in endpoints if (port := _port(base)) is not None and _local(base)}
    try:
        while not stop.is_set():
            pids: dict[int, str] = {}
            answering = {_port(st.endpoint) for st in list(store_of().engines.values()) if st.state in ("up", "dead")}
            for port, engine in ports.items():
                if port not in answering:
                    continue  # nothing listens: skip the system-wide connection scan (idle CPU)
                for pid in find_processes(port=port):
                    pids[pid] = engine
            processes: ProcessSamples = []
            now = time.time()
            for src, info in enumerate(store_of().sources):
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
            post(hw, processes)
            stop.wait(SAMPLE_S)
    finally:
        nvml.close()


def apply_poll(store: Store, engine: str, kind: str, url: str, status: int | None, body: bytes,
               error: str | None, now: datetime) -> None:
    """Turn one poll answer into engine state. `now` is the caller's clock (the model never reads one).
    Only a failed connection is an error here; an HTTP status, even 503, is an answer."""
    from parsers.api.engine_api import metrics_status, mlx_health, ollama_ps, ollama_version, openai_models

    net_error = error if status is None else None
    t = epoch(now)
    if engine == "mlx" and kind == "health":
        store.apply_poll(t, mlx_health(url, now, status, body, net_error))
    elif engine == "ollama" and kind == "ps":
        state, residency = ollama_ps(url, now, status, body, net_error)
        store.apply_poll(t, state)
        if residency is not None:
            store.apply_poll(t, residency)
    elif engine == "ollama" and kind == "version":
        store.apply_poll(t, ollama_version(url, now, status, body, net_error))
    elif kind == "models":
        store.apply_poll(t, openai_models(engine, url, now, status, body, net_error))
    elif kind == "metrics":
        from parsers.vllm.prometheus import parse_scrape_counted

        samples, bad = 0, 0
        if status == 200:
            scrape, bad = parse_scrape_counted(body.decode("utf-8", errors="replace"), url, now)
            samples = len(scrape.samples)
            if samples:
                store.apply_poll(t, scrape)
        store.apply_poll(t, metrics_status(engine, url, now, status, samples, bad, net_error))


def sample_engine_process(store: Store, src: int, now: datetime, *, port: int | None = None,
                          cmdline_contains: str | None = None) -> int | None:
    """Find the engine process behind a log source (by listening port, else command line) and feed its
    RSS to the store; returns the pid, or None when no such process runs (which is itself a state)."""
    from ietop.sources.host import find_processes, sample_process

    pids = find_processes(port=port) if port is not None else []
    if not pids and cmdline_contains:
        pids = find_processes(cmdline_contains=cmdline_contains)
    if not pids:
        return None
    sample = sample_process(pids[0])
    store.process_sample(src, epoch(now), sample.rss_bytes, sample.alive)
    return pids[0]
