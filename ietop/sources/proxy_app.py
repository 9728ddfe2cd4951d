"""The ASGI app of `ietop proxy`: forward every request to one upstream engine, byte for byte, and measure
the inference ones on the way.

Why a hand-written ASGI callable rather than a framework: a proxy must not parse, re-encode, buffer or
decompress what it forwards, and every framework layer is one more place where that can happen. The
response body is read as the upstream sent it (compressed or not: nothing decodes it) and each chunk is
handed to the server as soon as it arrives; the measuring (``parsers.stream.StreamMeter``) sees the same
chunk only after it has been sent on, so it never delays the client.

The upstream is spoken to through ``httpcore`` (httpx's own transport: its h11 parser, timeouts and
exceptions) rather than an ``httpx.AsyncClient``, whose layer on top (request and response models, URL
normalisation, default headers, cookies, auth, redirects, event hooks) does nothing a proxy wants; and a
plain-HTTP upstream gets connections of our own over asyncio's transports (``_Connections``) instead of
httpcore's pool on anyio. Together with the per-request work taken out of the handler, that halved the
latency the proxy adds (bench/proxy_overhead.py on a 2-core VM, p50 to the first byte: ~1.9 ms before,
~0.75-1.1 ms after, httptools and uvloop included). What httpx did that httpcore does not is done here:
``Host`` is the upstream's, and the body's framing (``Content-Length`` for a body read whole,
``Transfer-Encoding: chunked`` for a streamed one of unknown length) is set for what is actually sent.
An injected ``httpx.AsyncClient`` (``make_app(client=...)``: tests, in-process transports) is still used
as such.

What the client sees when things go wrong, and what gets recorded (``ProxyRequest.error``):

- upstream refuses or cannot be reached: 502 and a one-line JSON body; "upstream down";
- upstream gives no answer within ``timeout`` (connect, or between two chunks): 504 before the headers;
  after them the connection is cut, so the client can tell the body is incomplete; "upstream timeout";
- the client goes away (ASGI ``http.disconnect``, watched for while the upstream works): the upstream
  request is closed at once, which is how engines learn to stop generating; "client disconnected".
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import importlib.util
import json
import logging
import sys
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, MutableMapping
from datetime import datetime, timezone
from typing import Any, TypeVar, cast
from urllib.parse import quote

import httpcore
import httpx

from parsers.events import ProxyRequest
from parsers.stream import StreamMeter, is_inference_path

__all__ = ["ASGIApp", "ProxyApp", "make_app"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("ietop.proxy")

if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:  # pragma: no cover
    # httpcore runs `import sniffio` several times per request to learn the async library and falls back to
    # asyncio when it is missing. A failed import is not cached, so each one searches sys.path again:
    # ~0.4 ms each, more than the whole rest of the proxy's per-request work. Cache the miss (a None entry
    # makes the import fail at once, exactly as it would have).
    sys.modules["sniffio"] = None  # type: ignore[assignment]

HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"proxy-connection", b"te",
     b"trailer", b"transfer-encoding", b"upgrade"}
)
"""Headers that describe one connection, not the message (RFC 9110 §7.6.1): never forwarded."""
_NOT_FORWARDED_UP = HOP_BY_HOP | {b"host", b"expect"}
"""Host is the upstream's; ``Expect: 100-continue`` was already answered by the server in front of us."""
_FRAMING = frozenset({b"content-length", b"transfer-encoding"})
_UPSTREAM_ERRORS = (httpx.HTTPError, httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError,
                    httpcore.UnsupportedProtocol, httpcore.ProxyError)
"""What a failing upstream raises: httpcore's own exceptions (the default path) or httpx's (an injected client)."""
_TIMEOUTS = (httpx.TimeoutException, httpcore.TimeoutException)
_CONNECT_ERRORS = (httpx.ConnectError, httpcore.ConnectError)
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_METER_BEHIND_MAX = 64
"""Chunks sent but not yet measured beyond which they are measured at once (bounds what is held for it)."""
_STREAM_UP_ABOVE = 1 << 20
"""Request bodies larger than this on unmeasured paths (Ollama blob uploads are GBs) are streamed to the
upstream instead of read first. Measured requests are read whole: their body is a prompt, and the meter
needs its ``model`` and ``stream`` fields."""


