"""Poll engine HTTP endpoints over one shared ``httpx.AsyncClient``, turning every failure into a value.

An engine that is down, restarting, slow or answering garbage is the normal state of affairs for a
monitor, not an exceptional one: ``get`` never raises for anything the network or the server can do
and returns a ``PollResult`` whose ``error`` is one short line the UI can show as is. The client is
injected, so tests pass ``httpx.AsyncClient(transport=httpx.MockTransport(handler))`` and no socket
or patching is needed; the caller owns the client (create it once, close it at shutdown).

``Poller`` re-arms after each round instead of ticking on a fixed schedule (dolphie's one-shot timer):
a slow engine slows the refresh instead of piling up requests. With ``backoff_max`` it also polls an
address where nothing listens less and less often (see ``Poller``), which is most of an idle monitor's CPU.
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

__all__ = ["DEFAULT_MAX_BODY", "PollResult", "Poller", "get", "get_once"]

DEFAULT_MAX_BODY = 8 << 20
"""Largest body accepted; /metrics of a busy vLLM is ~100 KB, so more than this is a wrong endpoint."""
_MAX_ERROR = 160
"""Longest error text kept; exception messages can embed whole responses."""
BACKOFF_AFTER = 3
"""Rounds in a row in which nothing listened at an address before ``Poller`` polls it less often."""
NOT_LISTENING = frozenset({"refused", "unreachable"})
"""Errors that say no request reached any server: polling such an address less often misses nothing."""


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


class _Origin:
    """The URLs of one scheme://host:port, and when to poll them next (on the poller's clock)."""

    __slots__ = ("due", "error", "failures", "urls")

    def __init__(self, urls: list[str]) -> None:
        self.urls = urls
        self.due = 0.0
        self.failures = 0
        """Rounds in a row that ended in ``error``, one of NOT_LISTENING."""
        self.error: str | None = None


def _origin_of(url: str) -> str:
    return "/".join(url.split("/", 3)[:3])


