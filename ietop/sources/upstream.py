"""Connections from `ietop proxy` to a plain-HTTP upstream: HTTP/1.1 on asyncio, answers parsed by httptools.

Why not an HTTP client library: through ``httpx.AsyncClient`` the proxy added ~2.7 ms at p50 to every
request (bench/proxy_overhead.py, 2-core VM); through ``httpcore`` on asyncio transports of our own it still
added ~1-1.7 ms (by the load on the machine), and parsing the upstream's answer with h11 alone took ~0.3 ms
of CPU for a 10-chunk SSE stream where httptools (llhttp, the parser uvicorn already runs in front of the
proxy) takes ~8 µs. A proxy to one origin needs little of a client: write the request, parse the answer,
keep the connection when the exchange ended cleanly. The HTTP parsing stays in a well-kept parser; what is
left here is connection bookkeeping. An https upstream does not come here: ``proxy_app`` sends it through
httpx.

The rules:

- a connection is kept for the next request only after an exchange that ended cleanly: the whole request
  sent, the whole answer received, both sides willing to keep it open. A body not read to its end, an
  answer cut or unparsable, bytes after the answer close it;
- an idle connection that receives EOF or stray bytes is closed, not reused. One the upstream closes just
  as a request goes out on it (its keep-alive timer firing at that moment) makes that request fail before a
  byte of answer came back: such a request is sent once more on a new connection when its body is in
  memory. A body streamed from the client cannot be sent twice, so it always gets a new connection;
- idle connections are kept at most ``KEEPALIVE_S``, the last used first (the least likely to be stale).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import cast

import httptools

from ietop.sources.proxy_messages import ends_at_eof, request_head

__all__ = ["Connections", "UpstreamAnswer", "UpstreamDown", "UpstreamError", "UpstreamTimeout"]

log = logging.getLogger("ietop.proxy")

Headers = list[tuple[bytes, bytes]]

_READ_BUFFER_LIMIT = 1 << 18
"""Answer bytes received but not yet taken beyond which the socket stops being read (a slow client)."""
_ONE_WRITE_BELOW = 1 << 16
"""Request bodies smaller than this go out in one write with the head: one packet, one wake-up upstream."""


class UpstreamError(Exception):
    """The upstream closed or reset the connection, or answered with something that is not HTTP."""


class UpstreamDown(UpstreamError):
    """No connection to the upstream could be made."""


class UpstreamTimeout(UpstreamError):
    """No connection, answer or next chunk within the timeout."""


@dataclasses.dataclass(slots=True)
class UpstreamAnswer:
    """The upstream's answer, whichever client got it: status and headers in, the body still to read."""

    status: int
    headers: Headers
    chunks: AsyncIterable[bytes]
    """The body's bytes as the upstream sent them (not decompressed)."""
    aclose: Callable[[], Awaitable[None]]
    """Done with the answer: the connection is kept for reuse or closed. Never suspends, so a cancelled
    handler still completes it."""
    ended: Callable[[], bool] = lambda: False
    """Whether the whole answer is in: the chunk just read from ``chunks`` is then the last one."""
    sent: float | None = None
    """``time.perf_counter()`` when the whole request had been written (None: the client does not tell)."""


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection to the upstream, one exchange at a time. Also the httptools callbacks."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        self._parser: httptools.HttpResponseParser | None = None
        """The current exchange's parser; None while idle."""
        self._waiter: asyncio.Future[None] | None = None
        self._drain: asyncio.Future[None] | None = None
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._paused = False
        self.status = 0
        self.headers: Headers = []
        self._head_only = False
        self._headers_done = False
        self._complete = False
        self._keep_alive = False
        self._sent = False
        self._error: UpstreamError | None = None
        self.closed = False
        """EOF or connection lost: nothing more will come."""
        self.answered = False
        """A byte came back for the current request."""
        self.idle_since = 0.0

    # -- asyncio --------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's

    def data_received(self, data: bytes) -> None:
        parser = self._parser
        if parser is None:  # nothing may come while idle: the upstream is closing this connection, or confused
            self.close()
            return
        self.answered = True
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(UpstreamError("upstream switched protocols"))
        except httptools.HttpParserError as exc:
            self._fail(UpstreamError(f"invalid HTTP from upstream: {exc}"))
        if self._buffered > _READ_BUFFER_LIMIT and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        self._ended("upstream closed the connection")
        return False  # and close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended(f"connection to upstream lost: {exc}" if exc else "upstream closed the connection")
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)  # the writer goes on to find the connection closed

    def pause_writing(self) -> None:
        if self._drain is None:
            self._drain = self._loop.create_future()

    def resume_writing(self) -> None:
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    def _ended(self, why: str) -> None:
        self.closed = True
        if self._parser is not None and not self._complete:
            if self._headers_done and ends_at_eof(self.headers):
                self._complete = True  # a body with neither a length nor chunks ends where the connection does
            else:
                self._fail(UpstreamError(why + (" before the end of its answer" if self.answered else
                                                " without answering")))
        self._wake()

    # -- httptools ------------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._complete:  # bytes after the answer: a confused upstream; do not reuse this connection
            self._keep_alive = False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        assert self._parser is not None
        status = self._parser.get_status_code()
        if status < 200:  # 1xx (103 Early Hints, ...): ASGI cannot forward them; the real answer follows
            self.headers = []
            return
        self.status = status
        self._headers_done = True
        if self._head_only:  # llhttp cannot be told that a HEAD answer has no body: it ends here
            self._complete = True
            self._keep_alive = self._parser.should_keep_alive()
        self._wake()

    def on_body(self, body: bytes) -> None:
        if self._complete:  # a body after a HEAD answer: a confused upstream
            self._keep_alive = False
            return
        self._chunks.append(body)
        self._buffered += len(body)
        self._wake()

    def on_message_complete(self) -> None:
        if not self._headers_done or self._complete:  # the end of a 1xx answer, or of a HEAD one
            return
        assert self._parser is not None
        self._complete = True
        self._keep_alive = self._parser.should_keep_alive()
        self._wake()

    # -- one exchange ---------------------------------------------------------------------------

    def _fail(self, error: UpstreamError) -> None:
        if self._error is None:
            self._error = error
        self._wake()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _wait(self, timeout: float, what: str) -> None:
        """Until a callback above has news; ``UpstreamTimeout`` after ``timeout`` s without."""
        waiter = self._waiter = self._loop.create_future()
        timer = self._loop.call_later(timeout, _expire, waiter, f"{what} within {timeout:g} s")
        try:
            await waiter
        finally:
            timer.cancel()

    async def send(self, head: bytes, body: bytes | AsyncIterator[bytes] | None, chunked: bool, head_only: bool,
                   timeout: float) -> None:
        """Start an exchange: write the request (``chunked``: frame a streamed body in chunks)."""
        self._parser = httptools.HttpResponseParser(self)
        self.headers, self.status, self._head_only = [], 0, head_only
        self._headers_done = self._complete = self._keep_alive = self._sent = False
        self.answered = False
        transport = self.transport
        if self.closed or transport is None or transport.is_closing():
            raise UpstreamError("upstream closed the connection")
        if body is None or isinstance(body, bytes):
            if body and len(body) >= _ONE_WRITE_BELOW:
                transport.write(head)
                transport.write(body)
            else:
                transport.write(head + body if body else head)
        else:
            transport.write(head)
            async for part in body:
                if self.closed or self._error is not None:  # it answered or left already: the rest is moot
                    return
                transport.write(b"%x\r\n%b\r\n" % (len(part), part) if chunked else part)
                await self._drained(timeout)
            if chunked:
                transport.write(b"0\r\n\r\n")
        await self._drained(timeout)
        self._sent = True

    async def _drained(self, timeout: float) -> None:
        drain = self._drain
        if drain is not None:
            timer = self._loop.call_later(timeout, _expire, drain, f"upstream read no more within {timeout:g} s")
            try:
                await asyncio.shield(drain)
            finally:
                timer.cancel()

    async def head(self, timeout: float) -> None:
        """Wait for the answer's status and headers."""
        while not self._headers_done:
            if self._error is not None:
                raise self._error
            await self._wait(timeout, "no answer from upstream")

    async def body(self, timeout: float) -> AsyncIterator[bytes]:
        """The answer's body, as it arrives: what came in together is handed on together."""
        while True:
            chunks = self._chunks
            if chunks:
                data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
                chunks.clear()
                self._buffered = 0
                if self._paused and self.transport is not None:
                    self._paused = False
                    self.transport.resume_reading()
                yield data
            elif self._complete:
                return
            elif self._error is not None:
                raise self._error
            else:
                await self._wait(timeout, "no more of the answer from upstream")

    def ended(self) -> bool:
        """The whole answer has been received, and all of it taken."""
        return self._complete and not self._chunks

    def reusable(self) -> bool:
        """The exchange ended cleanly and both sides keep the connection open."""
        return (self._complete and self._keep_alive and self._sent and self._error is None and not self.closed
                and self.transport is not None and not self.transport.is_closing())

    def make_idle(self) -> None:
        self._parser = None
        self._chunks = []
        self._buffered = 0
        if self._paused and self.transport is not None:  # keep reading, or an EOF while idle goes unseen
            self._paused = False
            self.transport.resume_reading()
        self.idle_since = time.monotonic()

    def close(self) -> None:
        self.closed = True
        self._parser = None
        if self.transport is not None:
            self.transport.close()