class _ClientGone(Exception):
    """The client disconnected while its request body was being forwarded."""


@dataclasses.dataclass(slots=True)
class _Upstream:
    """The upstream's answer, whichever client got it: status and headers in, the body still to read."""

    status: int
    headers: list[tuple[bytes, bytes]]
    chunks: AsyncIterable[bytes]
    """The body's bytes as the upstream sent them (not decompressed)."""
    aclose: Callable[[], Awaitable[None]]


@dataclasses.dataclass(slots=True)
class _Exchange:
    """What one forwarded request has produced so far; shared by the handler and the disconnect watcher."""

    meter: StreamMeter | None = None
    status: int | None = None
    error: str | None = None
    complete: bool = False
    """The whole response has been handed to the server."""
    t_end: float | None = None
    """When the last byte was handed to the server, or the exchange failed."""
    client_gone: bool = False
    """The client disconnected before the response was complete (the handler was cancelled for it)."""
    finished: bool = False
    """The handler is done: a disconnect from now on changes nothing."""
    unmetered: collections.deque[tuple[float, bytes]] = dataclasses.field(default_factory=collections.deque)
    """(time sent, chunk) handed to the server but not yet to the meter."""

    def meter_later(self, t: float, chunk: bytes) -> None:
        """Feed ``chunk`` (sent at ``t``) to the meter once the event loop has nothing more urgent to do.

        Chunks that arrive together (a burst; the upstream faster than the proxy) are all sent on before any
        of them is measured: the measuring (~15 µs a chunk) never stands between two chunks of a stream. The
        times are those of sending, so the measurement is the same; ``meter_now`` catches up at the end."""
        self.unmetered.append((t, chunk))
        if len(self.unmetered) == 1:
            asyncio.get_running_loop().call_soon(self.meter_now)
        elif len(self.unmetered) >= _METER_BEHIND_MAX:
            self.meter_now()

    def meter_now(self) -> None:
        """Feed the meter every chunk still waiting for it."""
        meter, unmetered = self.meter, self.unmetered
        while unmetered:
            t, chunk = unmetered.popleft()
            if meter is not None:
                meter.feed(t, chunk)


def _connection_tokens(headers: list[tuple[bytes, bytes]]) -> set[bytes]:
    """Header names listed in ``Connection`` (hop-by-hop by declaration)."""
    return {t.strip().lower() for k, v in headers if k.lower() == b"connection" for t in v.split(b",") if t.strip()}


