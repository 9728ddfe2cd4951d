"""`ietop proxy` and large or slow request bodies on the measured (inference) paths.

- a large prompt is streamed to the upstream as it arrives, not held: the proxy's memory for a 64 MB body is
  that for a 4 MB one (tracemalloc peak, both measured here), and the measurement still has its ``model``,
  ``stream`` and size, wherever the client put the keys;
- time to first byte counts from the request fully sent upstream: a slow upload is not the engine's
  latency (``e2e_s`` still counts from the arrival: the whole exchange as the client lived it).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from ietop.sources.proxy import BackgroundServer, make_app
from parsers.events import ProxyRequest

MB = 1 << 20


async def engine(scope: Any, receive: Any, send: Any) -> None:
    """A fake engine that hashes the body as it comes (holds none of it) and answers with its size and hash,
    as a stream when the path says so (``/api/chat``: NDJSON) or as one JSON answer."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    digest, size = hashlib.sha256(), 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        part = message.get("body", b"")
        digest.update(part)
        size += len(part)
        if not message.get("more_body"):
            break
    answer = json.dumps({"model": "m", "length": size, "sha256": digest.hexdigest(),
                         "choices": [{"message": {"content": "ok"}}],
                         "usage": {"prompt_tokens": size // 4, "completion_tokens": 1}}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(answer))]})
    await send({"type": "http.response.body", "body": answer})


@contextlib.contextmanager
def proxy() -> Iterator[tuple[str, list[ProxyRequest]]]:
    records: list[ProxyRequest] = []
    with BackgroundServer(engine) as upstream, BackgroundServer(make_app(upstream.url, records.append)) as server:
        yield server.url, records


def wait_for(records: list[ProxyRequest], n: int) -> list[ProxyRequest]:
    deadline = time.monotonic() + 5
    while len(records) < n and time.monotonic() < deadline:
        time.sleep(0.005)
    return list(records)


def prompt(size: int, *, model: str = "big-model", stream: bool = False) -> tuple[bytes, bytes, bytes]:
    """A chat request of about ``size`` bytes as (head, filler, tail), ``model`` and ``stream`` last (the
    order the OpenAI SDK writes them in); the filler is one block, sent again and again."""
    head = b'{"messages": [{"role": "user", "content": "'
    tail = b'"}], "model": %s, "stream": %s}' % (json.dumps(model).encode(), b"true" if stream else b"false")
    return head, b"x" * MB, tail


def send_prompt(url: str, size_mb: int, path: str = "/v1/chat/completions") -> tuple[httpx.Response, str]:
    head, block, tail = prompt(size_mb * MB)
    digest = hashlib.sha256(head)
    for _ in range(size_mb):
        digest.update(block)
    digest.update(tail)

    def parts() -> Iterator[bytes]:
        yield head
        for _ in range(size_mb):
            yield block  # the same object each time: the client allocates nothing per part
        yield tail

    length = len(head) + size_mb * len(block) + len(tail)
    r = httpx.post(url + path, content=parts(), headers={"content-length": str(length)}, timeout=60)
    return r, digest.hexdigest()


def test_large_prompt_is_streamed_up_not_held() -> None:
    with proxy() as (url, records):
        send_prompt(url, 2)  # warm-up: first-use allocations out of the measurement
        peaks = {}
        for size_mb in (4, 64):
            tracemalloc.start()
            try:
                r, sha = send_prompt(url, size_mb)
                peaks[size_mb] = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert r.status_code == 200 and r.json()["sha256"] == sha
        recs = wait_for(records, 3)
    # Held whole, 60 MB more of body took >120 MB more (the parts, then their join).
    assert peaks[64] - peaks[4] < 8 * MB, peaks
    rec = recs[-1]
    assert (rec.model, rec.stream, rec.status, rec.error) == ("big-model", False, 200, None)
    assert rec.bytes_up == sum(map(len, prompt(0))) - MB + 64 * MB


async def _slowly(parts: list[bytes], pause_s: float) -> AsyncIterator[bytes]:
    for part in parts:
        yield part
        await asyncio.sleep(pause_s)


@pytest.mark.parametrize("size", [2000, 3 * MB], ids=["read-whole", "streamed-up"])
async def test_slow_upload_is_not_counted_in_time_to_first_byte(size: int) -> None:
    body = json.dumps({"model": "m", "stream": False, "messages": [{"role": "user", "content": "x" * size}]}).encode()
    parts = [body[i:i + len(body) // 5 + 1] for i in range(0, len(body), len(body) // 5 + 1)]
    with proxy() as (url, records):
        async with httpx.AsyncClient(timeout=30) as client:
            t0 = time.perf_counter()
            r = await client.post(url + "/v1/chat/completions", content=_slowly(parts, 0.15),
                                  headers={"content-length": str(len(body))})
            took = time.perf_counter() - t0
        (rec,) = await asyncio.to_thread(wait_for, records, 1)
    assert r.status_code == 200 and r.json()["length"] == len(body)
    upload_s = 0.15 * (len(parts) - 1)  # at the least: the pauses between the parts
    assert rec.ttfb_s is not None and rec.e2e_s is not None
    assert rec.ttfb_s < upload_s / 4, (rec.ttfb_s, upload_s)
    assert upload_s <= rec.e2e_s <= took
    assert (rec.model, rec.bytes_up) == ("m", len(body))


def test_streamed_prompt_through_an_injected_client_is_measured() -> None:
    """The httpx path (an https upstream, or an injected client) streams a large body up too."""
    head, block, tail = prompt(3 * MB, model="via-httpx", stream=True)
    body = head + block * 3 + tail
    seen: list[int] = []

    async def run() -> list[ProxyRequest]:
        def answer(request: httpx.Request) -> httpx.Response:
            seen.append(len(request.content))  # MockTransport has read the stream the proxy gave httpx
            return httpx.Response(200, headers={"content-type": "application/x-ndjson"},
                                  stream=httpx.ByteStream(b'{"message": {"content": "a"}, "done": false}\n'
                                                          b'{"done": true, "prompt_eval_count": 9, "eval_count": 1}\n'))

        records: list[ProxyRequest] = []
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as upstream_client:
            app = make_app("http://engine:11434", records.append, client=upstream_client)
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as c:
                r = await c.post("/api/chat", content=body)
                assert r.status_code == 200
            await app.aclose()
        return records

    (rec,) = asyncio.run(run())
    assert seen == [len(body)]
    assert (rec.model, rec.stream, rec.bytes_up, rec.prompt_tokens, rec.error) == ("via-httpx", True, len(body), 9, None)
    assert rec.ttfb_s is not None and rec.ttfb_s >= 0


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000, 65536])
def test_model_and_stream_are_found_across_chunk_boundaries(chunk: int) -> None:
    from ietop.sources.proxy_body import BodyFields

    body = json.dumps({
        "messages": [{"role": "user", "content": 'quoted: "model": "not-this", "stream": true. ' + "y" * 5000}],
        "tools": [{"parameters": {"properties": {"model": {"type": "string"}}}}],  # a key, but not a string
        "model": 'llama3.2:1b \u00e9"q', "stream": False,
    }).encode()
    fields = BodyFields()
    for i in range(0, len(body), chunk):
        fields.feed(body[i:i + chunk])
    assert json.loads(fields.as_body()) == {"model": 'llama3.2:1b \u00e9"q', "stream": False}
    assert (fields.model, fields.stream, fields.size) == ('llama3.2:1b \u00e9"q', False, len(body))
    nothing = BodyFields()
    nothing.feed(b'{"prompt": "hi"}')
    assert json.loads(nothing.as_body()) == {}
