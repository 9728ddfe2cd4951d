"""What a client may hold of `ietop proxy` without a request in progress: uvicorn's protocol, bounded.

uvicorn bounds a kept connection between two requests (``timeout_keep_alive``) and nothing else: a client
that connects and sends nothing, sends its request head a byte at a time (slowloris), or half a body and then
nothing, holds a descriptor for as long as it likes, and enough such clients exhaust the process's
descriptors: accept() fails and a normal request gets no answer at all. ``GuardedProtocol`` is uvicorn's
httptools protocol (the one it picks itself: httptools is a dependency of ietop) with three limits added:

- the request head must be complete within ``head_timeout_s`` of the connection, or of the first byte of a
  next request on a kept one. A deadline, not an idle timer: a byte now and then does not extend it;
- a request body must not stall: ``body_idle_s`` without a byte while the proxy is reading closes the
  connection, and the app sees the client leave. Idle rather than a deadline, since a large upload on a
  slow link is legitimate; while the proxy itself is not reading (its upstream takes the body slowly) the
  client is not the one stalling, and that time is not counted;
- at most ``max_waiting`` connections wait for a request at a time (new ones, and kept ones between
  requests): one more closes the one that has waited longest. A flood of idle connections thus cannot shut
  out a client that sends its request at once, which is what real clients do. Connections with a request
  in progress are not capped here: a cap would refuse real streams, and their number is the clients' use.

Closing is silent (no 408): a slowloris client does not read answers, and a kept connection closed between
requests is what HTTP clients expect to happen.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import resource
from typing import Any, ClassVar

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

__all__ = ["BODY_IDLE_S", "HEAD_TIMEOUT_S", "MAX_WAITING", "GuardedProtocol", "Limits", "protocol_class",
           "waiting_cap"]

HEAD_TIMEOUT_S = 15.0
"""Every HTTP client sends its head in one write; 15 s covers a stalled network, not a client trickling it."""
BODY_IDLE_S = 60.0
"""A request body may pause this long (the proxy reading); an upload that makes progress is never cut."""
MAX_WAITING = 1024
"""Connections waiting for a request, at most (fewer when the descriptor limit is low: ``waiting_cap``)."""

_HEAD, _BODY, _BUSY = 0, 1, 2
"""A connection's phase: reading a head (or waiting for one), reading a body, answering."""


def waiting_cap(limit: int | None = None) -> int:
    """``limit``, or by default ``MAX_WAITING`` bounded to a quarter of the soft descriptor limit: each
    request in progress takes two descriptors (client and upstream), and they must find some free."""
    if limit is not None:
        return max(1, limit)
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return MAX_WAITING if soft == resource.RLIM_INFINITY else max(8, min(MAX_WAITING, soft // 4))


@dataclasses.dataclass(slots=True, eq=False)
class Limits:
    """The limits of one server, and the connections waiting for a request there (oldest first)."""

    head_timeout_s: float = HEAD_TIMEOUT_S
    body_idle_s: float = BODY_IDLE_S
    max_waiting: int = MAX_WAITING
    waiting: dict[GuardedProtocol, None] = dataclasses.field(default_factory=dict)
    """A dict as an ordered set: insertion order is waiting order, and removal is O(1)."""


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits of the module docstring; ``protocol_class`` binds it to
    a server's ``Limits``."""

    limits: ClassVar[Limits] = Limits()

    def __init__(self, config: Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._phase = _HEAD
        self._timer: asyncio.TimerHandle | None = None
        self._body_seen = 0.0
        """Loop time of the last body byte, or of the last check that found the proxy not reading."""

    # -- uvicorn's protocol, extended -----------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._wait()
        self._arm(self.limits.head_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self.limits.waiting.pop(self, None)
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._phase = _HEAD
        if self._timer is None:  # a next request on a kept connection: its own deadline from its first byte
            self._arm(self.limits.head_timeout_s)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self.limits.waiting.pop(self, None)
        # The head's timer is kept for the body when it fires first (the defaults): _check then finds the
        # body phase and re-arms it for the idle time left, which spares a timer per request.
        self._phase = _BODY
        self._body_seen = now = self.loop.time()
        if self._timer is None or self._timer.when() > now + self.limits.body_idle_s:
            self._arm(self.limits.body_idle_s)

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        self._body_seen = self.loop.time()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._phase = _BUSY
        self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # uvicorn armed its keep-alive timer: the connection now waits for a next request (a pipelined one
        # already in would have been started instead).
        if self.timeout_keep_alive_task is not None:
            self._phase = _HEAD
            self._wait()

    # -- the limits -----------------------------------------------------------------------------

    def _wait(self) -> None:
        waiting = self.limits.waiting
        waiting.pop(self, None)
        waiting[self] = None
        while len(waiting) > self.limits.max_waiting:
            oldest = next(iter(waiting))
            del waiting[oldest]
            oldest._close()

    def _arm(self, delay: float) -> None:
        self._disarm()
        self._timer = self.loop.call_later(delay, self._check)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        self._timer = None
        if self._phase == _HEAD:
            self._close()
        elif self._phase == _BODY:
            now = self.loop.time()
            if self.flow.read_paused or (self.cycle is not None and self.cycle.body):
                self._body_seen = now  # the proxy is behind, not the client
            left = self._body_seen + self.limits.body_idle_s - now
            if left > 0:
                self._arm(left)
            else:
                self._close()

    def _close(self) -> None:
        self._disarm()
        transport = self.transport
        if transport is not None and not transport.is_closing():
            with contextlib.suppress(RuntimeError):  # the loop is closing
                transport.close()


def protocol_class(head_timeout_s: float = HEAD_TIMEOUT_S, body_idle_s: float = BODY_IDLE_S,
                   max_waiting: int | None = None) -> type[GuardedProtocol]:
    """``GuardedProtocol`` bound to new ``Limits`` (one per server: uvicorn makes each connection's protocol
    from the class it is given, so the limits and the waiting connections travel on the class)."""
    bound = Limits(head_timeout_s, body_idle_s, waiting_cap(max_waiting))

    class _Bound(GuardedProtocol):
        limits = bound

    return _Bound
