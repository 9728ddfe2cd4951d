"""A request body too large to hold, as `ietop proxy` streams it up: what the measuring still needs of it.

A measured request's body is a prompt; the meter (``parsers.api.stream.StreamMeter``) reads two fields of it,
``model`` and ``stream``, and its size. Bodies up to ``proxy_app._STREAM_UP_ABOVE`` are read whole and parsed
as JSON; a larger one (a 100 MB prompt of pasted documents, images in base64) is sent on as it arrives, and
``BodyFields`` picks the two fields out of it on the way, keeping only a short carry-over between chunks:
memory stays flat whatever the body's size. JSON puts no order on keys (the OpenAI SDK writes ``messages``
before ``model``), so the whole body is scanned, with ``bytes.find`` for the key: ~30 ms for 100 MB.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator

__all__ = ["BodyFields", "noting_end"]

_MODEL = re.compile(rb'"model"\s*:\s*"((?:[^"\\]|\\.){0,512})"')
_STREAM = re.compile(rb'"stream"\s*:\s*(true|false)\b')
_CARRY = 1100
"""Longer than the longest match (a model name of 512 escaped characters, the key and some blanks)."""


class BodyFields:
    """``model`` and ``stream`` of a JSON request body fed in chunks, and its size; the body is not kept.

    ``model`` and ``stream`` are final once ``as_body`` has been called, at the end of the body. The first
    ``"model": "…"`` and ``"stream": true|false`` found win: inside the prompt's own strings the
    quotes are escaped (``\\"model\\"``), so what is found is a key, the top-level one in every client's
    bodies (a nested ``model`` key with a string value, before the top-level one, would be mistaken for it).
    """

    __slots__ = ("_carry", "model", "size", "stream")

    def __init__(self) -> None:
        self.size = 0
        self.model: str | None = None
        self.stream: bool | None = None
        self._carry = b""

    def feed(self, chunk: bytes) -> None:
        """Account for the next chunk of the body."""
        self.size += len(chunk)
        if self.model is None or self.stream is None:
            data = self._carry + chunk if self._carry else chunk
            self._scan(data, final=False)
            self._carry = data[-_CARRY:]

    def as_body(self) -> bytes:
        """A stand-in body holding only what was found, for the meter to read as it reads a whole one (the
        body has ended: a key left undecided at the end of the last chunk is decided now)."""
        if self.model is None or self.stream is None:
            self._scan(self._carry, final=True)
        fields: dict[str, object] = {}
        if self.model is not None:
            fields["model"] = self.model
        if self.stream is not None:
            fields["stream"] = self.stream
        return json.dumps(fields).encode()

    def _scan(self, data: bytes, *, final: bool) -> None:
        if self.model is None:
            found = _find(data, b'"model"', _MODEL, final)
            if found is not None:
                try:
                    model = json.loads(b'"' + found + b'"')
                except ValueError:
                    model = None
                self.model = model if isinstance(model, str) else None
        if self.stream is None:
            found = _find(data, b'"stream"', _STREAM, final)
            if found is not None:
                self.stream = found == b"true"


def _find(data: bytes, key: bytes, pattern: re.Pattern[bytes], final: bool) -> bytes | None:
    """The value of the first match. Unless ``final``, a key too near the end to tell whether its value is
    complete stops the search: it is in the carry, for the next chunk to decide."""
    at = data.find(key)
    while at >= 0:
        match = pattern.match(data, at)
        if match is not None:
            return match.group(1)
        if not final and len(data) - at < _CARRY:
            return None
        at = data.find(key, at + 1)
    return None


async def noting_end(parts: AsyncIterator[bytes], ended: list[float]) -> AsyncIterator[bytes]:
    """``parts`` as they come; once the consumer has taken (sent) the last one, the time is appended to
    ``ended``: when a streamed body was all sent."""
    async for part in parts:
        yield part
    ended.append(time.perf_counter())