def _request_headers(raw: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    drop = _NOT_FORWARDED_UP | _connection_tokens(raw)
    return [(k, v) for k, v in raw if k.lower() not in drop]


def _framed(headers: list[tuple[bytes, bytes]], method: str, content: bytes | AsyncIterator[bytes] | None,
            had_length: bool) -> list[tuple[bytes, bytes]]:
    """``headers`` with the framing of the body as it is sent on (what httpx's request model used to add).

    A body read whole gets its real ``Content-Length`` (the client may have sent it chunked); none at all gets
    ``Content-Length: 0`` where the method expects a body or the client sent one. A streamed body keeps the
    client's ``Content-Length``, or is sent chunked when the client did not give one.
    """
    if isinstance(content, bytes) or content is None:
        kept = [(k, v) for k, v in headers if k.lower() not in _FRAMING]
        if content or had_length or method in _BODY_METHODS:
            kept.append((b"content-length", str(len(content or b"")).encode()))
        return kept
    if any(k.lower() == b"content-length" for k, _ in headers):
        return headers
    return [*headers, (b"transfer-encoding", b"chunked")]


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    for k, v in headers:
        if k.lower() == name:
            return v.decode("latin-1")
    return None


def _response_headers(raw: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    drop = HOP_BY_HOP | _connection_tokens(raw)
    return [(k, v) for k, v in raw if k.lower() not in drop]


def _error_body(message: str) -> bytes:
    return json.dumps({"error": f"ietop proxy: {message}"}).encode() + b"\n"


async def _send_error(send: Send, status: int, message: str) -> None:
    body = _error_body(message)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _read_body(receive: Receive) -> bytes:
    """The whole request body; raises ``_ClientGone`` if the client leaves first."""
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _ClientGone
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts)


async def _stream_body(receive: Receive, done: asyncio.Event) -> AsyncIterator[bytes]:
    """The request body as it arrives, for large uploads; sets ``done`` after the last part."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _ClientGone
        body = message.get("body", b"")
        if body:
            yield body
        if not message.get("more_body", False):
            done.set()
            return


async def _wait_disconnect(receive: Receive, body_done: asyncio.Event) -> None:
    """Returns when the client disconnects (only listens once the request body has been read)."""
    await body_done.wait()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


def _upstream_failure(exc: Exception) -> tuple[int, str, str]:
    """(status for the client, recorded error, detail for the body) for a failure before any response."""
    if isinstance(exc, _TIMEOUTS):
        return 504, "upstream timeout", "upstream timeout"
    if isinstance(exc, _CONNECT_ERRORS):
        return 502, "upstream down", "upstream down (connection failed)"
    return 502, "upstream error", f"upstream error ({type(exc).__name__})"


# -- the upstream connection: httpcore over plain asyncio -----------------------------------------------------

_T = TypeVar("_T")
_READ_BUFFER_LIMIT = 1 << 18
"""Bytes received from the upstream but not yet read beyond which the socket stops being read."""
_WRITE_AT_ONCE = 1 << 16
"""Writes at least this large go out at once rather than being joined with the next (no copying)."""


class _UpstreamProtocol(asyncio.Protocol):
    """Bytes from one upstream connection for ``_UpstreamStream``: handed straight to a waiting read, or kept
    (reading pauses past ``_READ_BUFFER_LIMIT``) until the next one."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._chunks: collections.deque[bytes] = collections.deque()
        self._buffered = 0
        self._reader: asyncio.Future[bytes] | None = None
        self._max_bytes = 0
        self._paused_reading = False
        self._drain: asyncio.Future[None] | None = None
        self.closed = False
        """EOF or connection lost: reads return what is buffered, then b"" (or raise, after an error)."""
        self._error: BaseException | None = None

    # asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's

    def data_received(self, data: bytes) -> None:
        reader = self._reader
        if reader is not None and not reader.done() and not self._chunks:
            self._reader = None
            if len(data) > self._max_bytes:
                data, rest = data[:self._max_bytes], data[self._max_bytes:]
                self._keep(rest)
            reader.set_result(data)
        else:
            self._keep(data)

    def _keep(self, data: bytes) -> None:
        self._chunks.append(data)
        self._buffered += len(data)
        if self._buffered > _READ_BUFFER_LIMIT and not self._paused_reading and self.transport is not None:
            self._paused_reading = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        self._end(None)
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc)
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_exception(httpcore.WriteError(str(exc or "connection closed")))

    def _end(self, exc: BaseException | None) -> None:
        self.closed = True
        if exc is not None and self._error is None:
            self._error = exc
        reader, self._reader = self._reader, None
        if reader is not None and not reader.done():
            if self._error is not None:
                reader.set_exception(httpcore.ReadError(str(self._error)))
            else:
                reader.set_result(b"")

    def pause_writing(self) -> None:
        if self._drain is None:
            self._drain = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    # used by _UpstreamStream
    def has_data(self) -> bool:
        return bool(self._chunks) or self.closed

    async def read(self, max_bytes: int, timeout: float | None) -> bytes:
        if self._chunks:
            data = self._chunks.popleft()
            if len(data) > max_bytes:
                data, rest = data[:max_bytes], data[max_bytes:]
                self._chunks.appendleft(rest)
            self._buffered -= len(data)
            if self._paused_reading and self._buffered <= _READ_BUFFER_LIMIT // 2 and self.transport is not None:
                self._paused_reading = False
                self.transport.resume_reading()
            return data
        if self.closed:
            if self._error is not None:
                raise httpcore.ReadError(str(self._error))
            return b""
        reader = self._reader = asyncio.get_running_loop().create_future()
        self._max_bytes = max_bytes
        return await _within(reader, timeout, httpcore.ReadTimeout)

    async def drain(self, timeout: float | None) -> None:
        if self._drain is not None:
            await _within(asyncio.shield(self._drain), timeout, httpcore.WriteTimeout)


