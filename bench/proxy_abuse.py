#!/usr/bin/env python3
"""Abuse a real `ietop proxy` and report what it held: descriptors, memory, requests served, errors.

    .venv/bin/python bench/proxy_abuse.py                 # 20,000 idle connections, 500 streams, a 100 MB body
    .venv/bin/python bench/proxy_abuse.py --scale small   # what tests/robustness/test_proxy_abuse.py runs

One run, on 127.0.0.1: a fake engine (asyncio and h11, in a thread of this process), the proxy in its own
process (``run_proxy``, as the CLI runs it, with short limits so that the defences act within the run), and
this process as the clients. Each scenario is followed by a normal request that must be served correctly:

1. slowloris: connections sending their request head a byte at a time, past the head timeout;
2. slow bodies: uploads that stall (cut after the idle time) and uploads that are slow but steady (served);
3. idle connections: ``--idle`` of them held open at once (by helper processes: each has its own descriptor
   limit), while a normal request must still get through;
4. a huge body: ``--body-mb`` MB on an inference path, streamed, checked by its hash upstream;
5. clients leaving mid-stream: the upstream must see each stream cancelled;
6. the upstream resetting mid-stream: each client sees its body cut, the proxy goes on;
7. concurrent streams: ``--streams`` at once, each complete.

A sampler thread reads the proxy's descriptor count (/proc/PID/fd) and RSS (/proc/PID/status) every 50 ms.
The JSON report (stdout, and bench/out/proxy_abuse.json) has the peaks against the baseline taken after a
warm-up, the proxy's own count of measured requests and errors (from its JSONL file), and per scenario what
happened. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import hashlib
import json
import os
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import h11
import httpx

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
MB = 1 << 20


@dataclasses.dataclass(frozen=True)
class Scale:
    head_timeout_s: float = 1.0
    body_idle_s: float = 1.0
    max_waiting: int = 64
    slowloris: int = 30
    slow_bodies: int = 10
    idle: int = 300
    body_mb: int = 64
    leaving: int = 20
    resets: int = 10
    streams: int = 50
    per_holder: int = 0
    """Idle connections per helper process; 0: held by this process."""


SMALL = Scale()
LARGE = Scale(head_timeout_s=2.0, body_idle_s=2.0, max_waiting=1024, slowloris=500, slow_bodies=100, idle=20_000,
              body_mb=100, leaving=200, resets=100, streams=500, per_holder=5000)


# -- the fake engine ---------------------------------------------------------------------------------------


class Engine:
    """An OpenAI-style engine on loopback, chosen per request by ``x-mode``: ``echo`` (default: the body's
    length and sha256), ``stream`` (``x-chunks`` SSE chunks ``x-gap-ms`` apart, then usage and [DONE]),
    ``reset`` (three chunks, then a TCP reset). Idle kept connections are closed after ``idle_s``."""

    def __init__(self, idle_s: float = 1.0) -> None:
        self.idle_s = idle_s
        self.cancelled = 0
        """Streams whose reader went away before their end."""
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-engine", daemon=True)

    def __enter__(self) -> Engine:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._connection, "127.0.0.1", 0, backlog=4096))
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        self._ready.set()
        self._loop.run_forever()
        server.close()
        tasks = asyncio.all_tasks(self._loop)
        for task in tasks:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        request: h11.Request | None = None
        digest, size = hashlib.sha256(), 0
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    wait = self.idle_s if conn.their_state is h11.IDLE else 60.0
                    conn.receive_data(await asyncio.wait_for(reader.read(1 << 16), wait))
                elif isinstance(event, h11.Request):
                    request, digest, size = event, hashlib.sha256(), 0
                elif isinstance(event, h11.Data):
                    digest.update(event.data)
                    size += len(event.data)
                elif isinstance(event, h11.EndOfMessage) and request is not None:
                    if not await self._answer(conn, writer, request, size, digest.hexdigest()):
                        return
                    if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                        return
                    conn.start_next_cycle()
                else:
                    return
        except (OSError, h11.ProtocolError, asyncio.TimeoutError):
            return
        finally:
            writer.close()

    async def _answer(self, conn: h11.Connection, writer: asyncio.StreamWriter, request: h11.Request, size: int,
                      sha: str) -> bool:
        headers = {k.decode(): v.decode() for k, v in request.headers}
        mode = headers.get("x-mode", "echo")
        if mode == "echo":
            body = json.dumps({"model": "fake", "length": size, "sha256": sha,
                               "choices": [{"message": {"content": "ok"}}],
                               "usage": {"prompt_tokens": size // 4 + 1, "completion_tokens": 1}}).encode()
            writer.write(conn.send(h11.Response(status_code=200, headers=[
                ("content-type", "application/json"), ("content-length", str(len(body)))])) or b"")
            writer.write(conn.send(h11.Data(data=body)) or b"")
            writer.write(conn.send(h11.EndOfMessage()) or b"")
            await writer.drain()
            return True
        writer.write(conn.send(h11.Response(status_code=200, headers=[("content-type", "text/event-stream")])) or b"")
        chunks = int(headers.get("x-chunks", "20")) if mode == "stream" else 3
        gap = float(headers.get("x-gap-ms", "10")) / 1000
        try:
            for i in range(chunks):
                chunk = b'data: {"model": "fake", "choices": [{"delta": {"content": "t%d"}}]}\n\n' % i
                writer.write(conn.send(h11.Data(data=chunk)) or b"")
                await writer.drain()
                await asyncio.sleep(gap)
            if mode == "reset":
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
                return False
            usage = b'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": %d}}\n\n' % chunks
            writer.write(conn.send(h11.Data(data=usage + b"data: [DONE]\n\n")) or b"")
            writer.write(conn.send(h11.EndOfMessage()) or b"")
            await writer.drain()
        except (OSError, RuntimeError, h11.LocalProtocolError):
            self.cancelled += 1
            return False
        return True


# -- the proxy, and what it holds --------------------------------------------------------------------------

_PROXY = """
import resource
if {nofile}:
    resource.setrlimit(resource.RLIMIT_NOFILE, ({nofile}, {nofile}))
