"""Poll engine HTTP endpoints over one shared ``httpx.AsyncClient``, turning every failure into a value.

An engine that is down, restarting, slow or answering garbage is the normal state of affairs for a
monitor, not an exceptional one: ``get`` never raises for anything the network or the server can do
and returns a ``PollResult`` whose ``error`` is one short line the UI can show as is. The client is
injected, so tests pass ``httpx.AsyncClient(transport=httpx.MockTransport(handler))`` and no socket
or patching is needed; the caller owns the client (create it once, close it at shutdown).

``Poller`` re-arms after each round instead of ticking on a fixed schedule (dolphie's one-shot timer):
a slow engine slows the refresh instead of piling up requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import httpx

__all__ = ["DEFAULT_MAX_BODY", "PollResult", "Poller", "get"]

DEFAULT_MAX_BODY = 8 << 20
"""Largest body accepted; /metrics of a busy vLLM is ~100 KB, so more than this is a wrong endpoint."""
_MAX_ERROR = 160
"""Longest error text kept; exception messages can embed whole responses."""


class PollResult(NamedTuple):
    """The outcome of one GET."""

    url: str
    ok: bool
    """True for a 2xx status with the whole body read (its content is for the parsers to judge)."""
    status: int | None
    """HTTP status, or None when no response arrived."""
    body: bytes
    """The (content-decoded) body; also kept for non-2xx answers, whose text often says why."""
    elapsed_s: float
    """Seconds from sending the request to the end of the body, or to the failure."""
    error: str | None
    """One line: "refused", "timeout", "reset", "dns", "unreachable", "http 503", "body too large",
    "bad body", "protocol: ...", "bad url: ...", "connect failed: ...", "network: ..."; None when ok."""


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_ERROR else text[: _MAX_ERROR - 1] + "…"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, its causes and contexts, and the members of exception groups, each once."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [c for c in (e.__cause__, e.__context__) if c is not None]
        todo += getattr(e, "exceptions", ())  # ExceptionGroup, without requiring Python 3.11


def _connect_reason(exc: httpx.ConnectError) -> str:
    # httpcore over anyio says "All connection attempts failed" and keeps the OS error as a cause.
    for e in _chain(exc):
        if isinstance(e, socket.gaierror):
            return "dns"
        if isinstance(e, ConnectionRefusedError) or getattr(e, "errno", None) == errno.ECONNREFUSED:
            return "refused"
        if getattr(e, "errno", None) in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return "unreachable"
        if isinstance(e, TimeoutError):
            return "timeout"
    text = str(exc).lower()
    if "refused" in text:
        return "refused"
    if "name or service not known" in text or "nodename nor servname" in text or "getaddrinfo" in text:
        return "dns"
    # Monitoring loopback endpoints, any other connect failure is almost always "nothing listening".
    return "refused" if not text else f"connect failed: {exc}"


def _error_text(exc: Exception) -> str:
    """Map a failure to ``PollResult.error`` (made one line and capped by the caller)."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, httpx.TimeoutException)):
        return "timeout"
    if isinstance(exc, httpx.ConnectError):
        return _connect_reason(exc)
    if isinstance(exc, httpx.DecodingError):
        return "bad body"
    if isinstance(exc, (httpx.UnsupportedProtocol, httpx.InvalidURL)):
        return f"bad url: {exc}"
    if isinstance(exc, httpx.ProtocolError):
        return f"protocol: {str(exc) or type(exc).__name__}"
    if any(isinstance(e, ConnectionResetError) or getattr(e, "errno", None) == errno.ECONNRESET for e in _chain(exc)):
        return "reset"
    return f"network: {str(exc) or type(exc).__name__}"


