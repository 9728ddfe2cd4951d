"""`ietop proxy` end to end on loopback: a client, the proxy, and an upstream that replays recorded streams.

The upstream is a small ASGI app under uvicorn (in a thread, like the proxy) that replays
fixtures/streams/ at their recorded times — real MLX SSE chunks, vLLM-shaped SSE with real usage blocks,
Ollama NDJSON per the API doc — and can also echo, stall, drip, compress or send large bodies. The client
is httpx measuring its own TTFT and ITL from the raw bytes it gets. What must hold:

- bytes out == bytes in (status, the engine's headers, every body byte), streams are not buffered, and the
  proxy's TTFT/ITL are within 5 ms of the client's, with the engine's own token counts;
- a client that disconnects cancels the upstream request and the proxy keeps serving;
- upstream down → 502 with a one-line JSON body; upstream slow → 504 quickly, a stall mid-stream cuts the
  connection; nothing hangs;
- malformed streams are forwarded as is and only the measurement notes it; non-inference paths pass through
  unmeasured; large bodies both ways; no header added or lost except hop-by-hop ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import gzip
import hashlib
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from ietop.sources.proxy import (
    BackgroundServer,
    JsonlSink,
    make_app,
    parse_listen,
    proxy_request_from_json,
    proxy_request_to_json,
    run_proxy,
)
from parsers.events import ProxyRequest

STREAMS = Path(__file__).resolve().parents[2] / "fixtures" / "streams"
FIXTURES = sorted(p.stem for p in STREAMS.glob("*.json"))
TOLERANCE_S = 0.005


def load(name: str) -> dict[str, Any]:
    return json.loads((STREAMS / f"{name}.json").read_text())


def body_of(fx: dict[str, Any]) -> bytes:
    return "".join(text for _, text in fx["chunks"]).encode()


# -- the upstream ------------------------------------------------------------------------------------


class Upstream:
    """A fake engine. Behaviour is chosen per request by headers: ``x-fixture: NAME`` replays a recorded
    stream at its times; ``x-mode`` is echo, slow (headers after ``x-delay`` s), stall (one chunk, then
    silence), drip (a chunk every 10 ms until the client leaves), big (``x-mb`` MB), gzip, big-embeddings."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.cancelled: list[str] = []
        self.cancel_event = threading.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                done = "lifespan.startup.complete" if message["type"] == "lifespan.startup" else None
                await send({"type": done or "lifespan.shutdown.complete"})
                if done is None:
                    return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        raw_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.cancelled.append(f"upload {scope['path']} after {len(body)} bytes")
                self.cancel_event.set()
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.seen.append({"method": scope["method"], "path": scope["path"], "query": scope["query_string"].decode(),
                          "headers": raw_headers, "length": len(body), "sha256": hashlib.sha256(body).hexdigest()})
        gone = asyncio.ensure_future(self._disconnected(receive))
        name = headers.get("x-fixture") or headers.get("x-mode", "echo")
        try:
            await self._respond(name, headers, bytes(body), scope, send, gone)
        finally:
            gone.cancel()

    async def _disconnected(self, receive: Any) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    async def _until(self, deadline: float, gone: asyncio.Future[None], name: str) -> bool:
        """Sleep until ``deadline``; False (and the cancel recorded) if the client left first."""
        delay = max(0.0, deadline - time.perf_counter())
        done, _ = await asyncio.wait({gone}, timeout=delay)
        if done:
            self.cancelled.append(name)
            self.cancel_event.set()
            return False
        return True

    async def _respond(self, name: str, headers: dict[str, str], body: bytes, scope: Any, send: Any,
                       gone: asyncio.Future[None]) -> None:
        start = {"type": "http.response.start", "status": 200}
        server = [(b"server", b"fake-engine/1.0")]
        if name in FIXTURES:
            fx = load(name)
            t0 = time.perf_counter()
            hdrs = [(k.encode(), v.encode()) for k, v in fx["headers"]] + server
            if not fx["expect"]["stream"]:
                hdrs.append((b"content-length", str(len(body_of(fx))).encode()))
            if not await self._until(t0 + fx["t_headers"], gone, name):
                return
            await send({**start, "status": fx["status"], "headers": hdrs})
            for t, text in fx["chunks"]:
                if not await self._until(t0 + t, gone, name):
                    return
                await send({"type": "http.response.body", "body": text.encode(), "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        elif name == "echo":
            data = json.dumps({**self.seen[-1], "usage": {"prompt_tokens": len(body) // 4, "completion_tokens": 1},
                               "choices": [{"message": {"content": "ok"}}]}).encode()
            await send({**start, "headers": [(b"content-type", b"application/json"), *server,
                                             (b"content-length", str(len(data)).encode())]})
            await send({"type": "http.response.body", "body": data})
        elif name == "slow":
            if await self._until(time.perf_counter() + float(headers.get("x-delay", "5")), gone, name):
                await send({**start, "headers": [(b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": b"{}"})
        elif name in ("stall", "drip"):
            await send({**start, "headers": [(b"content-type", b"text/event-stream")]})
            for i in range(300 if name == "drip" else 1):
                chunk = b'data: {"choices": [{"delta": {"content": "t%d"}}]}\n\n' % i
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                if not await self._until(time.perf_counter() + 0.01, gone, name):
                    return
            if await self._until(time.perf_counter() + (5 if name == "stall" else 0), gone, name):
                await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
        elif name == "big":
            block = hashlib.sha256(b"ietop").digest() * 2048  # 64 KiB
            await send({**start, "headers": [(b"content-type", b"application/octet-stream")]})
            for _ in range(int(headers.get("x-mb", "1")) * 16):
                await send({"type": "http.response.body", "body": block, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        elif name == "gzip":
            packed = gzip.compress(body_of(load("mlx-chat-stream-usage")), mtime=0)
            await send({**start, "headers": [(b"content-type", b"text/event-stream"), (b"content-encoding", b"gzip")]})
            for i in range(0, len(packed), 500):
                await send({"type": "http.response.body", "body": packed[i:i + 500], "more_body": True})
                await asyncio.sleep(0.002)
            await send({"type": "http.response.body", "body": b""})
        elif name == "big-embeddings":
            vec = ",".join(["0.0123456"] * 1024)
            data = ('{"object":"list","data":[' + ",".join(f'{{"object":"embedding","index":{i},"embedding":[{vec}]}}'
                                                            for i in range(600))
                    + '],"model":"all-minilm","usage":{"prompt_tokens":600,"total_tokens":600}}').encode()
            await send({**start, "headers": [(b"content-type", b"application/json")]})
            for i in range(0, len(data), 1 << 16):
                await send({"type": "http.response.body", "body": data[i:i + (1 << 16)], "more_body": True})
            await send({"type": "http.response.body", "body": b""})


# -- harness ------------------------------------------------------------------------------------------


@dataclass
class Proxy:
    url: str
    records: list[ProxyRequest] = field(default_factory=list)

    def wait(self, n: int = 1, timeout: float = 3.0) -> list[ProxyRequest]:
        deadline = time.monotonic() + timeout
        while len(self.records) < n and time.monotonic() < deadline:
            time.sleep(0.005)
        return list(self.records)


@contextlib.contextmanager
def running_proxy(upstream_url: str, **kw: Any) -> Iterator[Proxy]:
    records: list[ProxyRequest] = []
    with BackgroundServer(make_app(upstream_url, records.append, **kw)) as server:
        yield Proxy(server.url, records)


@pytest.fixture(scope="module", autouse=True)
def _fast_thread_switches() -> Iterator[None]:
    """Client, proxy and upstream share one interpreter here: switch threads faster than the 5 ms default so
    the GIL does not add jitter of the size of the tolerance."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)
    yield
    sys.setswitchinterval(old)


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[Upstream, str]]:
    engine = Upstream()
    with BackgroundServer(engine) as server:
        yield engine, server.url


@pytest.fixture(scope="module")
def shared_proxy(upstream: tuple[Upstream, str]) -> Iterator[Proxy]:
    with running_proxy(upstream[1]) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def _shared_client(shared_proxy: Proxy) -> Iterator[httpx.Client]:
    """One keep-alive client, warmed up: the client's connection set-up happens before the proxy sees the
    request, so a first request on a new connection would be compared with an unfair head start."""
    with httpx.Client(timeout=10) as c:
        for _ in range(3):
            c.get(shared_proxy.url + "/warm-up", headers={"x-mode": "echo"})
        yield c


@pytest.fixture
def proxy(shared_proxy: Proxy, upstream: tuple[Upstream, str]) -> Proxy:
    shared_proxy.records.clear()
    upstream[0].cancelled.clear()
    upstream[0].cancel_event.clear()
    return shared_proxy


@pytest.fixture
def client(_shared_client: httpx.Client) -> httpx.Client:
    return _shared_client


@dataclass
class Seen:
    status: int
    headers: httpx.Headers
    body: bytes
    ttft_s: float | None
    itl_s: float | None
    e2e_s: float
    prompt_tokens: int | None


def _content(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    for ch in obj.get("choices") or []:
        if (ch.get("delta") or {}).get("content") or ch.get("text"):
            return True
    return bool((obj.get("message") or {}).get("content") or obj.get("response"))


def client_measure(chunks: list[tuple[float, bytes]], status: int, headers: httpx.Headers, t_end: float) -> Seen:
    """The client's own view: its first content event and the mean gap between content events."""
    times: list[float] = []
    prompt = None
    buf = b""
    for i, (t, chunk) in enumerate(chunks):
        buf += chunk
        *lines, buf = buf.split(b"\n")
        if i == len(chunks) - 1:
            lines.append(buf)  # a non-stream body has no final newline
        for line in lines:
            text = line.strip().removeprefix(b"data: ")
            if not text.startswith(b"{"):
                continue
            try:
                obj = json.loads(text)
            except ValueError:
                continue
            if _content(obj):
                times.append(t)
            prompt = (obj.get("usage") or {}).get("prompt_tokens", obj.get("prompt_eval_count", prompt))
    itl = (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else None
    return Seen(status, headers, b"".join(c for _, c in chunks), times[0] if times else None, itl, t_end, prompt)


def fetch(client: httpx.Client, method: str, url: str, **kw: Any) -> Seen:
    # No collection pauses while timing: client, proxy and upstream share this interpreter's collector.
    gc.disable()
    try:
        t0 = time.perf_counter()
        chunks: list[tuple[float, bytes]] = []
        with client.stream(method, url, **kw) as r:
            for chunk in r.iter_raw():
                chunks.append((time.perf_counter() - t0, chunk))
        t_end = time.perf_counter() - t0
    finally:
        gc.enable()
    return client_measure(chunks, r.status_code, r.headers, t_end)


def post_fixture(client: httpx.Client, base: str, name: str) -> Seen:
    fx = load(name)
    return fetch(client, "POST", base + fx["path"], content=json.dumps(fx["request"]).encode(),
                 headers={"x-fixture": name, "content-type": "application/json"})


# -- streams and answers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_replayed_stream_is_byte_identical_and_measured_like_the_client(
        proxy: Proxy, client: httpx.Client, name: str) -> None:
    """Every recorded stream and answer: the client gets exactly the engine's bytes and headers, and the
    proxy's TTFT/ITL agree with the client's within 5 ms, with the engine's own token counts."""
    fx = load(name)
    seen = post_fixture(client, proxy.url, name)
    assert seen.status == fx["status"]
    assert seen.body == body_of(fx)
    for k, v in fx["headers"]:
        assert seen.headers[k] == v
    assert seen.headers["server"] == "fake-engine/1.0"
    assert "date" not in seen.headers
    (rec,) = proxy.wait()
    expect = fx["expect"]
    assert (rec.method, rec.path, rec.status, rec.model, rec.stream) == (
        "POST", fx["path"], fx["status"], expect["model"], expect["stream"])
    assert (rec.prompt_tokens, rec.output_tokens, rec.cached_tokens, rec.content_chunks) == (
        expect["prompt_tokens"], expect["output_tokens"], expect["cached_tokens"], expect["content_chunks"])
    assert rec.prompt_tokens == seen.prompt_tokens
    assert rec.error == expect.get("error")
    assert rec.bytes_up == len(json.dumps(fx["request"]).encode()) and rec.bytes_down == len(seen.body)
    assert rec.ts is not None and rec.ts.tzinfo is not None and rec.line == 0
    # The proxy and the client time the same bytes from two threads; on a busy 2-core machine either can be
    # descheduled at the wrong moment. So the tolerance grows by the scheduling delay measured here, now, and
    # up to TIMING_TRIES tries of the same exchange are made: one must agree, as a real measuring error would
    # be in every try.
    tolerance = TOLERANCE_S + 2 * scheduling_delay()
    tries = [(rec, seen)]
    while not _timings_agree(*tries[-1], tolerance, expect) and len(tries) < TIMING_TRIES:
        again = post_fixture(client, proxy.url, name)
        tries.append((proxy.wait(len(tries) + 1)[-1], again))
        tolerance = TOLERANCE_S + 2 * scheduling_delay()
    rec, seen = tries[-1]
    assert rec.e2e_s is not None and abs(rec.e2e_s - seen.e2e_s) < tolerance + 0.005, tries  # + client teardown
    if expect["stream"]:
        assert rec.ttft_s is not None and seen.ttft_s is not None and rec.itl_s is not None and seen.itl_s is not None
        assert abs(rec.ttft_s - seen.ttft_s) < tolerance, tries
        assert abs(rec.itl_s - seen.itl_s) < tolerance, tries
        # The recorded timing was replayed, not lost in buffers.
        assert abs(rec.ttft_s - expect["ttft_s"]) < 0.015 + tolerance, tries
    else:
        assert rec.ttft_s is None and rec.itl_s is None


TIMING_TRIES = 4


def _timings_agree(rec: ProxyRequest, seen: Seen, tolerance: float, expect: dict[str, Any]) -> bool:
    if rec.e2e_s is None or abs(rec.e2e_s - seen.e2e_s) >= tolerance + 0.005:
        return False
    if not expect["stream"]:
        return True
    return (rec.ttft_s is not None and seen.ttft_s is not None and rec.itl_s is not None and seen.itl_s is not None
            and abs(rec.ttft_s - seen.ttft_s) < tolerance and abs(rec.itl_s - seen.itl_s) < tolerance
            and abs(rec.ttft_s - expect["ttft_s"]) < 0.015 + tolerance)


def scheduling_delay(samples: int = 20) -> float:
    """How late a thread wakes from a 1 ms sleep on this machine right now (the worst of `samples`): the
    noise any two threads' clocks carry between them, measured in the test that needs it."""
    worst = 0.0
    for _ in range(samples):
        t0 = time.perf_counter()
        time.sleep(0.001)
        worst = max(worst, time.perf_counter() - t0 - 0.001)
    return worst


def test_stream_is_not_buffered(proxy: Proxy, client: httpx.Client) -> None:
    """Chunks reach the client at the upstream's pace, not in one burst at the end."""
    fx = load("ollama-chat-stream")
    seen = post_fixture(client, proxy.url, "ollama-chat-stream")
    assert seen.ttft_s is not None
    spread = fx["chunks"][-1][0] - fx["chunks"][0][0]
    assert seen.e2e_s - seen.ttft_s > 0.8 * spread
    assert len(proxy.wait()) == 1


async def test_concurrent_streams_are_measured_separately(proxy: Proxy) -> None:
    names = ["vllm-chat-stream", "mlx-chat-stream-usage", "ollama-generate-stream", "mlx-text-stream-usage"] * 3

    async def one(c: httpx.AsyncClient, name: str) -> bytes:
        fx = load(name)
        r = await c.post(proxy.url + fx["path"], content=json.dumps(fx["request"]).encode(),
                         headers={"x-fixture": name})
        return r.content

    async with httpx.AsyncClient(timeout=10) as c:
        bodies = await asyncio.gather(*(one(c, n) for n in names))
    assert [b == body_of(load(n)) for b, n in zip(bodies, names)] == [True] * len(names)
    records = await asyncio.to_thread(proxy.wait, len(names))
    assert sorted((r.model, r.prompt_tokens, r.content_chunks) for r in records) == sorted(
        (load(n)["expect"]["model"], load(n)["expect"]["prompt_tokens"], load(n)["expect"]["content_chunks"])
        for n in names)
    assert all(r.error is None for r in records)


def test_compressed_answer_is_forwarded_raw_and_still_measured(proxy: Proxy, client: httpx.Client,
                                                               upstream: tuple[Upstream, str]) -> None:
    seen = fetch(client, "POST", proxy.url + "/v1/chat/completions", content=b'{"stream": true}',
                 headers={"x-mode": "gzip", "accept-encoding": "gzip"})
    assert seen.headers["content-encoding"] == "gzip"
    assert seen.body == gzip.compress(body_of(load("mlx-chat-stream-usage")), mtime=0)
    assert ("accept-encoding", "gzip") in upstream[0].seen[-1]["headers"]
    (rec,) = proxy.wait()
    assert (rec.prompt_tokens, rec.output_tokens, rec.content_chunks, rec.bytes_down) == (39, 12, 11, len(seen.body))


# -- failures ---------------------------------------------------------------------------------------


def test_client_disconnect_cancels_upstream_and_proxy_keeps_serving(
        proxy: Proxy, client: httpx.Client, upstream: tuple[Upstream, str]) -> None:
    engine = upstream[0]
    with client.stream("POST", proxy.url + "/v1/chat/completions", content=b'{"model": "m", "stream": true}',
                       headers={"x-mode": "drip"}) as r:
        got = b""
        for chunk in r.iter_raw():
            got += chunk
            if got.count(b"\n\n") >= 3:
                break
    assert engine.cancel_event.wait(2.0), "the upstream never saw the request cancelled"
    assert engine.cancelled == ["drip"]
    (rec,) = proxy.wait()
    assert (rec.error, rec.status, rec.model) == ("client disconnected", 200, "m")
    assert rec.content_chunks >= 3 and rec.ttft_s is not None
    assert rec.e2e_s is not None and rec.e2e_s < 1.0
    seen = post_fixture(client, proxy.url, "mlx-chat-stream-usage")
    assert seen.body == body_of(load("mlx-chat-stream-usage"))
    assert proxy.wait(2)[1].error is None


def _raw_request(url: str, head: bytes, body_part: bytes) -> None:
    """Send a request's head and part of its body on a raw socket, then vanish."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as s:
        s.sendall(head + body_part)
        time.sleep(0.1)


def test_client_gone_while_sending_its_prompt_is_recorded(proxy: Proxy, upstream: tuple[Upstream, str]) -> None:
    before = len(upstream[0].seen)
    _raw_request(proxy.url, b"POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n", b'{"model": "m",')
    (rec,) = proxy.wait()
    assert (rec.status, rec.error, rec.path, rec.bytes_down, rec.ttfb_s) == (None, "client disconnected", "/api/chat", 0, None)
    assert len(upstream[0].seen) == before  # nothing was sent on


def test_aborted_upload_is_cancelled_upstream(proxy: Proxy, client: httpx.Client, upstream: tuple[Upstream, str]) -> None:
    """A large unmeasured upload is streamed up as it comes; if its client leaves, so does the upstream request."""
    before = len(upstream[0].seen)
    head = b"POST /api/blobs/sha256:abc HTTP/1.1\r\nHost: x\r\nx-mode: echo\r\nContent-Length: 10000000\r\n\r\n"
    _raw_request(proxy.url, head, b"x" * 2_000_000)
    assert upstream[0].cancel_event.wait(2.0)
    (cancel,) = upstream[0].cancelled
    assert cancel.startswith("upload /api/blobs/sha256:abc after ")
    assert len(upstream[0].seen) == before  # the upstream never got a complete request to answer
    assert client.get(proxy.url + "/api/tags", headers={"x-mode": "echo"}).status_code == 200
    assert proxy.wait(1, timeout=0.1) == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_upstream_down_is_a_502_with_one_line(client: httpx.Client) -> None:
    with running_proxy(f"http://127.0.0.1:{_free_port()}") as proxy:
        t0 = time.perf_counter()
        r = client.post(proxy.url + "/api/chat", json={"model": "llama3.2", "messages": []})
        assert time.perf_counter() - t0 < 2
        assert r.status_code == 502
        assert r.headers["content-type"] == "application/json"
        assert r.content.count(b"\n") == 1 and r.content.endswith(b"\n")
        assert "upstream down" in r.json()["error"]
        (rec,) = proxy.wait()
        assert (rec.status, rec.error, rec.model, rec.stream, rec.ttfb_s) == (502, "upstream down", "llama3.2", True, None)
        assert client.get(proxy.url + "/api/tags").status_code == 502
        assert len(proxy.wait(2, timeout=0.2)) == 1  # unmeasured paths are never recorded


def test_upstream_slow_to_answer_is_a_504_and_cancelled(client: httpx.Client, upstream: tuple[Upstream, str]) -> None:
    engine = upstream[0]
    engine.cancel_event.clear()
    with running_proxy(upstream[1], timeout=0.3) as proxy:
        t0 = time.perf_counter()
        r = client.post(proxy.url + "/v1/completions", json={"model": "m"}, headers={"x-mode": "slow", "x-delay": "5"})
        assert r.status_code == 504
        assert time.perf_counter() - t0 < 1.5
        assert "upstream timeout" in r.json()["error"]
        (rec,) = proxy.wait()
        assert (rec.status, rec.error) == (504, "upstream timeout")
        assert engine.cancel_event.wait(2.0)


def test_upstream_stalling_mid_stream_cuts_the_connection(client: httpx.Client, upstream: tuple[Upstream, str]) -> None:
    """After the headers a 504 is impossible: the proxy cuts the connection so the client cannot mistake a
    truncated stream for a complete one."""
    with running_proxy(upstream[1], timeout=0.3) as proxy:
        t0 = time.perf_counter()
        got: list[bytes] = []
        statuses: list[int] = []

        def read_all() -> None:
            with client.stream("POST", proxy.url + "/v1/chat/completions", content=b'{"stream": true}',
                               headers={"x-mode": "stall"}) as r:
                statuses.append(r.status_code)
                got.extend(r.iter_raw())

        with pytest.raises(httpx.RemoteProtocolError):
            read_all()
        assert time.perf_counter() - t0 < 1.5
        assert statuses == [200]
        assert b"".join(got) == b'data: {"choices": [{"delta": {"content": "t0"}}]}\n\n'
        (rec,) = proxy.wait()
        assert (rec.status, rec.error, rec.content_chunks) == (200, "upstream timeout", 1)
        assert rec.ttft_s is not None and rec.ttfb_s is not None


def test_malformed_stream_is_forwarded_as_is_and_noted(proxy: Proxy, client: httpx.Client) -> None:
    seen = post_fixture(client, proxy.url, "malformed-sse")
    assert seen.status == 200 and seen.body == body_of(load("malformed-sse"))
    (rec,) = proxy.wait()
    assert (rec.error, rec.content_chunks) == ("malformed stream", 2)
    assert post_fixture(client, proxy.url, "ollama-chat-stream").status == 200
    assert proxy.wait(2)[1].error is None


def test_callback_failure_does_not_break_the_proxy(upstream: tuple[Upstream, str], client: httpx.Client,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    def boom(_: ProxyRequest) -> None:
        raise RuntimeError("sink failed")

    with BackgroundServer(make_app(upstream[1], boom)) as server:
        for _ in range(2):
            seen = post_fixture(client, server.url, "mlx-chat-nonstream")
            assert seen.body == body_of(load("mlx-chat-nonstream"))
    assert sum("on_request callback failed" in r.getMessage() for r in caplog.records) == 1


# -- pass-through -------------------------------------------------------------------------------------


def test_non_inference_paths_pass_through_unmeasured(proxy: Proxy, client: httpx.Client,
                                                     upstream: tuple[Upstream, str]) -> None:
    r = client.get(proxy.url + "/api/tags?verbose=1&x=%2F", headers={"x-mode": "echo"})
    assert r.status_code == 200
    echoed = r.json()
    assert (echoed["method"], echoed["path"], echoed["query"]) == ("GET", "/api/tags", "verbose=1&x=%2F")
    for method, path in [("POST", "/api/show"), ("HEAD", "/"), ("GET", "/v1/chat/completions"),
                         ("OPTIONS", "/v1/chat/completions"), ("DELETE", "/api/delete")]:
        r = client.request(method, proxy.url + path, headers={"x-mode": "echo"})
        assert r.status_code == 200, (method, path)
        assert upstream[0].seen[-1]["method"] == method and upstream[0].seen[-1]["path"] == path
    assert proxy.wait(1, timeout=0.2) == []


def test_headers_pass_unchanged_except_hop_by_hop(proxy: Proxy, client: httpx.Client,
                                                  upstream: tuple[Upstream, str]) -> None:
    request = client.build_request("POST", proxy.url + "/api/show", content=b'{"model": "x"}', headers={
        "x-mode": "echo", "authorization": "Bearer t", "x-trace": "1", "connection": "keep-alive, x-private",
        "x-private": "secret", "keep-alive": "timeout=5", "te": "trailers", "proxy-authorization": "Basic x"})
    for name in ("accept-encoding", "user-agent", "accept"):
        del request.headers[name]
    r = client.send(request)
    assert r.status_code == 200
    sent = dict(upstream[0].seen[-1]["headers"])
    host = upstream[1].removeprefix("http://")
    assert sent["host"] == host
    assert (sent["authorization"], sent["x-trace"], sent["content-length"]) == ("Bearer t", "1", "14")
    for name in ("x-private", "keep-alive", "te", "proxy-authorization", "accept-encoding", "user-agent", "accept"):
        assert name not in sent, name
    assert r.headers["server"] == "fake-engine/1.0" and "date" not in r.headers
    r = client.get(proxy.url + "/", headers={"x-mode": "echo", "accept-encoding": "br;q=1, gzip;q=0.5",
                                             "user-agent": "my-app/2"})
    sent = dict(upstream[0].seen[-1]["headers"])
    assert (sent["accept-encoding"], sent["user-agent"]) == ("br;q=1, gzip;q=0.5", "my-app/2")


def test_large_bodies_both_ways(proxy: Proxy, client: httpx.Client, upstream: tuple[Upstream, str]) -> None:
    engine = upstream[0]
    prompt = json.dumps({"model": "m", "stream": False, "messages": [{"role": "user", "content": "x" * 8_000_000}]})
    body = prompt.encode()
    r = client.post(proxy.url + "/v1/chat/completions", content=body, headers={"x-mode": "echo"})
    assert r.json()["sha256"] == hashlib.sha256(body).hexdigest()
    (rec,) = proxy.wait()
    assert (rec.bytes_up, rec.prompt_tokens, rec.model, rec.content_chunks) == (len(body), len(body) // 4, "m", 1)

    upload = bytes(range(256)) * 100_000  # 25.6 MB on an unmeasured path: streamed up, not read first
    r = client.post(proxy.url + "/api/blobs/sha256:abc", content=upload, headers={"x-mode": "echo"})
    assert r.json()["sha256"] == hashlib.sha256(upload).hexdigest()
    assert engine.seen[-1]["length"] == len(upload)

    chunks = iter([upload[i:i + (1 << 20)] for i in range(0, len(upload), 1 << 20)])
    r = client.post(proxy.url + "/api/blobs/sha256:def", content=chunks, headers={"x-mode": "echo"})
    assert r.json()["sha256"] == hashlib.sha256(upload).hexdigest()

    seen = fetch(client, "GET", proxy.url + "/big", headers={"x-mode": "big", "x-mb": "32"})
    assert len(seen.body) == 32 << 20
    assert seen.body == hashlib.sha256(b"ietop").digest() * 2048 * 512

    seen = fetch(client, "POST", proxy.url + "/v1/embeddings", content=b'{"model": "all-minilm", "input": ["a"]}',
                 headers={"x-mode": "big-embeddings"})
    assert len(seen.body) > 6_000_000
    records = proxy.wait(2)
    assert (records[1].path, records[1].prompt_tokens, records[1].bytes_down, records[1].error) == (
        "/v1/embeddings", 600, len(seen.body), None)


async def test_injected_client_and_asgi_transport() -> None:
    """``make_app`` takes the httpx client to forward with: here a MockTransport, driven in-process."""
    fx = load("vllm-chat-stream")

    def engine(request: httpx.Request) -> httpx.Response:
        assert request.url == httpx.URL("http://engine:8000/v1/chat/completions?a=1")
        assert request.headers["host"] == "engine:8000"
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=httpx.ByteStream(body_of(fx)))

    records: list[ProxyRequest] = []
    async with httpx.AsyncClient(transport=httpx.MockTransport(engine)) as upstream_client:
        app = make_app("http://engine:8000/", records.append, client=upstream_client)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as c:
            r = await c.post("/v1/chat/completions?a=1", content=json.dumps(fx["request"]).encode())
        await app.aclose()  # an injected client is the caller's to close: this leaves it open
        assert not upstream_client.is_closed
    assert r.content == body_of(fx)
    (rec,) = records
    assert (rec.prompt_tokens, rec.content_chunks, rec.model) == (77, 15, "tinyllm")


async def test_upstream_path_prefix_is_kept() -> None:
    urls: list[str] = []

    def engine(request: httpx.Request) -> httpx.Response:
        urls.append(str(request.url))
        return httpx.Response(200, stream=httpx.ByteStream(b"{}"))

    async with httpx.AsyncClient(transport=httpx.MockTransport(engine)) as upstream_client:
        app = make_app("http://engine/ollama/", print, client=upstream_client)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as c:
            await c.get("/api/tags?x=1")
    assert urls == ["http://engine/ollama/api/tags?x=1"]


# -- runner -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("listen", ["0.0.0.0:11435", "[::]:11435", "192.168.1.2:80", "example.com:80"])
def test_refuses_non_loopback_unless_allowed(listen: str) -> None:
    with pytest.raises(ValueError, match="not a loopback address"):
        parse_listen(listen)
    assert parse_listen(listen, allow_remote=True)[1] in (11435, 80)
    with pytest.raises(ValueError, match="loopback"):
        run_proxy(listen, "http://127.0.0.1:11434")


@pytest.mark.parametrize(("listen", "expected"), [
    ("127.0.0.1:11435", ("127.0.0.1", 11435)), ("localhost:9", ("localhost", 9)), ("[::1]:8080", ("::1", 8080)),
    (":7000", ("127.0.0.1", 7000)), ("7001", ("127.0.0.1", 7001)), ("127.0.0.2:1", ("127.0.0.2", 1)),
])
def test_parse_listen(listen: str, expected: tuple[str, int]) -> None:
    assert parse_listen(listen) == expected


@pytest.mark.parametrize("listen", ["127.0.0.1:http", "127.0.0.1:70000", ""])
def test_parse_listen_rejects_garbage(listen: str) -> None:
    with pytest.raises(ValueError, match="listen"):
        parse_listen(listen)


def test_bad_upstream_is_a_usage_error() -> None:
    for upstream in ("127.0.0.1:11434", "ftp://x", "http://"):
        with pytest.raises(ValueError, match="upstream"):
            make_app(upstream, print)


def test_run_proxy_serves_writes_jsonl_and_stops_on_ctrl_c(tmp_path: Path, upstream: tuple[Upstream, str],
                                                          client: httpx.Client) -> None:
    """The runner as the CLI uses it, in its own process: one JSON line per measured request, a clean exit."""
    port = _free_port()
    jsonl = tmp_path / "m.jsonl"
    code = f"from ietop.sources.proxy import run_proxy; run_proxy('127.0.0.1:{port}', {upstream[1]!r}, {str(jsonl)!r})"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2],
                            stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                if client.get(url + "/api/version", headers={"x-mode": "echo"}).status_code == 200:
                    break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, "proxy did not start"
                time.sleep(0.05)
        seen = post_fixture(client, url, "ollama-chat-stream")
        assert seen.body == body_of(load("ollama-chat-stream"))
    finally:
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=10)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    (line,) = jsonl.read_text().splitlines()
    rec = proxy_request_from_json(line)
    assert (rec.path, rec.prompt_tokens, rec.output_tokens, rec.content_chunks, rec.error) == ("/api/chat", 26, 9, 9, None)


def test_jsonl_sink_round_trip(tmp_path: Path, proxy: Proxy, client: httpx.Client) -> None:
    post_fixture(client, proxy.url, "ollama-generate-stream")
    (rec,) = proxy.wait()
    path = tmp_path / "proxy.jsonl"
    sink = JsonlSink(path)
    sink(rec)
    sink(rec)
    sink.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    assert proxy_request_from_json(lines[0]) == rec
    assert json.loads(lines[0])["ts"] == rec.ts.isoformat() if rec.ts else False
    assert proxy_request_from_json(proxy_request_to_json(rec).replace("{", '{"future_field":1,', 1)) == rec
