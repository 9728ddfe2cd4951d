"""The first lines of a log's last server run, when that run began before the part of the log a live tail
reads back (ietop.pipeline.feeds.TailFeed): what the engine said at start-up (vLLM's model size and served name,
Ollama's configured settings) is in those lines only.

The file is searched backwards in line-aligned chunks for the run's opening line (parsers.text.runs), up to
SCAN_MAX bytes; a read from the page cache runs at GB/s, so this costs well under a second even then. It runs
on the feed's worker thread, never before the first frame.
"""

from __future__ import annotations

import os
import threading

from parsers.text.framing import split_texts
from parsers.text.runs import RUN_OPENERS, RUN_OPENING_SPAN, last_opening

__all__ = ["COUNT_MAX", "count_lines", "run_head"]

HEAD_MAX = 256 << 10
"""Bytes of the run's start read: vLLM's start-up is ~100 lines, Ollama's a few dozen."""
SCAN_MAX = 1 << 30
"""How far back from the window the opening line is looked for."""
CHUNK = 8 << 20
COUNT_MAX = 2 << 30
"""Up to this offset the lines before a read-back are counted, for evidence that names the file's own line
numbers (~1 s per GB from the page cache); past it the numbers count from where the read began."""


def run_head(path: str, engine: str, before: int, *, head_max: int = HEAD_MAX, scan_max: int = SCAN_MAX,
             chunk: int = CHUNK, stop: threading.Event | None = None) -> tuple[int, list[str]]:
    """The offset of the last server run that opens before offset `before` (a line start) and its lines from
    that opening line, for at most `head_max` bytes and never past `before`; (before, []) when no opening line
    is found within `scan_max` bytes (or the file cannot be read, or `stop` is set meanwhile)."""
    try:
        with open(path, "rb") as f:
            start = _find_start(f.fileno(), engine, before, scan_max, chunk, stop)
            if start is None:
                return before, []
            data = _read_at(f.fileno(), start, min(head_max, before - start))
    except OSError:
        return before, []
    end = data.rfind(b"\n") + 1
    # Framed as the tailer frames the lines after them (invalid UTF-8, CR before LF, NUL bytes).
    return start, [text for texts in split_texts([data[:end]]) for text in texts]


def count_lines(path: str, lo: int, hi: int, *, chunk: int = CHUNK, stop: threading.Event | None = None) -> int | None:
    """Newlines between offsets `lo` and `hi`: how many lines come before `hi` when `lo` is a line start whose
    number is known. None when the file cannot be read, or `stop` is set meanwhile (the user quits: a cold
    disk reads a GB in seconds)."""
    n = 0
    try:
        with open(path, "rb") as f:
            pos = lo
            while pos < hi:
                if stop is not None and stop.is_set():
                    return None
                data = _read_at(f.fileno(), pos, min(chunk, hi - pos))
                if not data:
                    return None
                n += data.count(b"\n")
                pos += len(data)
    except OSError:
        return None
    return n


def _find_start(fd: int, engine: str, before: int, scan_max: int, chunk: int,
                stop: threading.Event | None) -> int | None:
    needles = RUN_OPENERS.get(engine, ())
    if not needles:
        return None
    overlap = max(map(len, needles)) - 1  # an opening text across a chunk's end is found in that chunk
    hi = before
    while hi > 0 and before - hi < scan_max and not (stop is not None and stop.is_set()):
        lo = max(0, hi - chunk)
        data = _read_at(fd, lo, min(before, hi + overlap) - lo)
        last = max(data.rfind(n) for n in needles)
        if last >= 0:
            return _run_line_start(fd, engine, lo + last)
        hi = lo
    return None


def _run_line_start(fd: int, engine: str, last: int) -> int:
    """The start of the line of the run's first opening text, given its last one at `last` (Ollama's `server
    config` is a few lines before `Listening on`, perhaps in the chunk before)."""
    lo = max(0, last - RUN_OPENING_SPAN)
    first = lo + (last_opening(engine, _read_at(fd, lo, last - lo + max(map(len, RUN_OPENERS[engine])))) or 0)
    # The line's start: back to the newline before it (a line may be longer than one read).
    pos = first
    while pos > 0:
        piece_lo = max(0, pos - (64 << 10))
        nl = _read_at(fd, piece_lo, pos - piece_lo).rfind(b"\n")
        if nl >= 0:
            return piece_lo + nl + 1
        pos = piece_lo
    return 0


def _read_at(fd: int, pos: int, size: int) -> bytes:
    # os.pread would be one call, but it does not exist on Windows.
    os.lseek(fd, pos, os.SEEK_SET)
    return os.read(fd, size)
