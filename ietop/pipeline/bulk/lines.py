"""Byte windows of a log → a polars Series of its lines, framed exactly as parsers.text.framing frames them.

polars' CSV reader, with a separator and quote that cannot occur, splits a window into lines in compiled code
and in parallel: blank lines come back null, a CR before the newline is dropped and any other CR is kept, as
LineSplitter does. A window it might frame differently (a SOH byte, a line over `max_line`) is split by
LineSplitter itself: rarer, slower, the same lines. Invalid UTF-8 is replaced as Python's "replace" does
(both substitute maximal subparts: tests/pipeline/test_bulk_lines.py). NULs at the start of a line are padding
that LineSplitter drops (copytruncate under a writer without O_APPEND); they are stripped here too, and never
make a window grow: a hole of any size costs no memory.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator

import polars as pl

from parsers.text.framing import LineSplitter

WINDOW = 8 << 20
"""Bytes per window: big enough that per-window costs vanish, small enough that memory stays flat. Measured on
a 100 MB busy log (2 cores): 8 MB took the least CPU (3.3 s user against 3.9 s at 32 MB) at 200 MB peak
RSS (345 MB at 32 MB, 160 MB at 4 MB)."""
MAX_LINE = 1 << 20
_SEP = "\x01"


def windows(chunks: Iterable[bytes], size: int | None = None) -> Iterator[bytes]:
    """The stream in windows of about `size` bytes (WINDOW), each ending at a newline (the last one may not), or
    a run of padding NULs alone. A line longer than the window is not split: its window grows until the newline
    (LineSplitter cuts it)."""
    size = size or WINDOW
    buf = bytearray()
    for chunk in chunks:
        buf += chunk
        if buf[:1] == b"\x00":
            # buf always starts at a line start (the stream's, or just after a cut at a newline), so these NULs
            # are padding: handed on as a window of their own (no lines), a hole of gigabytes never becomes one
            # window of gigabytes, and whoever counts the windows' bytes (progress) still counts the hole's.
            pad = len(buf) - len(buf.lstrip(b"\x00"))
            yield bytes(buf[:pad])
            del buf[:pad]
        if len(buf) < size:
            continue
        cut = buf.rfind(b"\n") + 1
        if cut:
            with memoryview(buf) as view:
                window = bytes(view[:cut])  # one copy: `bytes(buf[:cut])` made two
            del buf[:cut]
            yield window
    if buf:
        yield bytes(buf)


def _splitter_lines(data: bytes, max_line: int) -> list[str]:
    splitter = LineSplitter(max_line)
    texts = splitter.feed_texts(data)
    texts.extend(splitter.flush_texts())
    return texts


def _strip_padding(lines: pl.Series, data: bytes) -> pl.Series:
    """Leading NULs off every line, and a last line that was nothing but padding (no newline after it) gone:
    LineSplitter never starts a line for padding alone."""
    lines = lines.str.strip_chars_start("\x00")
    last = data.rfind(b"\n") + 1
    if last < len(data) and not data[last:].lstrip(b"\x00"):
        lines = lines.head(len(lines) - 1)
    return lines


def window_lines(data: bytes, max_line: int = MAX_LINE) -> pl.Series:
    """The lines of one window (a window ends at a newline or at the end of the stream)."""
    if not data or (data[:1] == b"\x00" and not data.lstrip(b"\x00")):  # padding alone (windows) holds no line
        return pl.Series("line", [], dtype=pl.String)
    # polars' reader drops a UTF-8 byte order mark that starts its input; LineSplitter keeps it in the line.
    if _SEP.encode() not in data and not data.startswith(b"\xef\xbb\xbf"):
        frame = pl.read_csv(io.BytesIO(data), has_header=False, separator=_SEP, quote_char=None,
                            new_columns=["line"], schema={"line": pl.String}, infer_schema=False,
                            encoding="utf8-lossy")
        lines = frame.to_series().fill_null("")
        if b"\x00" in data:
            lines = _strip_padding(lines, data)
        # A replaced byte grows to three: a line near the limit is left to LineSplitter, which counts bytes.
        if len(data) <= max_line or lines.str.len_bytes().max() <= max_line:  # type: ignore[operator]
            return lines
    return pl.Series("line", _splitter_lines(data, max_line), dtype=pl.String)