async def _fetch(client: httpx.AsyncClient, url: str, timeout: float, max_body: int) -> tuple[int, bytes, bool]:
    """GET ``url``; return (status, body, complete). Raises httpx/OS errors for the caller to map."""
    async with client.stream("GET", url, timeout=timeout) as response:
        declared = response.headers.get("content-length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > max_body:
            return response.status_code, b"", False  # refuse before reading a byte of it
        parts: list[bytes] = []
        size = 0
        # aiter_bytes yields decoded content, so the cap also bounds a gzip bomb.
        async for part in response.aiter_bytes():
            size += len(part)
            if size > max_body:
                return response.status_code, b"".join(parts), False
            parts.append(part)
        return response.status_code, b"".join(parts), True


async def get(client: httpx.AsyncClient, url: str, timeout: float, *, max_body: int = DEFAULT_MAX_BODY) -> PollResult:
    """GET ``url`` within ``timeout`` seconds, end to end; never raises for network or server failures.

    httpx's timeouts apply per connect/read/write step, so a server trickling a body byte by byte
    could hold a poll forever; an overall deadline (``asyncio.wait_for``) bounds the whole exchange.
    Cancellation of the calling task still propagates.
    """
    started = time.perf_counter()
    try:
        status, body, complete = await asyncio.wait_for(_fetch(client, url, timeout, max_body), timeout)
    except (httpx.HTTPError, httpx.InvalidURL, OSError, asyncio.TimeoutError) as exc:
        # OSError: ssl and socket errors that a transport lets through unwrapped.
        return PollResult(url, False, None, b"", time.perf_counter() - started, _one_line(_error_text(exc)))
    elapsed = time.perf_counter() - started
    if not complete:
        return PollResult(url, False, status, body, elapsed, "body too large")
    if not 200 <= status < 300:
        return PollResult(url, False, status, body, elapsed, f"http {status}")
    return PollResult(url, True, status, body, elapsed, None)


class Poller:
    """Poll ``urls`` in rounds: all URLs of a round concurrently, rounds never overlapping.

    The next round starts ``interval`` seconds after the previous one *finished*, so each URL has at
    most one request in flight and a slow engine stretches the period instead of queueing requests.

    Args:
        client: the shared client; not closed here.
        urls: the endpoints, e.g. Ollama ``/api/ps`` and vLLM ``/metrics`` (never ones that load a model).
        interval: seconds from the end of one round to the start of the next.
        timeout: per-request deadline, end to end.
        max_body: per-response byte cap.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        urls: Sequence[str],
        *,
        interval: float = 1.0,
        timeout: float = 2.0,
        max_body: int = DEFAULT_MAX_BODY,
    ) -> None:
        if interval < 0 or timeout <= 0 or max_body < 1:
            raise ValueError("interval must be >= 0, timeout and max_body > 0")
        self._client = client
        self.urls: tuple[str, ...] = tuple(urls)
        self.interval = interval
        self.timeout = timeout
        self.max_body = max_body
        self.rounds = 0
        """Rounds completed."""

    def __repr__(self) -> str:
        return f"Poller(urls={self.urls!r}, interval={self.interval}, timeout={self.timeout}, rounds={self.rounds})"

    async def poll_once(self, on_result: Callable[[PollResult], None]) -> None:
        """Run one round, calling ``on_result`` for each URL as its answer arrives."""
        client, timeout, cap = self._client, self.timeout, self.max_body
        tasks = [asyncio.ensure_future(get(client, url, timeout, max_body=cap)) for url in self.urls]
        try:
            for next_done in asyncio.as_completed(tasks):
                on_result(await next_done)
        finally:
            # Only reached with tasks pending if on_result raised or we were cancelled.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        self.rounds += 1

    async def run(self, on_result: Callable[[PollResult], None], stop: asyncio.Event) -> None:
        """Poll until ``stop`` is set; a round in progress when it is set is cancelled.

        ``on_result`` runs on the event loop, one call at a time; an exception from it ends ``run``.
        """
        while not stop.is_set():
            round_task = asyncio.ensure_future(self.poll_once(on_result))
            stop_task = asyncio.ensure_future(stop.wait())
            try:
                await asyncio.wait({round_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop_task.cancel()
                if not round_task.done():
                    round_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await round_task  # re-raises on_result's exception, if any
            if stop.is_set():
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)
