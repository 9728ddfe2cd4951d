"""HTTP polling turns every way an engine can fail into a PollResult, and polls never overlap.

Most cases use ``httpx.MockTransport`` (no sockets, no patching); two use real sockets on loopback
(a ``http.server`` started here, and a port with nothing listening) to check that the mapping of
real transport errors, which httpcore wraps in layers, still comes out as one word.
"""

from __future__ import annotations

import asyncio
import gzip
import http.server
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from itertools import pairwise

import httpx
import pytest

from ietop.sources.http import Poller, PollResult, get

Handler = Callable[[httpx.Request], Awaitable[httpx.Response]]


def _client(handler: Handler) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


async def _get_with(handler: Handler, timeout: float = 1.0, **kw: int) -> PollResult:
    async with _client(handler) as client:
        return await get(client, "http://engine.test/api/ps", timeout, **kw)


async def test_ok() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"models": []})

    r = await _get_with(handler)
    assert (r.url, r.ok, r.status, r.body, r.error) == ("http://engine.test/api/ps", True, 200, b'{"models":[]}', None)
    assert r.elapsed_s >= 0


async def test_200_with_empty_body_is_ok_the_parsers_judge_content() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200)

    r = await _get_with(handler)
    assert (r.ok, r.status, r.body, r.error) == (True, 200, b"", None)


async def test_503_keeps_status_and_body() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, text="loading model")

    r = await _get_with(handler)
    assert (r.ok, r.status, r.body, r.error) == (False, 503, b"loading model", "http 503")


async def test_garbage_bytes_are_returned_as_is() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"\x00\xff\xfe not json \x1b[31m")

    r = await _get_with(handler)
    assert (r.ok, r.body) == (True, b"\x00\xff\xfe not json \x1b[31m")


async def test_body_that_cannot_be_decoded_is_bad_body() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-encoding": "gzip"}, content=b"not gzip at all")

    r = await _get_with(handler)
    assert (r.ok, r.status, r.error) == (False, None, "bad body")


async def test_gzip_body_is_decoded() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-encoding": "gzip"}, content=gzip.compress(b"x" * 1000))

    r = await _get_with(handler)
    assert (r.ok, r.body) == (True, b"x" * 1000)


async def test_too_large_declared_and_streamed() -> None:
    async def declared(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"y" * 2000)

    async def streamed(request: httpx.Request) -> httpx.Response:
        async def body() -> AsyncIterator[bytes]:
            for _ in range(100):
                yield b"z" * 100

        return httpx.Response(200, content=body())

    for handler in (declared, streamed):
        r = await _get_with(handler, max_body=1000)
        assert (r.ok, r.status, r.error) == (False, 200, "body too large")
        assert len(r.body) <= 1000


async def test_slow_answer_times_out_within_the_timeout() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(10)
        return httpx.Response(200)

    started = time.perf_counter()
    r = await _get_with(handler, timeout=0.2)
    assert (r.ok, r.status, r.error) == (False, None, "timeout")
    # Not before the timeout; and the deadline, not the handler's 10 s, ended it. No tighter upper bound: on a
    # busy machine the loop may wake late, and the error already says the timeout fired.
    assert 0.19 <= r.elapsed_s < 5
    assert time.perf_counter() - started < 5


async def test_trickling_body_hits_the_overall_deadline() -> None:
    """httpx's per-read timeout would never fire here: each chunk arrives in time."""

    async def handler(request: httpx.Request) -> httpx.Response:
        async def body() -> AsyncIterator[bytes]:
            for _ in range(100):
                await asyncio.sleep(0.05)
                yield b"."

        return httpx.Response(200, content=body())

    r = await _get_with(handler, timeout=0.3)
    assert r.error == "timeout"
    assert r.elapsed_s < 2.5  # the whole body takes 5 s: the overall deadline, not the last chunk, ended it


@pytest.mark.parametrize(
    ("exc", "error"),
    [
        (httpx.ConnectError("[Errno 111] Connection refused"), "refused"),
        (httpx.ConnectError(""), "refused"),
        (httpx.ConnectError("[Errno -2] Name or service not known"), "dns"),
        (httpx.ConnectTimeout("timed out"), "timeout"),
        (httpx.ReadTimeout("timed out"), "timeout"),
        (httpx.PoolTimeout("no connection"), "timeout"),
        (httpx.ReadError("[Errno 104] Connection reset by peer"), "network: [Errno 104] Connection reset by peer"),
        (httpx.RemoteProtocolError("Server disconnected\nwithout sending a response."),
         "protocol: Server disconnected without sending a response."),
        (httpx.UnsupportedProtocol("Request URL has an unsupported protocol 'ftp://'."),
         "bad url: Request URL has an unsupported protocol 'ftp://'."),
        (OSError("ssl: wrong version number"), "network: ssl: wrong version number"),
    ],
)
async def test_transport_errors_become_one_line(exc: Exception, error: str) -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    r = await _get_with(handler)
    assert (r.ok, r.status, r.body, r.error) == (False, None, b"", error)