from ietop.sources.proxy import run_proxy
run_proxy({listen!r}, {upstream!r}, {jsonl!r}, head_timeout_s={head}, body_idle_s={body}, max_waiting={cap},
          timeout=30.0)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Proxy:
    """``run_proxy`` in its own process, writing its measurements to a JSONL file."""

    def __init__(self, upstream: str, scale: Scale, jsonl: Path, nofile: int = 0) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.jsonl = jsonl
        code = _PROXY.format(nofile=nofile, listen=f"127.0.0.1:{port}", upstream=upstream, jsonl=str(jsonl),
                             head=scale.head_timeout_s, body=scale.body_idle_s, cap=scale.max_waiting)
        self.proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stderr=subprocess.PIPE, text=True)
        self.pid = self.proc.pid
        deadline = time.monotonic() + 30
        while not _answers(self.url):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"proxy did not start: {self.stop()}")
            time.sleep(0.05)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def memory(self) -> dict[str, int]:
        """VmRSS and VmHWM (its peak), in bytes."""
        fields = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) * 1024
        return fields

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.jsonl.read_text().splitlines() if line]

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.terminate()
        _, stderr = self.proc.communicate(timeout=30)
        return stderr


def _answers(url: str) -> bool:
    try:
        httpx.get(url + "/health", timeout=2)
        return True
    except httpx.TransportError:
        return False


class Sampler:
    """Samples the proxy's descriptors and RSS every ``every_s`` in a thread; keeps the peaks."""

    def __init__(self, proxy: Proxy, every_s: float = 0.05) -> None:
        self.proxy = proxy
        self.every_s = every_s
        self.peak_fds = 0
        self.peak_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self.peak_fds = max(self.peak_fds, self.proxy.fds())
                self.peak_rss = max(self.peak_rss, self.proxy.memory().get("VmRSS", 0))
            self._stop.wait(self.every_s)


# -- clients -----------------------------------------------------------------------------------------------

CHAT = "/v1/chat/completions"