async def _within(future: asyncio.Future[_T], timeout: float | None, error: type[Exception]) -> _T:
    """Await ``future``; past ``timeout`` seconds it fails with ``error`` (one timer, no extra task)."""
    if timeout is None:
        return await future

    def expire() -> None:
        if not future.done():
            future.set_exception(error(f"no answer within {timeout} s"))

    timer = asyncio.get_running_loop().call_later(timeout, expire)
    try:
        return await future
    finally:
        timer.cancel()


class _UpstreamStream(httpcore.AsyncNetworkStream):
    """httpcore's view of one upstream connection (plain-HTTP upstreams; see ``_AsyncioBackend``).

    Writes made in one go are sent as one: httpcore writes a request's head and its body separately, which
    would reach the upstream as two packets, and it would have to wake up twice to read the request. Small
    writes are held only until this task next waits (or reads the answer), never longer: an upload that
    trickles in is passed on as it comes."""

    def __init__(self, transport: asyncio.Transport, protocol: _UpstreamProtocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self._unsent: list[bytes] = []

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._flush()
        return await self._protocol.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if self._protocol.closed or self._transport.is_closing():
            raise httpcore.WriteError("connection closed")
        if len(buffer) >= _WRITE_AT_ONCE:
            self._flush()
            self._transport.write(buffer)
        elif buffer:
            self._unsent.append(buffer)
            if len(self._unsent) == 1:
                asyncio.get_running_loop().call_soon(self._flush)
        await self._protocol.drain(timeout)

    def _flush(self) -> None:
        if self._unsent:
            data = b"".join(self._unsent)
            self._unsent.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    async def aclose(self) -> None:
        self._unsent.clear()
        self._transport.close()

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":  # an idle connection with data or EOF waiting was closed by the upstream
            return self._protocol.has_data()
        if info == "socket":
            return self._transport.get_extra_info("socket")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        return None


class _AsyncioBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network layer on asyncio's own transports, for plain-HTTP upstreams.

    httpcore's default goes through anyio, which on every read of a chunk enters a cancel scope, pauses and
    resumes the transport, and yields to the event loop once more even when the bytes are already there;
    and its idle-connection check polls the socket. Without it: ~0.3 ms less to the first byte and ~15 %
    less CPU per proxied request. HTTP itself is still h11's, through httpcore; TLS upstreams keep httpcore's
    default backend (``start_tls`` is not implemented here)."""

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await asyncio.wait_for(
                loop.create_connection(_UpstreamProtocol, host, port,
                                       local_addr=(local_address, 0) if local_address else None), timeout)
        except asyncio.TimeoutError:
            raise httpcore.ConnectTimeout(f"no connection to {host}:{port} within {timeout} s") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        for option in socket_options or ():
            transport.get_extra_info("socket").setsockopt(*option)
        return _UpstreamStream(transport, protocol)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _Connections:
    """The app's own connections to the upstream, through httpcore.

    A plain-HTTP upstream (a local engine: the case that must be fast) gets keep-alive connections of its own:
    ``httpcore.AsyncHTTP11Connection`` (h11, via httpcore) over ``_AsyncioBackend``, reused last-in first-out.
    One upstream origin and HTTP/1.1 only need no more bookkeeping than a list; httpcore's pool did the same
    job for any number of origins, HTTP/2 and connection caps, at ~0.1 ms per request. An https upstream goes
    through ``httpcore.AsyncConnectionPool`` (TLS verified as httpx does it).

    Neither ever reads ``$HTTP_PROXY`` (a local engine must not be sent through a proxy) nor caps the number of
    connections (a cap would queue streams behind each other).
    """

    _KEEP_IDLE = 100
    """Idle connections kept for reuse, at most (httpx's default)."""
    _KEEPALIVE_S = 5.0
    """An idle connection older than this is not reused (httpx's default)."""

    def __init__(self, scheme: bytes, host: bytes, port: int | None, timeout: float) -> None:
        self._origin = httpcore.Origin(scheme, host, port or (443 if scheme == b"https" else 80))
        self._timeout = timeout
        self._idle: list[httpcore.AsyncHTTP11Connection] = []
        self._backend = _AsyncioBackend()
        self._pool: httpcore.AsyncConnectionPool | None = None
        if scheme == b"https":
            self._pool = httpcore.AsyncConnectionPool(
                ssl_context=httpx.create_ssl_context(trust_env=False), max_connections=None,
                max_keepalive_connections=self._KEEP_IDLE, keepalive_expiry=self._KEEPALIVE_S)

    async def open(self, request: httpcore.Request) -> _Upstream:
        """Send ``request``; returns once the status and headers are in. Closing the answer releases the
        connection for reuse (when the exchange completed cleanly) or closes it."""
        if self._pool is not None:
            answer = await self._pool.handle_async_request(request)
            return _Upstream(answer.status, answer.headers, answer.aiter_stream(), answer.aclose)
        connection = await self._connection()
        try:
            answer = await connection.handle_async_request(request)
        except BaseException:
            await connection.aclose()  # no await inside: done even when cancelled
            raise

        async def release() -> None:
            await answer.aclose()  # idle again if the whole answer was read, else closed by httpcore
            if connection.is_idle() and len(self._idle) < self._KEEP_IDLE:
                self._idle.append(connection)
            elif not connection.is_closed():
                await connection.aclose()

        # The connection's own byte stream: ``answer.aiter_stream()`` only wraps it in one more generator.
        return _Upstream(answer.status, answer.headers, cast(AsyncIterable[bytes], answer.stream), release)

    async def _connection(self) -> httpcore.AsyncHTTP11Connection:
        while self._idle:
            connection = self._idle.pop()
            if connection.is_idle() and not connection.has_expired():  # expired: too old, or closed by the upstream
                return connection
            await connection.aclose()
        stream = await self._backend.connect_tcp(self._origin.host.decode("ascii"), self._origin.port,
                                                 timeout=self._timeout)
        return httpcore.AsyncHTTP11Connection(self._origin, stream, keepalive_expiry=self._KEEPALIVE_S)

    async def aclose(self) -> None:
        """Close every idle connection (and the https pool)."""
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.aclose()
        if self._pool is not None:
            await self._pool.aclose()


class ProxyApp:
    """ASGI app forwarding to one upstream; see the module docstring. Build it with ``make_app``."""

    def __init__(
        self,
        upstream: str,
        on_request: Callable[[ProxyRequest], None],
        *,
        client: httpx.AsyncClient | None = None,
        timeout: float = 600.0,
    ) -> None:
        """See ``make_app``."""
        url = httpx.URL(upstream)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"upstream must be an http(s) URL with a host, not {upstream!r}")
        base = url.copy_with(query=None, fragment=None)
        self.upstream = str(base).rstrip("/")
        self._scheme = base.raw_scheme
        self._host = base.raw_host
        self._port = base.port
        self._netloc = base.netloc
        self._prefix = base.raw_path.rstrip(b"/")
        self._origin_url = str(base.copy_with(raw_path=b"/")).rstrip("/")
        self._on_request = on_request
        self._client = client
        self._timeout = timeout
        self._connections: _Connections | None = None
        self._extensions = {"timeout": {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}}
        self._callback_failed = False

    # -- lifecycle -----------------------------------------------------------------------------

    def _get_connections(self) -> _Connections:
        if self._connections is None:  # created lazily, inside the server's event loop
            self._connections = _Connections(self._scheme, self._host, self._port, self._timeout)
        return self._connections

    async def aclose(self) -> None:
        """Close the upstream connections if this app opened them (the lifespan shutdown does this); an
        injected client is the caller's to close."""
        if self._connections is not None:
            connections, self._connections = self._connections, None
            await connections.aclose()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if self._client is None:
                    self._get_connections()  # now, not on the first request: an https context takes ~0.1 s
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # -- requests ------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point."""
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        t0 = time.perf_counter()
        wall = datetime.now(timezone.utc)
        method: str = scope["method"]
        path: str = scope["path"]
        measured = method == "POST" and is_inference_path(path)
        raw_headers: list[tuple[bytes, bytes]] = [(bytes(k), bytes(v)) for k, v in scope["headers"]]
        headers = _request_headers(raw_headers)
        state = _Exchange()
        body_done = asyncio.Event()
        body = b""
        content: bytes | AsyncIterator[bytes] | None
        try:
            if not measured and self._large_body(raw_headers):
                content = _stream_body(receive, body_done)
            else:
                body = await _read_body(receive)
                content = body or None
                body_done.set()
        except _ClientGone:
            if measured:
                self._record(StreamMeter(path, b"", None, t0, method=method), wall, None, "client disconnected")
            return
        had_length = any(k.lower() in _FRAMING for k, _ in raw_headers)
        headers = [(b"host", self._netloc), *_framed(headers, method, content, had_length)]

        # The forwarding runs in this task; a watcher cancels it if the client leaves first, which closes the
        # upstream request. A server also reports "disconnect" once the response is complete: only one that
        # comes before the last byte went out cancels anything.
        handler = asyncio.current_task()
        watch = asyncio.ensure_future(_wait_disconnect(receive, body_done))

        def client_left(watcher: asyncio.Future[None]) -> None:
            if watcher.cancelled() or watcher.exception() is not None or state.complete or state.finished:
                return
            state.client_gone = True
            if handler is not None:
                handler.cancel()

        watch.add_done_callback(client_left)
        try:
            await self._forward(scope, method, headers, content, body, t0, measured, state, send)
        except asyncio.CancelledError:
            if not state.client_gone:
                raise  # this handler itself was cancelled (server shutdown)
            uncancel = getattr(handler, "uncancel", None)  # Python 3.11+: the cancellation was ours, and handled
            if uncancel is not None:
                uncancel()
        except Exception as exc:  # a bug or a failure nobody foresaw: one line, recorded, not raised
            state.error = state.error or "proxy error"
            log.error("proxy failed on %s %s: %r", method, path, exc)
        finally:
            state.finished = True
            watch.cancel()
        if state.client_gone and state.error is None:
            state.error = "client disconnected"
        if measured:
            state.meter_now()
            meter = state.meter or StreamMeter(path, body, None, t0, method=method)
            self._record(meter, wall, state.status, state.error, state.t_end)

    @staticmethod
    def _large_body(raw_headers: list[tuple[bytes, bytes]]) -> bool:
        for k, v in raw_headers:
            name = k.lower()
            if name == b"transfer-encoding":
                return True
            if name == b"content-length":
                try:
                    return int(v) > _STREAM_UP_ABOVE
                except ValueError:
                    return True
        return False

    async def _open(self, scope: Scope, method: str, headers: list[tuple[bytes, bytes]],
                    content: bytes | AsyncIterator[bytes] | None) -> _Upstream:
        """Send the request on; returns once the upstream's status and headers are in."""
        raw_path: bytes = scope.get("raw_path") or quote(scope["path"]).encode("ascii")
        query: bytes = scope.get("query_string") or b""
        target = self._prefix + raw_path + (b"?" + query if query else b"")
        if self._client is not None:
            request = httpx.Request(method, self._origin_url + target.decode("latin-1"), headers=headers,
                                    content=content, extensions=self._extensions)
            response = await self._client.send(request, stream=True)
            return _Upstream(response.status_code, response.headers.raw, response.aiter_raw(), response.aclose)
        url = httpcore.URL(scheme=self._scheme, host=self._host, port=self._port, target=target)
        return await self._get_connections().open(
            httpcore.Request(method, url, headers=headers, content=content, extensions=self._extensions))

    async def _forward(self, scope: Scope, method: str, headers: list[tuple[bytes, bytes]],
                       content: bytes | AsyncIterator[bytes] | None, body: bytes, t0: float, measured: bool,
                       state: _Exchange, send: Send) -> None:
        path: str = scope["path"]
        try:
            response = await self._open(scope, method, headers, content)
        except _ClientGone:
            state.error = "client disconnected"
            return
        except _UPSTREAM_ERRORS as exc:
            status, state.error, detail = _upstream_failure(exc)
            state.status = status
            log.debug("upstream request failed: %r", exc)
            await _send_error(send, status, f"{detail}: {self.upstream}")
            state.t_end = time.perf_counter()
            state.complete = True
            return
        try:
            if measured:
                state.meter = StreamMeter(path, body, _header(response.headers, b"content-type"), t0, method=method,
                                          content_encoding=_header(response.headers, b"content-encoding"))
            await send({"type": "http.response.start", "status": response.status,
                        "headers": _response_headers(response.headers)})
            state.status = response.status
            async for chunk in response.chunks:
                t = time.perf_counter()
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                if measured:
                    state.meter_later(t, chunk)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            state.t_end = time.perf_counter()
            state.complete = True
        except _UPSTREAM_ERRORS as exc:
            # Mid-body: the status is sent, so end without completing the response; the server then
            # closes the connection and the client sees a cut body rather than a short "complete" one.
            state.error = "upstream timeout" if isinstance(exc, _TIMEOUTS) else "upstream error"
            log.debug("upstream failed mid-response: %r", exc)
        except OSError:  # ASGI servers may raise on send once the client is gone
            state.error = "client disconnected"
        finally:
            await response.aclose()

    def _record(self, meter: StreamMeter, wall: datetime, status: int | None, error: str | None,
                t_end: float | None = None) -> None:
        end = t_end if t_end is not None else time.perf_counter()
        event = dataclasses.replace(meter.finish(end, status, error), ts=wall)
        try:
            self._on_request(event)
        except Exception as exc:  # a failing sink must not take the proxy down; say so once, in one line
            if not self._callback_failed:
                self._callback_failed = True
                log.error("on_request callback failed: %r; later failures are not logged", exc)


def make_app(
    upstream: str,
    on_request: Callable[[ProxyRequest], None],
    *,
    client: httpx.AsyncClient | None = None,
    timeout: float = 600.0,
) -> ProxyApp:
    """The proxy as an ASGI app.

    Args:
        upstream: base URL of the engine, e.g. ``http://127.0.0.1:11434``; a path prefix is kept.
        on_request: called once per measured request (POST to an inference path) with its measurement,
            ``ts`` set to the request's arrival (UTC); runs on the event loop, so it must be quick.
        client: an httpx client to forward with (its transport and pool; requests go out through its
            ``send``, so its default headers, cookies and auth are not added); by default the app forwards
            through its own ``httpcore`` connection pool, created on first use and closed at lifespan shutdown
            (or by ``aclose``). An injected client is the caller's to close.
        timeout: seconds to wait for the upstream to connect, answer, or send the next chunk.
    """
    return ProxyApp(upstream, on_request, client=client, timeout=timeout)