async def test_reset_is_recognised_from_the_cause() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadError("read failed") from ConnectionResetError(104, "Connection reset by peer")

    assert (await _get_with(handler)).error == "reset"


async def test_long_error_text_is_capped() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("x" * 10_000)

    error = (await _get_with(handler)).error
    assert error is not None and len(error) <= 160 and "\n" not in error


async def test_polls_never_overlap_and_interval_counts_from_the_end() -> None:
    in_flight = max_in_flight = 0
    spans: list[tuple[float, float]] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, max_in_flight
        in_flight += 1
        max_in_flight = max(max_in_flight, in_flight)
        start = time.perf_counter()
        await asyncio.sleep(0.1)  # slower than the interval
        in_flight -= 1
        spans.append((start, time.perf_counter()))
        return httpx.Response(200, text="ok")

    results: list[PollResult] = []
    stop = asyncio.Event()

    def on_result(result: PollResult) -> None:
        results.append(result)
        if len(results) == 5:
            stop.set()

    async with _client(handler) as client:
        poller = Poller(client, ["http://engine.test/metrics"], interval=0.03, timeout=1.0)
        await asyncio.wait_for(poller.run(on_result, stop), 5)
    assert max_in_flight == 1
    assert len(results) == 5 and all(r.ok for r in results)
    assert poller.rounds == 5
    gaps = [nxt[0] - prev[1] for prev, nxt in pairwise(spans)]
    assert min(gaps) >= 0.025, gaps


async def test_round_polls_every_url_and_rounds_do_not_overlap() -> None:
    in_flight: dict[str, int] = {}
    worst: dict[str, int] = {}

    async def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        in_flight[path] = in_flight.get(path, 0) + 1
        worst[path] = max(worst.get(path, 0), in_flight[path])
        await asyncio.sleep(0.05 if path == "/slow" else 0.0)
        in_flight[path] -= 1
        if path == "/down":
            raise httpx.ConnectError("[Errno 111] Connection refused")
        return httpx.Response(200)

    seen: list[tuple[str, str | None]] = []
    stop = asyncio.Event()

    def on_result(result: PollResult) -> None:
        seen.append((result.url.rsplit("/", 1)[1], result.error))
        if len(seen) == 9:
            stop.set()

    urls = ["http://e.test/slow", "http://e.test/fast", "http://e.test/down"]
    async with _client(handler) as client:
        await asyncio.wait_for(Poller(client, urls, interval=0.0).run(on_result, stop), 5)
    assert worst == {"/slow": 1, "/fast": 1, "/down": 1}
    for i in range(3):  # each round reports all three, the slow one last
        assert sorted(seen[3 * i : 3 * i + 3]) == [("down", "refused"), ("fast", None), ("slow", None)]
        assert seen[3 * i + 2] == ("slow", None)


async def test_stop_cancels_a_round_in_progress() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return httpx.Response(200)

    stop = asyncio.Event()
    async with _client(handler) as client:
        poller = Poller(client, ["http://engine.test/"], interval=1.0, timeout=60.0)
        task = asyncio.ensure_future(poller.run(lambda r: None, stop))
        await asyncio.sleep(0.1)
        started = time.perf_counter()
        stop.set()
        await asyncio.wait_for(task, 1)
    assert time.perf_counter() - started < 0.5
    assert poller.rounds == 0


async def test_on_result_error_ends_run() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200)

    def on_result(result: PollResult) -> None:
        raise RuntimeError("consumer bug")

    async with _client(handler) as client:
        with pytest.raises(RuntimeError, match="consumer bug"):
            await asyncio.wait_for(Poller(client, ["http://e.test/a"]).run(on_result, asyncio.Event()), 5)


async def test_poller_rejects_bad_settings() -> None:
    async with httpx.AsyncClient() as client:
        with pytest.raises(ValueError, match="timeout"):
            Poller(client, [], timeout=0)


class _Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        code, body = (200, b"metrics 1\n") if self.path == "/metrics" else (404, b"nope")
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep test output clean


@pytest.fixture
def loopback_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_real_loopback_server(loopback_server: str) -> None:
    async with httpx.AsyncClient() as client:
        ok = await get(client, loopback_server + "/metrics", 2.0)
        missing = await get(client, loopback_server + "/api/ps", 2.0)
    assert (ok.ok, ok.status, ok.body, ok.error) == (True, 200, b"metrics 1\n", None)
    assert (missing.ok, missing.status, missing.body, missing.error) == (False, 404, b"nope", "http 404")


async def test_real_closed_port_is_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Nothing listens there now (the kernel does not hand a just-closed port out again at once).
    async with httpx.AsyncClient() as client:
        r = await get(client, f"http://127.0.0.1:{port}/api/ps", 2.0)
    assert (r.ok, r.status, r.error) == (False, None, "refused")
    assert r.elapsed_s < 2.0  # refused, not waited out: under the 2 s timeout