async def normal_request(url: str) -> bool:
    """A measured request on a new connection, answered correctly."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hello"}]}).encode()
    try:
        async with httpx.AsyncClient(timeout=20) as client:
            r = await client.post(url + CHAT, content=body)
    except httpx.HTTPError:
        return False
    return r.status_code == 200 and r.json().get("sha256") == hashlib.sha256(body).hexdigest()


async def _open(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = url.removeprefix("http://").split(":")
    return await asyncio.open_connection(host, int(port))


async def _closed_by_server(reader: asyncio.StreamReader, within_s: float) -> bool:
    try:
        while await asyncio.wait_for(reader.read(65536), within_s):
            pass
    except asyncio.TimeoutError:
        return False
    except OSError:
        pass
    return True


async def slowloris(url: str, n: int, head_timeout_s: float) -> dict[str, Any]:
    """``n`` connections sending a head that never ends, a byte every 50 ms: all closed by the proxy."""

    async def one() -> bool:
        reader, writer = await _open(url)
        endless = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 100_000
        closed = asyncio.ensure_future(_closed_by_server(reader, head_timeout_s * 4 + 5))
        try:
            for byte in endless:
                if closed.done():
                    break
                writer.write(bytes([byte]))
                await asyncio.sleep(0.05)
            return await closed
        except OSError:
            return True
        finally:
            writer.close()

    t0 = time.monotonic()
    results = await asyncio.gather(*(one() for _ in range(n)), normal_request(url))
    return {"connections": n, "closed_by_proxy": sum(results[:-1]), "served_meanwhile": results[-1],
            "seconds": round(time.monotonic() - t0, 2)}


async def slow_bodies(url: str, n: int, body_idle_s: float) -> dict[str, Any]:
    """``n`` uploads that stall after a few bytes (cut by the proxy) and ``n`` that trickle steadily for
    longer than the idle time in all (served, whole)."""

    async def stalled() -> bool:
        reader, writer = await _open(url)
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"
                     b'{"model": "m", "messages": [')
        try:
            return await _closed_by_server(reader, body_idle_s * 4 + 5)
        finally:
            writer.close()

    async def steady() -> bool:
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "y" * 200}]}).encode()
        parts = [body[i:i + 20] for i in range(0, len(body), 20)]
        step = body_idle_s * 1.5 / len(parts)  # longer than the idle time in all, never idle that long

        async def trickle() -> AsyncIterator[bytes]:
            for part in parts:
                yield part
                await asyncio.sleep(step)

        try:
            async with httpx.AsyncClient(timeout=30) as client:
                r = await client.post(url + CHAT, content=trickle(), headers={"content-length": str(len(body))})
        except httpx.HTTPError:
            return False
        return r.status_code == 200 and r.json().get("sha256") == hashlib.sha256(body).hexdigest()

    t0 = time.monotonic()
    cut = await asyncio.gather(*(stalled() for _ in range(n)))
    served = await asyncio.gather(*(steady() for _ in range(n)))
    return {"stalled": n, "cut_by_proxy": sum(cut), "steady": n, "steady_served": sum(served),
            "seconds": round(time.monotonic() - t0, 2)}


_HOLDER = """
import resource, socket, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
held = []
for _ in range({n}):
    try:
        held.append(socket.create_connection(("127.0.0.1", {port}), timeout=30))
    except OSError as exc:
        print("error", exc, file=sys.stderr)
print(len(held), flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def held_open(url: str, n: int, per_holder: int) -> Iterator[int]:
    """``n`` connections that send nothing, held open (by helper processes of ``per_holder`` each, or by
    this one when 0); yields how many were opened."""
    port = int(url.rsplit(":", 1)[1])
    if per_holder <= 0:
        socks: list[socket.socket] = []
        try:
            socks.extend(socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(n))
            yield len(socks)
        finally:
            for s in socks:
                s.close()
        return
    holders = []
    try:
        for start in range(0, n, per_holder):
            code = _HOLDER.format(n=min(per_holder, n - start), port=port)
            holders.append(subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, text=True))
        yield sum(int((h.stdout.readline() if h.stdout else "") or 0) for h in holders)
    finally:
        for h in holders:
            with contextlib.suppress(OSError):
                h.communicate(input="", timeout=60)


