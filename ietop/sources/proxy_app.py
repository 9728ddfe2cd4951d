"""The ASGI app of `ietop proxy`: forward every request to one upstream engine, byte for byte, and measure
the inference ones on the way.

Why a hand-written ASGI callable rather than a framework: a proxy must not parse, re-encode, buffer or
decompress what it forwards, and every framework layer is one more place where that can happen. The
response is read with ``aiter_raw()`` (bytes as the upstream sent them, compressed or not) and each chunk
is handed to the server as soon as it arrives; the measuring (``parsers.stream.StreamMeter``) sees the
same chunk only after it has been sent on, so it never delays the client.

What the client sees when things go wrong, and what gets recorded (``ProxyRequest.error``):

- upstream refuses or cannot be reached: 502 and a one-line JSON body; "upstream down";
- upstream gives no answer within ``timeout`` (connect, or between two chunks): 504 before the headers;
  after them the connection is cut, so the client can tell the body is incomplete; "upstream timeout";
- the client goes away (ASGI ``http.disconnect``, watched for while the upstream works): the upstream
  request is closed at once, which is how engines learn to stop generating; "client disconnected".
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import logging
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from datetime import datetime, timezone
from typing import Any

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
_STREAM_UP_ABOVE = 1 << 20
"""Request bodies larger than this on unmeasured paths (Ollama blob uploads are GBs) are streamed to the
upstream instead of read first. Measured requests are read whole: their body is a prompt, and the meter
needs its ``model`` and ``stream`` fields."""


class _ClientGone(Exception):
    """The client disconnected while its request body was being forwarded."""


@dataclasses.dataclass(slots=True)
class _Exchange:
    """What one forwarded request has produced so far; shared by the forwarding and watching tasks."""

    meter: StreamMeter | None = None
    status: int | None = None
    error: str | None = None
    complete: bool = False
    """The whole response has been handed to the server."""
    t_end: float | None = None
    """When the last byte was handed to the server, or the exchange failed."""


def _connection_tokens(headers: list[tuple[bytes, bytes]]) -> set[bytes]:
    """Header names listed in ``Connection`` (hop-by-hop by declaration)."""
    return {t.strip().lower() for k, v in headers if k.lower() == b"connection" for t in v.split(b",") if t.strip()}


def _request_headers(raw: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    drop = _NOT_FORWARDED_UP | _connection_tokens(raw)
    return [(k, v) for k, v in raw if k.lower() not in drop]


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


def _upstream_failure(exc: httpx.HTTPError) -> tuple[int, str, str]:
    """(status for the client, recorded error, detail for the body) for a failure before any response."""
    if isinstance(exc, httpx.TimeoutException):
        return 504, "upstream timeout", "upstream timeout"
    if isinstance(exc, httpx.ConnectError):
        return 502, "upstream down", "upstream down (connection failed)"
    return 502, "upstream error", f"upstream error ({type(exc).__name__})"


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
        self.upstream = str(url.copy_with(query=None, fragment=None)).rstrip("/")
        self._on_request = on_request
        self._client = client
        self._own_client = client is None
        self._timeout = httpx.Timeout(timeout)
        self._callback_failed = False

    # -- lifecycle -----------------------------------------------------------------------------

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None:
            # Created lazily, inside the server's event loop. No env proxies (a local engine must not be
            # sent through $HTTP_PROXY) and no connection cap (a cap would queue streams behind each other).
            self._client = httpx.AsyncClient(
                timeout=self._timeout,
                trust_env=False,
                follow_redirects=False,
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=100),
            )
        return self._client

    async def aclose(self) -> None:
        """Close the upstream client if this app created it (the lifespan shutdown does this)."""
        if self._own_client and self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._get_client()  # now, not on the first request: building its SSL context takes ~0.1 s
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

        forward = asyncio.ensure_future(self._forward(scope, method, headers, content, body, t0, measured, state, send))
        watch = asyncio.ensure_future(_wait_disconnect(receive, body_done))
        try:
            done, _ = await asyncio.wait({forward, watch}, return_when=asyncio.FIRST_COMPLETED)
            # A server also reports "disconnect" once the response is complete: only a disconnect that
            # comes before the last byte went out cancels the upstream request.
            if forward not in done and not state.complete:
                forward.cancel()
                if state.error is None:
                    state.error = "client disconnected"
        finally:
            watch.cancel()
            if not forward.done() and not state.complete:
                forward.cancel()  # this handler itself was cancelled (server shutdown)
            for task in (forward, watch):
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                except Exception as exc:  # a bug or a failure nobody foresaw: one line, recorded, not raised
                    state.error = state.error or "proxy error"
                    log.error("proxy failed on %s %s: %r", method, path, exc)
        if measured:
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

    def _build(self, scope: Scope, method: str, headers: list[tuple[bytes, bytes]],
               content: bytes | AsyncIterator[bytes] | None) -> httpx.Request:
        client = self._get_client()
        target = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        query = scope.get("query_string") or b""
        url = self.upstream + target + ("?" + query.decode("latin-1") if query else "")
        request = client.build_request(method, url, headers=headers, content=content, timeout=self._timeout)
        # The client's own default headers (Accept, Accept-Encoding, User-Agent) must not be added to a
        # request that did not carry them: an added Accept-Encoding could make the upstream compress.
        sent = {k.decode("latin-1").lower() for k, _ in headers}
        for name in client.headers:
            if name.lower() not in sent and name.lower() != "connection" and name in request.headers:
                del request.headers[name]
        return request

    async def _forward(self, scope: Scope, method: str, headers: list[tuple[bytes, bytes]],
                       content: bytes | AsyncIterator[bytes] | None, body: bytes, t0: float, measured: bool,
                       state: _Exchange, send: Send) -> None:
        path: str = scope["path"]
        try:
            response = await self._get_client().send(self._build(scope, method, headers, content), stream=True)
        except _ClientGone:
            state.error = "client disconnected"
            return
        except httpx.HTTPError as exc:
            status, state.error, detail = _upstream_failure(exc)
            state.status = status
            log.debug("upstream request failed: %r", exc)
            await _send_error(send, status, f"{detail}: {self.upstream}")
            state.t_end = time.perf_counter()
            state.complete = True
            return
        try:
            if measured:
                state.meter = StreamMeter(path, body, response.headers.get("content-type"), t0, method=method,
                                          content_encoding=response.headers.get("content-encoding"))
            meter = state.meter
            await send({"type": "http.response.start", "status": response.status_code,
                        "headers": _response_headers(response.headers.raw)})
            state.status = response.status_code
            async for chunk in response.aiter_raw():
                t = time.perf_counter()
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                if meter is not None:
                    meter.feed(t, chunk)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            state.t_end = time.perf_counter()
            state.complete = True
        except httpx.HTTPError as exc:
            # Mid-body: the status is sent, so end without completing the response; the server then
            # closes the connection and the client sees a cut body rather than a short "complete" one.
            state.error = "upstream timeout" if isinstance(exc, httpx.TimeoutException) else "upstream error"
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
        client: the httpx client to forward with (its transport, pool and defaults); by default one is
            created on first use and closed at lifespan shutdown (or by ``aclose``).
        timeout: seconds to wait for the upstream to connect, answer, or send the next chunk.
    """
    return ProxyApp(upstream, on_request, client=client, timeout=timeout)
