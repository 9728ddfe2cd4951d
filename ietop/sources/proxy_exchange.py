"""One exchange forwarded by `ietop proxy` (``proxy_app``): what it has produced so far, and its measuring.

The meter (``parsers.api.stream.StreamMeter``) sees each chunk only after it was sent on, and when the event
loop has nothing more urgent to do (``Exchange.meter_later``): measuring never stands between two chunks.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses

from ietop.sources.proxy_body import BodyFields
from ietop.sources.proxy_messages import header
from parsers.api.stream import StreamMeter

__all__ = ["Exchange"]

_METER_BEHIND_MAX = 64
"""Chunks sent but not yet measured beyond which they are measured at once (bounds what is held for it)."""


@dataclasses.dataclass(slots=True)
class Exchange:
    """What one forwarded request has produced so far; shared by the handler and the disconnect watcher."""

    path: str
    method: str
    t0: float
    body: bytes = b""
    """The request body, when read whole (the meter reads ``model`` and ``stream`` from it)."""
    fields: BodyFields | None = None
    """What the meter needs of a measured body that was streamed up instead."""
    t_sent: float | None = None
    """When the whole request had been sent upstream: what time to first byte and token count from."""
    answer_headers: list[tuple[bytes, bytes]] | None = None
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

    def meter_later(self, t: float, chunk: bytes, last: bool) -> None:
        """Feed ``chunk`` (sent at ``t``) to the meter once the event loop has nothing more urgent to do.

        Chunks that arrive together (a burst; the upstream faster than the proxy) are all sent on before any
        of them is measured: the measuring (~15 µs a chunk) never stands between two chunks of a stream. The
        times are those of sending, so the measurement is the same; ``meter_now`` catches up at the end,
        which is also where the ``last`` chunk is left for."""
        self.unmetered.append((t, chunk))
        if len(self.unmetered) >= _METER_BEHIND_MAX:
            self.meter_now()
        elif len(self.unmetered) == 1 and not last:
            asyncio.get_running_loop().call_soon(self.meter_now)

    def meter_now(self) -> StreamMeter:
        """The meter, fed every chunk still waiting for it. Made on first use, not before the first chunk
        went out: it parses the request body (a prompt can be megabytes) and nothing it does is urgent."""
        meter = self.meter
        if meter is None:
            answer = self.answer_headers or []
            # Timed from the request fully sent, not from its arrival: the engine's latency, not the client's
            # upload (a slow one took seconds of "time to first byte"). e2e stays from the arrival (ProxyApp._record).
            meter = self.meter = StreamMeter(self.path, self.body if self.fields is None else self.fields.as_body(),
                                             header(answer, b"content-type"), self.t_sent or self.t0,
                                             method=self.method, content_encoding=header(answer, b"content-encoding"))
        unmetered = self.unmetered
        while unmetered:
            t, chunk = unmetered.popleft()
            meter.feed(t, chunk)
        return meter
