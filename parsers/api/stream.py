"""Measure one inference request from the bytes of its response, as they stream past a proxy.

`ietop proxy` forwards every byte unchanged and hands each chunk, with the monotonic time it arrived,
to a ``StreamMeter``. The meter frames the body incrementally — SSE (OpenAI-compatible streams of
vLLM, MLX and Ollama's ``/v1`` routes), NDJSON (Ollama's native ``/api/chat`` and ``/api/generate``
streams) or one plain JSON document (non-stream answers) — across arbitrary chunk boundaries, and
derives what only the byte stream knows exactly: time to first byte, time to first *generated*
content, the mean inter-token (inter-chunk) latency and the token counts the engine itself reported.

Why per-event rather than per-chunk logic: a network chunk may hold half an event or ten of them, and
a measurement that depended on how TCP cut the bytes would be noise. An event is timed by the chunk
that completes it (its terminating ``\\n``), so the same bytes give the same result however they are
chunked, as long as the times of the chunks are the same (tests/parsers/test_stream.py checks it).

Memory is bounded per request: only the current partial line (a non-stream JSON body is one "line"),
counters and two timestamps are kept, never the body. A line longer than ``max_line`` is not parsed;
its head and tail are kept and scanned for the usage fields (large embeddings bodies end with them).

The meter never raises on what the upstream sends. A 2xx body that cannot be framed or decoded sets
the error ``"malformed stream"``, and whatever was measured before is kept.

Pure and stdlib-only, like the rest of ``parsers``; the clock is read by the caller.
"""

from __future__ import annotations

import contextlib
import json
import re
import zlib

from parsers.api.shapes import (
    EMBEDDING_PATHS,
    INFERENCE_PATHS,
    MALFORMED,
    decoder_for,
    has_content,
    is_inference_path,
    mode_for,
    request_fields,
    token_count,
)
from parsers.events import ProxyRequest

__all__ = ["EMBEDDING_PATHS", "INFERENCE_PATHS", "MALFORMED", "StreamMeter", "is_inference_path"]

_SSE_FIELDS = frozenset({b"data", b"event", b"id", b"retry"})
_SSE_STARTS = (b"data:", b":", b"event:", b"id:", b"retry:")
_SNIFF_BYTES = 64
"""Without a usable Content-Type the format is decided on the first line, or on this many bytes."""
_KEEP = 64 << 10
"""Head and tail kept of an over-long line."""

_FALLBACK_INT = re.compile(
    rb'"(prompt_tokens|completion_tokens|cached_tokens|prompt_eval_count|eval_count|load_duration)"\s*:\s*(\d{1,19})'
)
_FALLBACK_MODEL = re.compile(rb'"model"\s*:\s*"((?:[^"\\]|\\.){1,512})"')


