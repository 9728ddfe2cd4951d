"""Byte chunks to complete lines, with the byte offset of each line in the stream.

Framing happens on bytes, before any decoding: ``b"\\n"`` never occurs inside a
multi-byte UTF-8 sequence, so a character split across two chunks is only ever
decoded once both halves are here.

This is on the hot path of analysing multi-GB logs, so each chunk's run of complete
lines is handled by C-level primitives (one ``decode``, one ``split``, ``map`` and
``accumulate`` for offsets); Python-level code runs per chunk, not per byte, and per
line only for over-long lines.

NUL bytes at the start of a line are padding, not content, and are dropped as they
stream in: logrotate's ``copytruncate`` empties a file under a writer that does not
use ``O_APPEND``, and that writer's next line lands at its old offset, after a hole
that reads as NULs (as large as the log was). Kept, they would glue the hole onto the
next line, which then matches no parser, or, with a hole over ``max_line``, push the
whole line past the cut. Only *leading* NULs go: one line per newline, as ``wc -l``
and editors count them (evidence names line numbers), and a NUL inside a line stays
data. (GNU ``tail -F`` copies the NULs through; papertrail's go-tail skips them as here.)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from itertools import accumulate, repeat
from operator import add
from typing import NamedTuple, TypeVar, cast

__all__ = ["Line", "LineSplitter", "split_lines", "split_texts"]

T = TypeVar("T")


class Line(NamedTuple):
    """One line of the stream."""

    offset: int
    """Byte offset of the first byte of the line in the stream (after the NULs of any padding before it)."""
    text: str
    """The line decoded as UTF-8 (invalid bytes replaced), without ``\\n`` or a trailing ``\\r``."""
    cut: bool
    """True when the line was longer than ``max_line`` bytes and only its head is in ``text``."""


# NamedTuple's generated __new__ is a Python function; calling tuple.__new__ directly
# builds the same object in C, and map() can then build a whole chunk's lines in C.
_new = cast("Callable[[type[Line], tuple[int, str, bool]], Line]", tuple.__new__)

_NOT_NUL = re.compile(rb"[^\x00]")


def _decode(data: bytes | bytearray) -> str:
    return data.decode("utf-8", "replace")


def _line(offset: int, text: str, cut: bool) -> Line:
    return _new(Line, (offset, text, cut))


def _text(offset: int, text: str, cut: bool) -> str:
    return text


class LineSplitter:
    """Incremental splitter: feed byte chunks, get complete lines back.

    A partial last line is held back until its newline (or ``flush`` at EOF) arrives.
    A line longer than ``max_line`` bytes (counting a trailing ``\\r``, not the ``\\n``)
    is emitted as soon as that is known, with its first ``max_line`` bytes and
    ``cut=True``; the rest of it is discarded as it streams in, so the held-back
    buffer never exceeds ``max_line`` bytes however long a line is. NULs at the start
    of a line are dropped (see the module docstring; ``padding`` counts them), so a line's
    offset is that of its first byte after them, and they count nowhere towards ``max_line``.
    """

    __slots__ = ("_buf", "_max", "_padding", "_pos", "_skipping")

    def __init__(self, max_line: int = 1 << 20, start_offset: int = 0) -> None:
        """Create a splitter.

        Args:
            max_line: longest line kept whole, in bytes (at least 1).
            start_offset: stream offset of the first byte that will be fed, e.g. when
                resuming a tail in the middle of a file.
        """
        if max_line < 1:
            raise ValueError(f"max_line must be at least 1, not {max_line}")
        self._max = max_line
        self._buf = bytearray()
        # Stream offset of the next byte to be fed; the pending line starts at
        # _pos - len(_buf), so no separate start offset is kept.
        self._pos = start_offset
        # True while discarding the rest of a line that was already emitted cut.
        self._skipping = False
        self._padding = 0

    @property
    def pending(self) -> int:
        """Bytes held back as the start of an incomplete line."""
        return len(self._buf)

    @property
    def offset(self) -> int:
        """Stream offset just past the last byte fed."""
        return self._pos

    @property
    def padding(self) -> int:
        """NUL bytes dropped so far from the starts of lines."""
        return self._padding

    def feed(self, chunk: bytes) -> list[Line]:
        """Consume ``chunk`` and return the lines it completes, in stream order."""
        out: list[Line] = []
        self._feed(chunk, out, _line, self._emit_region)
        return out

    def feed_texts(self, chunk: bytes) -> list[str]:
        """As ``feed``, but only each line's text: for readers that need no offsets (the live feeds),
        a third of the cost per line (no byte offsets, no ``Line`` object)."""
        out: list[str] = []
        self._feed(chunk, out, _text, self._emit_texts)
        return out

    def flush(self) -> list[Line]:
        """At EOF: return the held-back partial line, if any, as a final line."""
        out: list[Line] = []
        self._flush(out, _line)
        return out

    def flush_texts(self) -> list[str]:
        """As ``flush``, the text only."""
        out: list[str] = []
        self._flush(out, _text)
        return out

    def _feed(self, chunk: bytes, out: list[T], make: Callable[[int, str, bool], T],
              emit: Callable[[bytes, int, list[T]], None]) -> None:
        # One memchr per chunk keeps the padding logic off the path of every chunk without a NUL.
        if b"\x00" in chunk:
            self._feed_padded(chunk, out, make, emit)
        else:
            self._feed_plain(chunk, out, make, emit)

    def _feed_padded(self, chunk: bytes, out: list[T], make: Callable[[int, str, bool], T],
                     emit: Callable[[bytes, int, list[T]], None]) -> None:
        """``_feed_plain`` for a chunk with NULs in it: leading NULs of lines skipped, the rest fed in pieces
        that each end just before such a run, so that no line in a piece starts with a NUL."""
        size = len(chunk)
        i = 0
        while i < size:
            if not self._buf and not self._skipping:  # at a line start: NULs here are padding
                m = _NOT_NUL.search(chunk, i)
                j = m.start() if m else size
                self._padding += j - i
                self._pos += j - i
                i = j
                if i == size:
                    return
            nl = chunk.find(b"\n\x00", i)
            end = size if nl < 0 else nl + 1
            self._feed_plain(chunk if i == 0 and end == size else chunk[i:end], out, make, emit)
            i = end

    def _feed_plain(self, chunk: bytes, out: list[T], make: Callable[[int, str, bool], T],
                    emit: Callable[[bytes, int, list[T]], None]) -> None:
        size = len(chunk)
        if not size:
            return
        base = self._pos
        self._pos = base + size
        start = 0
        if self._skipping or self._buf:
            nl = chunk.find(b"\n")
            if nl < 0:
                self._extend(chunk, base, out, make)
                return
            if self._skipping:
                self._skipping = False
            else:
                self._finish_pending(chunk, nl, base, out, make)
            start = nl + 1
        last = chunk.rfind(b"\n", start)
        if last >= 0:
            region = chunk if start == 0 and last == size - 1 else chunk[start : last + 1]
            emit(region, base + start, out)
            start = last + 1
        if start < size:
            self._extend(chunk[start:], base + start, out, make)

    def _flush(self, out: list[T], make: Callable[[int, str, bool], T]) -> None:
        buf = self._buf
        if buf:
            off = self._pos - len(buf)
            if buf.endswith(b"\r"):
                del buf[-1]
            out.append(make(off, _decode(buf), False))
            buf.clear()
        self._skipping = False

    def _extend(self, data: bytes, data_off: int, out: list[T], make: Callable[[int, str, bool], T]) -> None:
        """Add bytes with no newline in them to the pending line."""
        if self._skipping:
            return
        buf = self._buf
        room = self._max - len(buf)
        if len(data) <= room:
            buf += data
            return
        line_off = data_off - len(buf)
        buf += data[:room]
        out.append(make(line_off, _decode(buf), True))
        buf.clear()
        self._skipping = True

    def _finish_pending(self, chunk: bytes, nl: int, base: int, out: list[T],
                        make: Callable[[int, str, bool], T]) -> None:
        """Complete the pending line with ``chunk[:nl]`` (``chunk[nl]`` is its newline)."""
        buf = self._buf
        line_off = base - len(buf)
        if len(buf) + nl > self._max:
            buf += chunk[: self._max - len(buf)]
            out.append(make(line_off, _decode(buf), True))
        else:
            buf += chunk[:nl]
            if buf.endswith(b"\r"):
                del buf[-1]
            out.append(make(line_off, _decode(buf), False))
        buf.clear()

    def _emit_region(self, region: bytes, off: int, out: list[Line]) -> None:
        """Emit the complete lines of ``region``, which ends with a newline."""
        # One decode of the whole region: "\n" is never part of a multi-byte sequence, and an invalid
        # byte becomes one U+FFFD without swallowing a newline, so the split text lines are the split
        # byte lines. Offsets need byte lengths: the char lengths when the text is pure ASCII (O(1)).
        text = _decode(region)
        texts = text.split("\n")
        texts.pop()  # the region ends with "\n": the last piece is empty
        lens = list(map(len, texts if text.isascii() else region.split(b"\n")[:-1]))
        if "\r" in text:
            # Only a CR right before the newline is a line ending; any other CR is data.
            texts = [t[:-1] if t[-1:] == "\r" else t for t in texts]
        starts = list(accumulate(map(add, lens, repeat(1)), initial=off))
        lines = list(map(_new, repeat(Line), zip(starts, texts, repeat(False))))
        limit = self._max
        if len(region) > limit + 1 and max(lens) > limit:
            for i, n in enumerate(lens):
                if n > limit:
                    rel = starts[i] - off
                    lines[i] = _new(Line, (starts[i], _decode(region[rel : rel + limit]), True))
        out.extend(lines)


    def _emit_texts(self, region: bytes, off: int, out: list[str]) -> None:
        """``_emit_region`` without offsets: the texts of the complete lines of ``region``."""
        text = _decode(region)
        texts = text.split("\n")
        texts.pop()
        limit = self._max
        if len(region) > limit + 1:
            # Some line may be over max_line bytes: the rare path that knows offsets decides.
            lines: list[Line] = []
            self._emit_region(region, off, lines)
            out.extend([line.text for line in lines])
            return
        if "\r" in text:
            texts = [t[:-1] if t[-1:] == "\r" else t for t in texts]
        out.extend(texts)


def split_texts(chunks: Iterable[bytes], max_line: int = 1 << 20) -> Iterator[list[str]]:
    """Split a whole stream into the texts of its lines, a list per chunk (a final unterminated line
    included): ``split_lines`` for readers that need no offsets."""
    splitter = LineSplitter(max_line)
    for chunk in chunks:
        yield splitter.feed_texts(chunk)
    yield splitter.flush_texts()


def split_lines(chunks: Iterable[bytes], max_line: int = 1 << 20) -> Iterator[Line]:
    """Split a whole stream of chunks into lines, including a final unterminated one."""
    splitter = LineSplitter(max_line)
    for chunk in chunks:
        yield from splitter.feed(chunk)
    yield from splitter.flush()