class Poller:
    """Poll ``urls`` in rounds: all URLs of a round concurrently, rounds never overlapping.

    The next round starts ``interval`` seconds after the previous one *finished*, so each URL has at
    most one request in flight and a slow engine stretches the period instead of queueing requests.

    Backoff (``backoff_max`` > 0): once every URL of an address (scheme://host:port) failed with the same
    NOT_LISTENING error for BACKOFF_AFTER rounds in a row, that address sits out rounds: it is tried again
    2 x ``interval`` after the round, then 4 x, 8 x..., never more than ``backoff_max`` seconds. A try is a
    GET of its first URL only; the same error again is not reported (its last BACKOFF_AFTER results said
    so already). Anything else, an answer or another error, is reported, its other URLs are polled in the
    same round, and the address is back to every ``interval`` at once. So an engine that starts listening
    is seen within ``backoff_max`` seconds, plus at most ``timeout`` when a round is in progress then.
    Addresses that answer are polled every ``interval`` as without backoff; the loop sleeps until the next
    address is due, so three refusing engines wake it once per ``backoff_max``.

    Args:
        client: the shared client; not closed here.
        urls: the endpoints, e.g. Ollama ``/api/ps`` and vLLM ``/metrics`` (never ones that load a model).
        interval: seconds from the end of one round to the start of the next.
        timeout: per-request deadline, end to end.
        max_body: per-response byte cap.
        backoff_max: the longest wait between tries of an address where nothing listens; 0 (the
            default): no backoff, every round polls every URL.
        clock: seconds, for the backoff's schedule (tests pass a fake one to ``poll_once``).
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        urls: Sequence[str],
        *,
        interval: float = 1.0,
        timeout: float = 2.0,
        max_body: int = DEFAULT_MAX_BODY,
        backoff_max: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval < 0 or timeout <= 0 or max_body < 1 or backoff_max < 0:
            raise ValueError("interval and backoff_max must be >= 0, timeout and max_body > 0")
        self._client = client
        self.urls: tuple[str, ...] = tuple(urls)
        self.interval = interval
        self.timeout = timeout
        self.max_body = max_body
        self.backoff_max = backoff_max
        self._clock = clock
        self.rounds = 0
        """Rounds completed."""
        by_origin: dict[str, list[str]] = {}
        for url in self.urls:
            by_origin.setdefault(_origin_of(url), []).append(url)
        self._origins = [_Origin(urls) for urls in by_origin.values()]

    def __repr__(self) -> str:
        return f"Poller(urls={self.urls!r}, interval={self.interval}, timeout={self.timeout}, rounds={self.rounds})"

    async def poll_once(self, on_result: Callable[[PollResult], None]) -> None:
        """Run one round, calling ``on_result`` for each URL as its answer arrives."""
        if not self.backoff_max:
            await self._round([(url, None) for url in self.urls], {}, on_result)
            self.rounds += 1
            return
        now = self._clock()
        # Addresses due a little later join this round: one wake-up instead of two a few ms apart.
        due = [o for o in self._origins if o.due <= now + 0.1 * self.interval]
        outcome: dict[int, str | None] = {}
        jobs = [(url, o) for o in due for url in (o.urls[:1] if o.failures >= BACKOFF_AFTER else o.urls)]
        await self._round(jobs, outcome, on_result)
        end = self._clock()
        for o in due:
            self._settle(o, outcome.get(id(o)), end)
        self.rounds += 1

    async def _round(
        self,
        jobs: Sequence[tuple[str, _Origin | None]],
        outcome: dict[int, str | None],
        on_result: Callable[[PollResult], None],
    ) -> None:
        """GET every job's URL concurrently; ``outcome[id(origin)]`` ends as the NOT_LISTENING error all of
        that origin's answers had, else None."""
        client, timeout, cap = self._client, self.timeout, self.max_body
        tasks: dict[asyncio.Future[PollResult], _Origin | None] = {
            asyncio.ensure_future(get(client, url, timeout, max_body=cap)): origin for url, origin in jobs
        }
        pending = set(tasks)
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    result, origin = task.result(), tasks[task]
                    if origin is not None:
                        error = result.error if result.status is None and result.error in NOT_LISTENING else None
                        key = id(origin)
                        outcome[key] = error if outcome.get(key, error) == error else None
                        if origin.failures >= BACKOFF_AFTER:
                            if error is not None and error == origin.error:
                                continue  # still nothing there: reported BACKOFF_AFTER times already
                            origin.failures = 0  # it changed: the whole address, this round
                            for url in origin.urls[1:]:
                                new = asyncio.ensure_future(get(client, url, timeout, max_body=cap))
                                tasks[new] = origin
                                pending.add(new)
                    on_result(result)
        finally:
            # Only reached with tasks pending if on_result raised or we were cancelled.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _settle(self, origin: _Origin, error: str | None, end: float) -> None:
        if error is None:
            origin.failures, origin.error, origin.due = 0, None, end + self.interval
            return
        origin.failures = origin.failures + 1 if error == origin.error else 1
        origin.error = error
        wait = self.interval
        if origin.failures >= BACKOFF_AFTER:
            wait = max(wait, min(self.backoff_max, self.interval * 2 ** (origin.failures - BACKOFF_AFTER + 1)))
        origin.due = end + wait

    def _next_round_in(self) -> float:
        if not self.backoff_max or not self._origins:
            return self.interval
        return max(0.0, min(o.due for o in self._origins) - self._clock())

    async def run(self, on_result: Callable[[PollResult], None], stop: asyncio.Event) -> None:
        """Poll until ``stop`` is set; a round in progress when it is set is cancelled.

        ``on_result`` runs on the event loop, one call at a time; an exception from it ends ``run``.
        """
        stop_task = asyncio.ensure_future(stop.wait())  # one for the whole run, not one per round
        try:
            while not stop.is_set():
                round_task = asyncio.ensure_future(self.poll_once(on_result))
                try:
                    await asyncio.wait({round_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if not round_task.done():
                        round_task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await round_task  # re-raises on_result's exception, if any
                if stop.is_set():
                    return
                await asyncio.wait({stop_task}, timeout=self._next_round_in())
        finally:
            stop_task.cancel()


def get_once(urls: Sequence[str], timeout: float) -> list[PollResult]:
    """One GET of each URL, in order, on one connection pool (a command that asks once, e.g. `ietop budget`).
    Failures are results, as the poller reports them (`error` one line); nothing raises."""
    out: list[PollResult] = []
    # trust_env=False: an HTTP(S)_PROXY in the environment must not capture requests to local engines.
    with httpx.Client(timeout=timeout, trust_env=False) as client:
        for url in urls:
            began = time.monotonic()
            try:
                answer = client.get(url)
            except httpx.HTTPError as exc:
                out.append(PollResult(url, False, None, b"", time.monotonic() - began, _one_line(_error_text(exc))))
                continue
            ok = 200 <= answer.status_code < 300
            out.append(PollResult(url, ok, answer.status_code, answer.content[:DEFAULT_MAX_BODY],
                                  time.monotonic() - began, None if ok else f"http {answer.status_code}"))
    return out
