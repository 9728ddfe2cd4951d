"""The ASGI app of `ietop proxy`: forward every request to one upstream engine, byte for byte, and measure
the inference ones on the way.

Why a hand-written ASGI callable rather than a framework: a proxy must not parse, re-encode, buffer or
decompress what it forwards, and every framework layer is one more place where that can happen. The
response body is read as the upstream sent it (compressed or not: nothing decodes it) and each chunk is
handed to the server as soon as it arrives; the measuring (``parsers.api.stream.StreamMeter``) sees the same
chunk only after it has been sent on, and a finished request is measured to its end and recorded when the
proxy next waits on the upstream (``ProxyApp._later``), so neither delays a client.

A plain-HTTP upstream is spoken to through ``upstream.Connections`` (see there why not an HTTP client
library); an https one, or any through an injected ``httpx.AsyncClient`` (``make_app(client=...)``: tests,
in-process transports), through httpx, whose ``send`` adds nothing of the client's own. Either way the
headers sent are built by ``proxy_messages`` (``Host`` the upstream's, framing for what is actually sent).

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
import functools
import importlib.util
import logging
import sys
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timezone
from urllib.parse import quote

import httpx

from ietop.sources.proxy_body import BodyFields, noting_end
from ietop.sources.proxy_exchange import Exchange
from ietop.sources.proxy_messages import (
    ASGIApp,
    ClientGone,
    Receive,
    Scope,
    Send,
    read_upto,
    request_headers,
    response_headers,
    send_error,
    stream_body,
    wait_disconnect,
)
from ietop.sources.upstream import Connections, UpstreamAnswer, UpstreamDown, UpstreamError, UpstreamTimeout
from parsers.api.stream import is_inference_path
from parsers.events import ProxyRequest

__all__ = ["ASGIApp", "ProxyApp", "make_app"]

log = logging.getLogger("ietop.proxy")

if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:  # pragma: no cover
    # httpcore (under httpx) runs `import sniffio` several times per request to learn the async library and
    # falls back to asyncio when it is missing. A failed import is not cached, so each one searches sys.path
    # again: ~0.4 ms each. Cache the miss (a None entry makes the import fail at once, as it would have).
    sys.modules["sniffio"] = None  # type: ignore[assignment]

_UPSTREAM_ERRORS = (httpx.HTTPError, UpstreamError)
"""What a failing upstream raises: ours (plain http) or httpx's (https, or an injected client)."""
_TIMEOUTS = (httpx.TimeoutException, UpstreamTimeout)
_CONNECT_ERRORS = (httpx.ConnectError, UpstreamDown)
_BOOKKEEPING_WAIT_S = 0.005
"""The longest a finished request's measuring waits for the proxy to be idle (see ``ProxyApp._later``)."""
_WATCH_AFTER_S = 0.02
"""How long a request goes before its client is watched for leaving (see ``ProxyApp._http``)."""
_STREAM_UP_ABOVE = 1 << 20
"""Request bodies larger than this (Ollama blob uploads are GBs, a prompt can be 100 MB) are streamed to the
upstream as they arrive instead of read first; a measured one's ``model`` and ``stream`` are picked out on the
way (``proxy_body.BodyFields``). Smaller ones are read whole: sent with their length, in one write."""