class StreamMeter:
    """Incremental measurer of one request's response body.

    Feed it ``(time, chunk)`` pairs in arrival order, then call ``finish`` once. Times are monotonic
    seconds on the caller's clock; results are relative to ``t0``, the request's arrival.
    """

    __slots__ = (
        "_buf",
        "_cached",
        "_content",
        "_decoder",
        "_embedding",
        "_first_t",
        "_head",
        "_last_t",
        "_load_ns",
        "_malformed",
        "_max_line",
        "_method",
        "_mode",
        "_output",
        "_overflow",
        "_path",
        "_pending",
        "_prompt",
        "_readable",
        "_req_model",
        "_resp_model",
        "_size_up",
        "_stream",
        "_t0",
        "_ttfb_t",
        "bytes_down",
    )

    def __init__(
        self,
        path: str,
        request_body: bytes,
        content_type: str | None,
        t0: float,
        *,
        method: str = "POST",
        content_encoding: str | None = None,
        max_line: int = 4 << 20,
    ) -> None:
        """Start measuring.

        Args:
            path: the request path (a query string, if any, is dropped).
            request_body: the request body as the client sent it; only ``model`` and ``stream`` are
                read from it, and it is not kept.
            content_type: the *response's* Content-Type (``text/event-stream``, ``application/x-ndjson``,
                ``application/json``); None or anything else: decided from the first bytes.
            t0: monotonic time the request arrived.
            method: the HTTP method, reported as is.
            content_encoding: the response's Content-Encoding; gzip and deflate are decoded for
                measuring (the forwarded bytes are untouched), others are measured by time and size only.
            max_line: longest line (or non-stream body) parsed, in bytes.
        """
        self._path = path.split("?", 1)[0]
        route = self._path.rstrip("/") or "/"
        self._embedding = route in EMBEDDING_PATHS
        self._method = method
        self._t0 = t0
        self._size_up = len(request_body)
        self._req_model, self._stream = request_fields(route, request_body)
        self._mode = mode_for(content_type)
        self._decoder, self._readable = decoder_for(content_encoding)
        self._max_line = max(1, max_line)
        self._buf = bytearray()
        self._head = b""
        self._overflow = False
        self._pending: list[bytes] = []
        self._ttfb_t: float | None = None
        self._first_t: float | None = None
        self._last_t: float | None = None
        self._content = 0
        self._prompt: int | None = None
        self._output: int | None = None
        self._cached: int | None = None
        self._load_ns: int | None = None
        self._resp_model: str | None = None
        self._malformed = False
        self.bytes_down = 0
        """Bytes of the response body as forwarded (before any content decoding)."""

    @property
    def held_bytes(self) -> int:
        """Bytes held for the current partial line (the whole memory cost that grows with the body)."""
        return len(self._buf) + len(self._head) + sum(map(len, self._pending))

    # -- input ---------------------------------------------------------------------------------

    def feed(self, t: float, chunk: bytes) -> None:
        """Account for one chunk of the response body that arrived at monotonic time ``t``."""
        if not chunk:
            return
        if self._ttfb_t is None:
            self._ttfb_t = t
        self.bytes_down += len(chunk)
        if not self._readable:
            return
        if self._decoder is not None:
            self._feed_decoded(t, chunk)
        else:
            self._feed_plain(t, chunk)

    def _feed_decoded(self, t: float, chunk: bytes) -> None:
        try:
            data = self._decoder.decompress(chunk, self._max_line)
            while data:
                self._feed_plain(t, data)
                tail = self._decoder.unconsumed_tail
                data = self._decoder.decompress(tail, self._max_line) if tail else b""
        except zlib.error:
            self._malformed = True
            self._readable = False

    def _feed_plain(self, t: float, data: bytes) -> None:
        if self._mode is None:
            self._buf += data
            if not self._sniff(final=False):
                return
            data = bytes(self._buf)
            self._buf.clear()
        if self._mode == "json":
            self._append(data)
            return
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                if start < len(data):
                    self._append(data[start:])
                return
            if self._buf or self._overflow or nl - start > self._max_line:
                self._append(data[start:nl])
                self._end_line(t)
            else:
                self._line(t, data[start:nl])
            start = nl + 1

    def _sniff(self, *, final: bool) -> bool:
        """Decide the framing from the first line (after leading whitespace), once it is known.

        Only the first line, cut at ``_SNIFF_BYTES``, is looked at, so the decision does not depend on
        how the bytes were chunked. Returns False while undecided.
        """
        text = bytes(self._buf).lstrip()
        nl = text.find(b"\n", 0, _SNIFF_BYTES)
        if nl < 0 and len(text) < _SNIFF_BYTES and not final:
            return False
        first = text[:nl] if nl >= 0 else text[:_SNIFF_BYTES]
        if first.startswith(_SSE_STARTS):
            self._mode = "sse"
        elif first.startswith(b"{") and (self._stream or (self._stream is None and first.rstrip().endswith(b"}"))):
            self._mode = "ndjson"
        else:
            self._mode = "json"
        return True

    def _append(self, data: bytes) -> None:
        """Add bytes to the current line, keeping only head and tail once it is over-long."""
        if not self._overflow:
            self._buf += data
            if len(self._buf) > self._max_line:
                self._overflow = True
                self._head = bytes(self._buf[: min(_KEEP, self._max_line)])
                del self._buf[:-_KEEP]
            return
        self._buf += data
        if len(self._buf) > 2 * _KEEP:
            del self._buf[:-_KEEP]

    def _end_line(self, t: float) -> None:
        if self._overflow:
            self._scan_fallback(self._head + b"\n" + bytes(self._buf[-_KEEP:]))
            self._overflow = False
            self._head = b""
        else:
            self._line(t, bytes(self._buf))
        self._buf.clear()

    # -- framing -------------------------------------------------------------------------------

    def _line(self, t: float, line: bytes) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if self._mode == "sse":
            self._sse_line(t, line)
        elif line.strip():
            self._json(t, line)

    def _sse_line(self, t: float, line: bytes) -> None:
        if not line:  # end of event: dispatch data lines that only parse together
            if self._pending:
                data, self._pending = b"\n".join(self._pending), []
                self._sse_data(t, data, last_try=True)
            return
        if line[0] == 0x3A:  # ':' comment (MLX `: keepalive p/N`)
            return
        field, colon, value = line.partition(b":")
        if not colon:
            field, value = line, b""
        elif value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            if self._pending:
                self._pending.append(value)
                if sum(map(len, self._pending)) > self._max_line:  # never ends: give up on this event
                    self._pending, self._malformed = [], True
            else:
                self._sse_data(t, value, last_try=False)
        elif field not in _SSE_FIELDS:
            self._malformed = True

    def _sse_data(self, t: float, data: bytes, *, last_try: bool) -> None:
        # One `data:` line per event is what every engine sends: dispatch it on its own line, so the
        # event is timed by its line as a line-reading client times it. Multi-line data (legal SSE)
        # waits for the blank line.
        if data == b"[DONE]":
            return
        try:
            obj = json.loads(data)
        except ValueError:
            if last_try:
                self._malformed = True
            else:
                self._pending.append(data)
            return
        self._event(t, obj)

    def _json(self, t: float, data: bytes) -> None:
        try:
            obj = json.loads(data)
        except ValueError:
            self._malformed = True
            return
        self._event(t, obj)

    # -- semantics -----------------------------------------------------------------------------

    def _event(self, t: float, obj: object) -> None:
        if not isinstance(obj, dict):
            self._malformed = True
            return
        if self._resp_model is None:
            model = obj.get("model")
            if isinstance(model, str):
                self._resp_model = model
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self._set_usage(usage.get("prompt_tokens"), usage.get("completion_tokens"), None)
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict):
                self._set_usage(None, None, details.get("cached_tokens"))
        self._set_usage(obj.get("prompt_eval_count"), obj.get("eval_count"), None)
        load = token_count(obj.get("load_duration"))
        if load is not None:
            self._load_ns = load
        if not self._embedding and has_content(obj):
            self._content += 1
            if self._first_t is None:
                self._first_t = t
            self._last_t = t

    def _set_usage(self, prompt: object, output: object, cached: object) -> None:
        p, o, c = token_count(prompt), token_count(output), token_count(cached)
        if p is not None:
            self._prompt = p
        if o is not None:
            self._output = o
        if c is not None:
            self._cached = c

    def _scan_fallback(self, text: bytes) -> None:
        """Usage fields from the head and tail of a body too large to parse."""
        for key, value in _FALLBACK_INT.findall(text):
            n = int(value)
            if key in (b"prompt_tokens", b"prompt_eval_count"):
                self._prompt = n
            elif key in (b"completion_tokens", b"eval_count"):
                self._output = n
            elif key == b"cached_tokens":
                self._cached = n
            else:
                self._load_ns = n
        if self._resp_model is None:
            m = _FALLBACK_MODEL.search(text)
            if m:
                with contextlib.suppress(ValueError):
                    self._resp_model = json.loads(b'"' + m.group(1) + b'"')

    # -- output --------------------------------------------------------------------------------

    def finish(self, t: float, status: int | None, error: str | None) -> ProxyRequest:
        """End of the response (complete, cut or failed) at monotonic time ``t``: the measurement.

        Args:
            t: monotonic time the last byte was forwarded, or the failure was seen.
            status: the HTTP status the client got, None when it got none.
            error: the caller's one-line error (client disconnected, upstream down, upstream timeout);
                it takes precedence over ``"malformed stream"``, which is only reported for a 2xx status.
        """
        if self._readable and self._decoder is not None:
            try:
                rest = self._decoder.flush()
            except zlib.error:
                rest, self._malformed = b"", True
            if rest:
                self._feed_plain(t, rest)
        if self._mode is None and self._buf:
            self._sniff(final=True)
        if self._buf or self._overflow:
            self._end_line(t)  # a last line without its newline (or the whole non-stream body)
        if self._pending:
            self._sse_line(t, b"")
        stream = self._stream if self._stream is not None else self._mode in ("sse", "ndjson")
        content, ttft, itl = self._content, None, None
        if self._first_t is not None and self._last_t is not None:
            if self._mode in ("sse", "ndjson"):
                ttft = self._first_t - self._t0
                if content > 1:
                    itl = (self._last_t - self._first_t) / (content - 1)
            else:
                content = 1  # a whole answer at once: no first token to time
        ok = status is not None and 200 <= status < 300
        if self.bytes_down == 0 and self._method != "HEAD":
            self._malformed = True  # an inference answer with no body at all
        if error is None and self._malformed and ok:
            error = MALFORMED
        return ProxyRequest(
            line=0,
            ts=None,
            method=self._method,
            path=self._path,
            status=status,
            model=self._req_model or self._resp_model,
            stream=stream,
            ttfb_s=None if self._ttfb_t is None else self._ttfb_t - self._t0,
            ttft_s=ttft,
            itl_s=itl,
            e2e_s=t - self._t0,
            content_chunks=content,
            prompt_tokens=self._prompt,
            output_tokens=self._output,
            cached_tokens=self._cached,
            load_s=None if self._load_ns is None else self._load_ns / 1e9,
            bytes_up=self._size_up,
            bytes_down=self.bytes_down,
            error=error,
        )