def _expire(future: asyncio.Future[None], message: str) -> None:
    if not future.done():
        future.set_exception(UpstreamTimeout(message))


class Connections:
    """The app's keep-alive connections to one plain-HTTP upstream (see the module docstring).

    No cap on their number (a cap would queue streams behind each other) and no ``$HTTP_PROXY`` (a local
    engine must not be sent through a proxy).
    """

    KEEP_IDLE = 100
    """Idle connections kept for reuse, at most (httpx's default)."""
    KEEPALIVE_S = 4.0
    """An idle connection older than this is closed instead of reused: under the 5 s after which uvicorn
    (vLLM's server) closes one, so that the race the retry in ``open`` covers stays rare."""

    def __init__(self, host: str, port: int, timeout: float, while_waiting: Callable[[], None] | None = None) -> None:
        """Connections to ``host:port``; ``while_waiting`` is called each time a request has been written and
        its answer is awaited: the caller's moment for work that can wait."""
        self._host = host
        self._port = port
        self._timeout = timeout
        self._while_waiting = while_waiting
        self._idle: list[_Connection] = []

    async def open(self, method: str, target: bytes, headers: Headers,
                   body: bytes | AsyncIterator[bytes] | None) -> UpstreamAnswer:
        """Send the request; returns once the answer's status and headers are in.

        ``headers`` are sent as given: they must hold ``Host`` and the body's framing (a streamed body is sent
        in chunks when they say ``Transfer-Encoding``).
        """
        head = request_head(method, target, headers)
        streamed = not (body is None or isinstance(body, bytes))
        chunked = streamed and any(k.lower() == b"transfer-encoding" for k, _ in headers)
        connection = None if streamed else self._reuse()
        if connection is not None:
            try:
                return await self._exchange(connection, head, body, chunked, method == "HEAD")
            except UpstreamError as exc:
                if connection.answered or isinstance(exc, UpstreamTimeout):
                    raise
                log.debug("kept connection to the upstream was closed (%s): sending again on a new one", exc)
        connection = await self._connect()
        return await self._exchange(connection, head, body, chunked, method == "HEAD")

    async def _exchange(self, connection: _Connection, head: bytes, body: bytes | AsyncIterator[bytes] | None,
                        chunked: bool, head_only: bool) -> UpstreamAnswer:
        try:
            await connection.send(head, body, chunked, head_only, self._timeout)
            sent = time.perf_counter()
            if self._while_waiting is not None:
                self._while_waiting()
            await connection.head(self._timeout)
        except BaseException:
            connection.close()
            raise
        return UpstreamAnswer(connection.status, connection.headers, connection.body(self._timeout),
                              functools.partial(self._release, connection), connection.ended, sent)

    async def _release(self, connection: _Connection) -> None:
        if connection.reusable() and len(self._idle) < self.KEEP_IDLE:
            connection.make_idle()
            self._idle.append(connection)
        else:
            connection.close()

    def _reuse(self) -> _Connection | None:
        idle = self._idle
        if not idle:
            return None
        now = time.monotonic()
        if now - idle[0].idle_since > self.KEEPALIVE_S:  # the oldest, one per request: none lingers for long
            idle.pop(0).close()
        while idle:
            connection = idle.pop()
            if not connection.closed and now - connection.idle_since <= self.KEEPALIVE_S:
                return connection
            connection.close()
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, connection = await asyncio.wait_for(
                loop.create_connection(lambda: _Connection(loop), self._host, self._port), self._timeout)
        except asyncio.TimeoutError:
            raise UpstreamTimeout(f"no connection to {self._host}:{self._port} within {self._timeout:g} s") from None
        except OSError as exc:
            raise UpstreamDown(str(exc) or type(exc).__name__) from exc
        return connection

    def close(self) -> None:
        """Close every idle connection (those in use close when their answer is done with)."""
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