async def idle_connections(proxy: Proxy, n: int, per_holder: int) -> dict[str, Any]:
    """``n`` idle connections at once; meanwhile the proxy's descriptors, and a normal request."""
    before = proxy.fds()
    t0 = time.monotonic()
    with held_open(proxy.url, n, per_holder) as opened:
        await asyncio.sleep(0.5)
        held = proxy.fds()
        served = await normal_request(proxy.url)
    return {"connections": n, "opened": opened, "proxy_fds_before": before, "proxy_fds_while_held": held,
            "served_meanwhile": served, "seconds": round(time.monotonic() - t0, 2)}


async def huge_body(proxy: Proxy, mb: int) -> dict[str, Any]:
    """One ``mb`` MB prompt on an inference path, sent in 1 MB parts (the same object each time)."""
    head, block = b'{"messages": [{"role": "user", "content": "', b"z" * MB
    tail = b'"}], "model": "huge", "stream": false}'
    digest = hashlib.sha256(head)
    for _ in range(mb):
        digest.update(block)
    digest.update(tail)

    async def parts() -> AsyncIterator[bytes]:
        yield head
        for _ in range(mb):
            yield block
        yield tail

    length = len(head) + mb * MB + len(tail)
    before = proxy.memory()
    t0 = time.monotonic()
    try:
        async with httpx.AsyncClient(timeout=120) as client:
            r = await client.post(proxy.url + CHAT, content=parts(), headers={"content-length": str(length)})
        ok = r.status_code == 200 and r.json().get("sha256") == digest.hexdigest()
    except httpx.HTTPError:
        ok = False
    after = proxy.memory()
    return {"mb": mb, "served": ok, "seconds": round(time.monotonic() - t0, 2),
            "rss_before_mb": round(before["VmRSS"] / MB, 1),
            "peak_rss_growth_mb": round((after["VmHWM"] - before["VmRSS"]) / MB, 1)}


async def _stream(client: httpx.AsyncClient, url: str, mode: str, chunks: int, leave_after: int = 0) -> str:
    """One SSE stream: "complete", "left" (after ``leave_after`` events), "cut" (the body ended short)."""
    body = json.dumps({"model": "m", "stream": True, "messages": []}).encode()
    headers = {"x-mode": mode, "x-chunks": str(chunks)}
    events = 0
    try:
        async with client.stream("POST", url + CHAT, content=body, headers=headers) as r:
            async for chunk in r.aiter_raw():
                events += chunk.count(b"\n\n")
                if leave_after and events >= leave_after:
                    return "left"
    except httpx.HTTPError:
        return "cut"
    return "complete" if events == chunks + 2 else "cut"


async def leaving_clients(url: str, engine: Engine, n: int) -> dict[str, Any]:
    """``n`` streams whose clients go away after two events; the upstream must see each cancelled."""
    before = engine.cancelled
    t0 = time.monotonic()

    async def one() -> str:
        async with httpx.AsyncClient(timeout=30) as client:
            return await _stream(client, url, "stream", 200, leave_after=2)

    results = await asyncio.gather(*(one() for _ in range(n)))
    deadline = time.monotonic() + 10
    while engine.cancelled - before < n and time.monotonic() < deadline:  # noqa: ASYNC110 (counted in its thread)
        await asyncio.sleep(0.05)
    return {"streams": n, "left": results.count("left"), "cancelled_upstream": engine.cancelled - before,
            "seconds": round(time.monotonic() - t0, 2)}


async def upstream_resets(url: str, n: int) -> dict[str, Any]:
    """``n`` streams the upstream resets after three events: each client must see its body cut."""
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=None)) as client:
        results = await asyncio.gather(*(_stream(client, url, "reset", 3) for _ in range(n)))
    return {"streams": n, "cut": results.count("cut"), "complete": results.count("complete")}


async def concurrent_streams(url: str, n: int) -> dict[str, Any]:
    """``n`` streams at once, 20 events each, 10 ms apart: all complete."""
    t0 = time.monotonic()
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=n)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        results = await asyncio.gather(*(_stream(client, url, "stream", 20) for _ in range(n)))
    return {"streams": n, "complete": results.count("complete"), "seconds": round(time.monotonic() - t0, 2)}


# -- the run -----------------------------------------------------------------------------------------------


async def settle(proxy: Proxy, fds: int, within_s: float = 10.0) -> int:
    """The proxy's descriptors once they are back to ``fds`` or fewer (kept upstream connections close
    when the engine's idle time ends), or after ``within_s``."""
    deadline = time.monotonic() + within_s
    now = proxy.fds()
    while now > fds and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        now = proxy.fds()
    return now