def _upstream_failure(exc: Exception) -> tuple[int, str, str]:
    """(status for the client, recorded error, detail for the body) for a failure before any response."""
    if isinstance(exc, _TIMEOUTS):
        return 504, "upstream timeout", "upstream timeout"
    if isinstance(exc, _CONNECT_ERRORS):
        return 502, "upstream down", "upstream down (connection failed)"
    return 502, "upstream error", f"upstream error ({exc if isinstance(exc, UpstreamError) else type(exc).__name__})"


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
        self._netloc = base.netloc
        self._prefix = base.raw_path.rstrip(b"/")
        self._origin_url = str(base.copy_with(raw_path=b"/")).rstrip("/")
        self._on_request = on_request
        self._client = client
        self._own_client = False
        self._timeout = timeout
        # An https upstream is not a local engine's usual set-up: it goes through httpx (TLS verified as httpx
        # does it) at httpx's cost per request, and plain http through our own connections.
        plain = url.scheme == "http" and client is None
        self._connections = Connections(base.host, base.port or 80, timeout, self._do_jobs) if plain else None
        self._extensions = {"timeout": {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}}
        self._callback_failed = False
        self._jobs: list[Callable[[], None]] = []
        self._jobs_timer: asyncio.TimerHandle | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None:
            # Created lazily, inside the server's event loop. No env proxies (a local engine must not be sent
            # through $HTTP_PROXY) and no connection cap (a cap would queue streams behind each other).
            self._client = httpx.AsyncClient(timeout=self._timeout, trust_env=False, follow_redirects=False,
                                             limits=httpx.Limits(max_connections=None, max_keepalive_connections=100))
            self._own_client = True
        return self._client

    async def aclose(self) -> None:
        """Close the upstream connections this app opened (the lifespan shutdown does this); an injected
        client is the caller's to close. Measurements still pending are recorded first."""
        self._do_jobs()
        if self._connections is not None:
            self._connections.close()
        if self._own_client and self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if self._connections is None:
                    self._get_client()  # now, not on the first request: its SSL context takes ~0.1 s
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
        state = Exchange(path, method, t0)
        body_done = asyncio.Event()
        content: bytes | AsyncIterator[bytes] | None
        try:
            first, whole = await read_upto(receive, _STREAM_UP_ABOVE)
            if whole:
                state.body, content = first, first or None
                body_done.set()
            else:
                fields = state.fields = BodyFields() if measured else None
                content = stream_body(receive, body_done, first, None if fields is None else fields.feed)
        except ClientGone:
            if measured:
                state.error = "client disconnected"
                self._later(functools.partial(self._record, state, wall, time.perf_counter()))
            return
        headers = request_headers(raw_headers, self._netloc, method, content)

        # The forwarding runs in this task; a watcher cancels it if the client leaves first, which closes the
        # upstream request. A server also reports "disconnect" once the response is complete: only one that
        # comes before the last byte went out cancels anything. The watcher starts after _WATCH_AFTER_S: an
        # answer that comes sooner (most API calls) never costs a task, and a client leaving is noticed at
        # most that much later.
        handler = asyncio.current_task()
        watch: asyncio.Future[None] | None = None

        def client_left(watcher: asyncio.Future[None]) -> None:
            if watcher.cancelled() or watcher.exception() is not None or state.complete or state.finished:
                return
            state.client_gone = True
            if handler is not None:
                handler.cancel()

        def start_watching() -> None:
            nonlocal watch
            watch = asyncio.ensure_future(wait_disconnect(receive, body_done))
            watch.add_done_callback(client_left)

        timer = asyncio.get_running_loop().call_later(_WATCH_AFTER_S, start_watching)
        try:
            await self._forward(scope, headers, content, measured, state, send)
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
            timer.cancel()
            if watch is not None:
                watch.cancel()
        if state.client_gone and state.error is None:
            state.error = "client disconnected"
        if measured:
            t_end = state.t_end if state.t_end is not None else time.perf_counter()
            self._later(functools.partial(self._record, state, wall, t_end))

    async def _open(self, scope: Scope, method: str, headers: list[tuple[bytes, bytes]],
                    content: bytes | AsyncIterator[bytes] | None) -> UpstreamAnswer:
        """Send the request on; returns once the upstream's status and headers are in."""
        raw_path: bytes = scope.get("raw_path") or quote(scope["path"]).encode("ascii")
        query: bytes = scope.get("query_string") or b""
        target = self._prefix + raw_path + (b"?" + query if query else b"")
        if self._connections is not None:
            return await self._connections.open(method, target, headers, content)
        ended: list[float] = []
        if content is not None and not isinstance(content, bytes):
            content = noting_end(content, ended)
        else:
            ended.append(time.perf_counter())  # a body in memory goes out at once
        request = httpx.Request(method, self._origin_url + target.decode("latin-1"), headers=headers,
                                content=content, extensions=self._extensions)
        response = await self._get_client().send(request, stream=True)
        return UpstreamAnswer(response.status_code, response.headers.raw, response.aiter_raw(), response.aclose,
                              sent=ended[-1] if ended else None)

    async def _forward(self, scope: Scope, headers: list[tuple[bytes, bytes]],
                       content: bytes | AsyncIterator[bytes] | None, measured: bool, state: Exchange,
                       send: Send) -> None:
        try:
            response = await self._open(scope, state.method, headers, content)
        except ClientGone:
            state.error = "client disconnected"
            return
        except _UPSTREAM_ERRORS as exc:
            status, state.error, detail = _upstream_failure(exc)
            state.status = status
            log.debug("upstream request failed: %r", exc)
            await send_error(send, status, f"{detail}: {self.upstream}")
            state.t_end = time.perf_counter()
            state.complete = True
            return
        try:
            state.answer_headers, state.t_sent = response.headers, response.sent
            await send({"type": "http.response.start", "status": response.status,
                        "headers": response_headers(response.headers)})
            state.status = response.status
            ended = response.ended
            last = False
            async for chunk in response.chunks:
                t = time.perf_counter()
                # The answer's last bytes go out with the end of the response: one write, one wake-up for
                # the client instead of two.
                last = ended()
                await send({"type": "http.response.body", "body": chunk, "more_body": not last})
                if measured:
                    state.meter_later(t, chunk, last)
            if not last:
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

    def _later(self, job: Callable[[], None]) -> None:
        """Run ``job`` (measuring and recording a finished request) while the proxy waits on the upstream
        for a next request, or after ``_BOOKKEEPING_WAIT_S``, whichever comes first.

        Done at once, it held up a request that came right after: a client sending its next request as soon
        as it has the last byte found the proxy still busy with the previous one (~0.2 ms a request, most
        of it StreamMeter); waiting for the upstream, the proxy has nothing else to do."""
        self._jobs.append(job)
        if self._jobs_timer is None:
            self._jobs_timer = asyncio.get_running_loop().call_later(_BOOKKEEPING_WAIT_S, self._do_jobs)

    def _do_jobs(self) -> None:
        if self._jobs_timer is not None:
            self._jobs_timer.cancel()
            self._jobs_timer = None
        jobs, self._jobs = self._jobs, []
        for job in jobs:
            try:
                job()
            except Exception as exc:  # a bug in measuring: one line, and the proxy goes on
                log.error("measuring a request failed: %r", exc)

    def _record(self, state: Exchange, wall: datetime, t_end: float) -> None:
        event = state.meter_now().finish(t_end, state.status, state.error)
        # The meter times from the request sent upstream (Exchange.meter_now); e2e stays the whole exchange
        # from its arrival, which is also what dates the request's end (ts + e2e) for the pipeline.
        event = dataclasses.replace(event, ts=wall, e2e_s=t_end - state.t0,
                                    bytes_up=event.bytes_up if state.fields is None else state.fields.size)
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
            ``ts`` set to the request's arrival (UTC), within ~5 ms of its end (``ProxyApp._later``); runs on
            the event loop, so it must be quick.
        client: an httpx client to forward with (its transport and pool; requests go out through its
            ``send``, so its default headers, cookies and auth are not added); by default the app forwards
            through its own connections (``upstream.Connections``), or for an https upstream its own httpx
            client, closed at lifespan shutdown (or by ``aclose``). An injected client is the caller's to close.
        timeout: seconds to wait for the upstream to connect, answer, or send the next chunk.
    """
    return ProxyApp(upstream, on_request, client=client, timeout=timeout)
