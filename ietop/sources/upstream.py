"""Connections from `ietop proxy` to its upstream engine.

Why this module exists: with an ``httpx.AsyncClient`` in front of the upstream the proxy added ~2.7 ms at
p50 to every request (bench/proxy_overhead.py on a 2-core VM), most of it in httpx's request and response
models and in httpcore's pool and anyio network layer, none of which a pass-through proxy needs. Here a
plain-HTTP upstream (a local engine: the case that must be fast) is spoken to through ``httpcore`` (h11)
over connections of our own on asyncio's transports; an https upstream keeps httpcore's own pool and default
network backend, which is not on any hot path that matters here.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import importlib.util
import sys
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from typing import Any, TypeVar, cast

import httpcore
import httpx

__all__ = ["Connections", "UpstreamAnswer"]

if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:  # pragma: no cover
    # httpcore runs `import sniffio` several times per request to learn the async library and falls back to
    # asyncio when it is missing. A failed import is not cached, so each one searches sys.path again:
    # ~0.4 ms each, more than the whole rest of the proxy's per-request work. Cache the miss (a None entry
    # makes the import fail at once, exactly as it would have).
    sys.modules["sniffio"] = None  # type: ignore[assignment]


@dataclasses.dataclass(slots=True)
class UpstreamAnswer:
    """The upstream's answer, whichever client got it: status and headers in, the body still to read."""

    status: int
    headers: list[tuple[bytes, bytes]]
    chunks: AsyncIterable[bytes]
    """The body's bytes as the upstream sent them (not decompressed)."""
    aclose: Callable[[], Awaitable[None]]


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


class Connections:
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

    async def open(self, request: httpcore.Request) -> UpstreamAnswer:
        """Send ``request``; returns once the status and headers are in. Closing the answer releases the
        connection for reuse (when the exchange completed cleanly) or closes it."""
        if self._pool is not None:
            answer = await self._pool.handle_async_request(request)
            return UpstreamAnswer(answer.status, answer.headers, answer.aiter_stream(), answer.aclose)
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
        return UpstreamAnswer(answer.status, answer.headers, cast(AsyncIterable[bytes], answer.stream), release)

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