def _failures(name: str, result: dict[str, Any]) -> int:
    """Requests that should have been served and were not, and a proxy that died (what the defences close
    is counted in the scenarios' own figures, not here)."""
    failed = (not result["normal_after"]) + (not result["proxy_alive"])
    failed += (result.get("served_meanwhile") is False) + (result.get("served") is False)
    if name == "slow_bodies":
        failed += result["steady"] - result["steady_served"]
    if name == "concurrent_streams":
        failed += result["streams"] - result["complete"]
    return int(failed)


async def run(scale: Scale) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, Engine() as engine:
        proxy = Proxy(engine.url, scale, Path(tmp) / "proxy.jsonl")
        try:
            for _ in range(3):
                await normal_request(proxy.url)
            await asyncio.sleep(1.5)  # the warm-up's kept connections closed: the baseline is the idle proxy
            base_fds, base_mem = proxy.fds(), proxy.memory()
            report: dict[str, Any] = {"scale": dataclasses.asdict(scale), "baseline_fds": base_fds,
                                      "baseline_rss_mb": round(base_mem["VmRSS"] / MB, 1), "scenarios": {}}
            served, errors = 0, 0
            with Sampler(proxy) as sampler:
                scenarios: list[tuple[str, Callable[[], Awaitable[dict[str, Any]]]]] = [
                    ("slowloris", lambda: slowloris(proxy.url, scale.slowloris, scale.head_timeout_s)),
                    ("slow_bodies", lambda: slow_bodies(proxy.url, scale.slow_bodies, scale.body_idle_s)),
                    ("idle_connections", lambda: idle_connections(proxy, scale.idle, scale.per_holder)),
                    ("huge_body", lambda: huge_body(proxy, scale.body_mb)),
                    ("leaving_clients", lambda: leaving_clients(proxy.url, engine, scale.leaving)),
                    ("upstream_resets", lambda: upstream_resets(proxy.url, scale.resets)),
                    ("concurrent_streams", lambda: concurrent_streams(proxy.url, scale.streams)),
                ]
                for name, scenario in scenarios:
                    result = await scenario()
                    result["proxy_alive"] = proxy.alive()
                    result["normal_after"] = await normal_request(proxy.url)
                    result["proxy_fds_after"] = await settle(proxy, base_fds)
                    report["scenarios"][name] = result
                    errors += _failures(name, result)
            records = proxy.records()
            served = sum(1 for r in records if r.get("status") == 200 and r.get("error") is None)
            kinds: dict[str, int] = {}
            for r in records:
                if r.get("error"):
                    kinds[r["error"]] = kinds.get(r["error"], 0) + 1
            end_mem = proxy.memory()
            report |= {
                "peak_fds": sampler.peak_fds, "peak_fds_over_baseline": sampler.peak_fds - base_fds,
                "peak_rss_mb": round(end_mem["VmHWM"] / MB, 1),
                "peak_rss_over_baseline_mb": round((end_mem["VmHWM"] - base_mem["VmRSS"]) / MB, 1),
                "end_fds": proxy.fds(), "end_rss_mb": round(end_mem["VmRSS"] / MB, 1),
                "requests_measured": len(records), "requests_served": served, "recorded_errors": kinds,
                "errors": errors, "proxy_alive": proxy.alive(),
            }
            return report
        finally:
            stderr = proxy.stop()
            if "Traceback" in stderr:
                print(stderr, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--scale", choices=["small", "large"], default="large")
    parser.add_argument("--idle", type=int, help="idle connections held at once")
    parser.add_argument("--streams", type=int, help="concurrent streams")
    parser.add_argument("--body-mb", type=int, help="size of the huge body")
    args = parser.parse_args(argv)
    scale = LARGE if args.scale == "large" else SMALL
    overrides = {k: v for k, v in (("idle", args.idle), ("streams", args.streams), ("body_mb", args.body_mb)) if v}
    scale = dataclasses.replace(scale, **overrides)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # this process holds the streams' connections
    report = asyncio.run(run(scale))
    OUT.mkdir(exist_ok=True)
    (OUT / "proxy_abuse.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 1 if report["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
