"""The columnar reader frames a window into exactly the lines LineSplitter gives (the per-line path's)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ietop.analyze.report import Analysis
from ietop.pipeline.bulk.lines import window_lines, windows
from parsers.text.framing import LineSplitter

# Bytes that make framing and decoding interesting: newlines, CRs, invalid and truncated UTF-8, SOH, NUL padding.
PIECES = [b"\n", b"\r", b"\r\n", b"a", b" ", b"\xff", b"\xfe", b"\xc3", b"\xa9", b"\xe2\x82", b"\xe2\x82\xac",
          b"\xf0\x9f\x98", b"\xf0\x9f\x98\x80", b"\xed\xa0\x80", b"\xc0\xaf", b"\x80", b"\x01", b'"', b"\t",
          b"\x00", b"\x00" * 7]


def reference(data: bytes, max_line: int = 1 << 20) -> list[str]:
    splitter = LineSplitter(max_line)
    return splitter.feed_texts(data) + splitter.flush_texts()


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40))
def test_window_lines_equal_line_splitter(pieces: list[bytes]) -> None:
    data = b"".join(pieces)
    assert window_lines(data).to_list() == reference(data)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=200), st.integers(1, 64), st.integers(1, 16))
def test_windows_then_lines_equal_one_pass(pieces: list[bytes], size: int, chunk: int) -> None:
    """Cut into windows at newlines, each framed alone: the same lines as the whole stream framed at once."""
    data = b"".join(pieces)
    chunks = [data[i:i + chunk] for i in range(0, len(data), chunk)]
    cut = list(windows(chunks, size))
    assert b"".join(cut) == data  # every byte in some window: progress counts the bytes of the windows
    got = [line for w in cut for line in window_lines(w).to_list()]
    assert got == reference(data)


def test_over_long_line_is_cut_as_line_splitter_cuts_it() -> None:
    data = b"short\n" + b"x" * 5000 + b"\xff" * 10 + b"\nend\n"
    assert window_lines(data, max_line=4096).to_list() == reference(data, 4096)
    assert len(window_lines(data, max_line=4096)[1]) == 4096


GIN = b'[GIN] 2025/02/20 - 16:34:14 | 200 |    7.6964767s | 192.168.242.247 | POST     "/api/chat"\n'
START = b'time=2025-02-20T16:34:00.000Z level=INFO source=routes.go:1 msg="Listening on 127.0.0.1:11434 (version 0.5.7)"\n'


def test_line_after_copytruncate_padding_is_a_line() -> None:
    """copytruncate under a writer without O_APPEND: NULs as long as the old log, then the writer's next line."""
    data = b"\x00" * 300 + GIN + b"\x00\x00\x00"
    assert window_lines(data).to_list() == reference(data) == [GIN.decode().rstrip("\n")]


def test_padding_over_max_line_does_not_cut_the_line_after_it() -> None:
    data = START + b"\x00" * 5000 + GIN
    assert window_lines(data, max_line=4096).to_list() == reference(data, 4096) == [
        START.decode().rstrip("\n"), GIN.decode().rstrip("\n")]


def test_a_hole_never_makes_a_large_window() -> None:
    """A 64 MB hole read in 1 MB chunks: windows stay near their size, and together still hold every byte."""
    chunk = 1 << 20
    chunks = [START, *([b"\x00" * chunk] * 64), GIN]
    sizes: list[int] = []
    got: list[str] = []
    for w in windows(chunks, 4 << 20):
        sizes.append(len(w))
        got += window_lines(w).to_list()
    assert max(sizes) <= (4 << 20) + chunk
    assert sum(sizes) == sum(map(len, chunks))
    assert got == [START.decode().rstrip("\n"), GIN.decode().rstrip("\n")]


@pytest.mark.parametrize("all_requests", [True, False], ids=["per-line", "columnar"])
@pytest.mark.parametrize("hole", [300, 3 << 20], ids=["small-hole", "hole-over-max-line"])
def test_analyze_finds_the_request_after_copytruncate_padding(tmp_path: Path, all_requests: bool,
                                                                hole: int) -> None:
    """`ietop analyze` on a log a copytruncate left NUL-padded: both framings see the request (each dropped it)."""
    log = tmp_path / "server.log"
    with log.open("wb") as f:
        f.write(START)
        f.seek(hole)  # the hole, as the truncated log has it: sparse, read back as NULs
        f.write(GIN)
    an = Analysis([str(log)], all_requests=all_requests)
    try:
        out = io.StringIO()
        an.write_json(out)
    finally:
        an.close()
    doc = json.loads(out.getvalue())
    assert [(r["method"], r["path"], r["status"]) for r in doc["requests"]] == [("POST", "/api/chat", 200)]
    assert doc["sources"][0]["lines"] == 2
