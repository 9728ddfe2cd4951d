#!/usr/bin/env python3
"""Benchmark what `ietop proxy` adds to a request: latency (p50/p99, first byte and whole stream) and memory.

Acceptance this serves (DESIGN.md, performance budgets): the proxy adds **< 1 ms at p50** per request over a
direct connection, never buffers a stream, and its memory stays flat however many requests pass through.

    .venv/bin/python bench/proxy_overhead.py                  # 2000 requests each way, 10,000 for RSS
    .venv/bin/python bench/proxy_overhead.py -n 500 --rss-requests 2000 --check

One run, three processes, all on 127.0.0.1:

1. an upstream (this file with ``--serve-upstream``): a tiny ASGI app under uvicorn answering every POST with
   the same small OpenAI-style SSE stream (8 content chunks + usage + ``[DONE]``, each its own write, ~2 KB);
2. the proxy: ``python -m ietop proxy --listen … --upstream … --jsonl … --quiet`` in front of it, writing its
   measurements to a JSONL file as in real use;
3. this process, the client: httpx with keep-alive, sending N requests **directly** and N **through the
   proxy**, interleaved (direct/proxy, then proxy/direct) so drift hits both alike, after a warm-up.

Added latency = percentile through the proxy minus the same percentile direct (time to first body byte,
and to the end of the stream), plus the median of the per-pair differences. Then 10,000 more streamed
requests go through the proxy (16 at a time) while the proxy's RSS is sampled (psutil): before, every
10%, after. The JSONL file must hold one record per proxied request with the upstream's usage, or the
run fails. Results: a table on stdout and ``bench/out/proxy_overhead.json``. ``--check`` exits 1 when the
p50 target is missed or RSS grew by more than ``--rss-flat-mb``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
OUT = BENCH_DIR / "out"
TARGET_P50_MS = 1.0
PROMPT_TOKENS = 42

_CHUNK = ('data: {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "model": "bench", '
          '"choices": [{"index": 0, "finish_reason": null, "delta": {"role": "assistant", "content": "tok%d"}}]}\n\n')
STREAM = [(_CHUNK % i).encode() for i in range(8)] + [
    b'data: {"id": "chatcmpl-bench", "object": "chat.completion", "model": "bench", "choices": [], '
    b'"usage": {"prompt_tokens": %d, "completion_tokens": 8, "total_tokens": %d}}\n\n'
    % (PROMPT_TOKENS, PROMPT_TOKENS + 8),
    b"data: [DONE]\n\n",
]
BODY = json.dumps({"model": "bench", "stream": True, "messages": [{"role": "user", "content": "hi"}]}).encode()


# -- the two servers (run in child processes) ------------------------------------------------------------


async def upstream_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    while (await receive()).get("more_body"):
        pass
    if scope["method"] != "POST":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    for chunk in STREAM:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


def serve_upstream(port: int) -> None:
    import uvicorn

    uvicorn.run(upstream_app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="on",
                server_header=False, date_header=False, ws="none")


# -- the client ---------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{url}: server exited with {proc.returncode}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"{url}: not ready after {timeout:.0f} s")


def one(client: Any, url: str) -> tuple[float, float]:
    """(time to first body byte, time to end of stream) for one streamed request, in seconds."""
    t0 = time.perf_counter()
    ttfb = None
    size = 0
    with client.stream("POST", url, content=BODY, headers={"content-type": "application/json"}) as r:
        for chunk in r.iter_raw():
            if ttfb is None:
                ttfb = time.perf_counter() - t0
            size += len(chunk)
    total = time.perf_counter() - t0
    if r.status_code != 200 or size != sum(map(len, STREAM)) or ttfb is None:
        raise SystemExit(f"bad answer from {url}: status {r.status_code}, {size} bytes")
    return ttfb, total


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float]:
    return {f"p{q}_ms": round(pct(values, q) * 1000, 4) for q in (50, 90, 99)} | {
        "mean_ms": round(statistics.fmean(values) * 1000, 4)}


def latency_phase(direct: str, proxied: str, n: int, warmup: int) -> dict[str, Any]:
    import httpx

    runs: dict[str, dict[str, list[float]]] = {k: {"ttfb": [], "total": []} for k in ("direct", "proxy")}
    with httpx.Client(timeout=30) as c_direct, httpx.Client(timeout=30) as c_proxy:
        targets = {"direct": (c_direct, direct + "/v1/chat/completions"),
                   "proxy": (c_proxy, proxied + "/v1/chat/completions")}
        for _ in range(warmup):
            for client, url in targets.values():
                one(client, url)
        for i in range(n):
            order = ("direct", "proxy") if i % 2 == 0 else ("proxy", "direct")
            for name in order:
                ttfb, total = one(*targets[name])
                runs[name]["ttfb"].append(ttfb)
                runs[name]["total"].append(total)
    result: dict[str, Any] = {name: {m: summary(v) for m, v in r.items()} for name, r in runs.items()}
    added: dict[str, float] = {}
    for metric in ("ttfb", "total"):
        for q in (50, 99):
            diff = pct(runs["proxy"][metric], q) - pct(runs["direct"][metric], q)
            added[f"{metric}_p{q}_ms"] = round(diff * 1000, 4)
        pairs = [p - d for p, d in zip(runs["proxy"][metric], runs["direct"][metric], strict=True)]
        added[f"{metric}_paired_median_ms"] = round(statistics.median(pairs) * 1000, 4)
    result["added"] = added
    return result


async def stream_many(url: str, count: int, concurrency: int, on_progress: Any) -> None:
    import httpx

    done = 0
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal done
        while not queue.empty():
            queue.get_nowait()
            async with client.stream("POST", url, content=BODY) as r:
                async for _ in r.aiter_raw():
                    pass
            if r.status_code != 200:
                raise SystemExit(f"status {r.status_code} during the RSS phase")
            done += 1
            on_progress(done)

    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=concurrency)) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))


def rss_phase(proxied: str, pid: int, count: int, concurrency: int) -> dict[str, Any]:
    import psutil

    proc = psutil.Process(pid)
    samples: list[tuple[int, float]] = [(0, proc.memory_info().rss / 2**20)]
    step = max(1, count // 10)

    def progress(done: int) -> None:
        if done % step == 0:
            samples.append((done, proc.memory_info().rss / 2**20))

    t0 = time.perf_counter()
    asyncio.run(stream_many(proxied + "/v1/chat/completions", count, concurrency, progress))
    wall = time.perf_counter() - t0
    time.sleep(0.2)
    after = proc.memory_info().rss / 2**20
    return {"requests": count, "concurrency": concurrency, "wall_s": round(wall, 2),
            "requests_per_s": round(count / wall, 1), "rss_before_mb": round(samples[0][1], 2),
            "rss_after_mb": round(after, 2), "rss_growth_mb": round(after - samples[0][1], 2),
            "rss_max_mb": round(max([after] + [s for _, s in samples]), 2),
            "samples": [{"after_requests": n, "rss_mb": round(mb, 2)} for n, mb in samples]}


def check_records(jsonl: Path, expected: int) -> dict[str, Any]:
    lines = jsonl.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    bad = [r for r in records if r["prompt_tokens"] != PROMPT_TOKENS or r["content_chunks"] != 8 or r["error"]]
    if len(records) != expected or bad:
        raise SystemExit(f"proxy recorded {len(records)} requests (expected {expected}), {len(bad)} wrong")
    ttft = sorted(r["ttft_s"] for r in records)
    return {"records": len(records), "proxy_ttft_p50_ms": round(ttft[len(ttft) // 2] * 1000, 4)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--requests", type=int, default=2000, help="timed requests each way (default 2000)")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--rss-requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=16, help="parallel streams in the RSS phase")
    parser.add_argument("--rss-flat-mb", type=float, default=5.0, help="RSS growth still called flat")
    parser.add_argument("--out", type=Path, default=OUT / "proxy_overhead.json")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--serve-upstream", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_upstream:
        serve_upstream(args.serve_upstream)
        return 0

    up_port, proxy_port = free_port(), free_port()
    direct, proxied = f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{proxy_port}"
    me = [sys.executable, str(Path(__file__).resolve())]
    with tempfile.TemporaryDirectory() as tmp:
        jsonl = Path(tmp) / "proxy.jsonl"
        upstream = subprocess.Popen([*me, "--serve-upstream", str(up_port)])
        # Started as users start it, so the CLI's process settings (ietop.runtime) apply; --quiet: no
        # line per request on stderr, whose cost depends on where stderr goes.
        proxy = subprocess.Popen([sys.executable, "-m", "ietop", "proxy", "--listen", f"127.0.0.1:{proxy_port}",
                                  "--upstream", direct, "--jsonl", str(jsonl), "--quiet"], cwd=REPO)
        try:
            wait_ready(direct, upstream)
            wait_ready(proxied, proxy)
            print(f"upstream {direct} (pid {upstream.pid}), proxy {proxied} (pid {proxy.pid}); "
                  f"{args.requests} timed requests each way after {args.warmup} warm-up", flush=True)
            latency = latency_phase(direct, proxied, args.requests, args.warmup)
            print(f"streaming {args.rss_requests} requests through the proxy, {args.concurrency} at a time", flush=True)
            rss = rss_phase(proxied, proxy.pid, args.rss_requests, args.concurrency)
            time.sleep(0.2)
            records = check_records(jsonl, args.warmup + args.requests + args.rss_requests)
        finally:
            for p in (proxy, upstream):
                p.send_signal(signal.SIGTERM)
            for p in (proxy, upstream):
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()

    added = latency["added"]
    ok_latency = added["ttfb_p50_ms"] < TARGET_P50_MS and added["total_p50_ms"] < TARGET_P50_MS
    ok_rss = rss["rss_growth_mb"] <= args.rss_flat_mb
    result = {
        "schema": "ietop.bench.proxy_overhead/1",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()},
        "stream_bytes": sum(map(len, STREAM)), "stream_writes": len(STREAM),
        "requests_each_way": args.requests, "warmup": args.warmup,
        "latency": latency, "rss": rss, "proxy_records": records,
        "targets": {"added_p50_ms": TARGET_P50_MS, "rss_flat_mb": args.rss_flat_mb},
        "ok": {"latency_p50": ok_latency, "rss_flat": ok_rss},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")

    print()
    print(f"{'':26}{'direct p50':>11}{'proxy p50':>11}{'added p50':>11}{'direct p99':>12}{'proxy p99':>11}"
          f"{'added p99':>11}{'paired med':>12}")
    for metric, label in (("ttfb", "first byte (ms)"), ("total", "whole stream (ms)")):
        d, p = latency["direct"][metric], latency["proxy"][metric]
        print(f"{label:26}{d['p50_ms']:11.3f}{p['p50_ms']:11.3f}{added[f'{metric}_p50_ms']:11.3f}"
              f"{d['p99_ms']:12.3f}{p['p99_ms']:11.3f}{added[f'{metric}_p99_ms']:11.3f}"
              f"{added[f'{metric}_paired_median_ms']:12.3f}")
    print()
    print(f"proxy RSS: {rss['rss_before_mb']:.1f} MB before, {rss['rss_after_mb']:.1f} MB after "
          f"{rss['requests']} streamed requests (growth {rss['rss_growth_mb']:+.1f} MB, "
          f"max {rss['rss_max_mb']:.1f} MB; "
          f"{rss['requests_per_s']:.0f} req/s at concurrency {rss['concurrency']})")
    print("  samples: " + ", ".join(f"{s['after_requests']}:{s['rss_mb']:.1f}" for s in rss["samples"]))
    print(f"records: {records['records']} JSONL lines, all with the upstream's usage")
    print(f"target: added p50 < {TARGET_P50_MS} ms: {'met' if ok_latency else 'MISSED'}; "
          f"RSS flat (<= {args.rss_flat_mb} MB growth): {'yes' if ok_rss else 'NO'}")
    print(f"wrote {args.out}")
    return 1 if args.check and not (ok_latency and ok_rss) else 0


if __name__ == "__main__":
    sys.exit(main())
