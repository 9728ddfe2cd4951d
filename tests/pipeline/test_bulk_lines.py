"""The columnar reader frames a window into exactly the lines LineSplitter gives (the per-line path's)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ietop.pipeline.bulk.lines import window_lines, windows
from parsers.text.framing import LineSplitter

# Bytes that make framing and decoding interesting: newlines, CRs, invalid and truncated UTF-8, SOH.
PIECES = [b"\n", b"\r", b"\r\n", b"a", b" ", b"\xff", b"\xfe", b"\xc3", b"\xa9", b"\xe2\x82", b"\xe2\x82\xac",
          b"\xf0\x9f\x98", b"\xf0\x9f\x98\x80", b"\xed\xa0\x80", b"\xc0\xaf", b"\x80", b"\x01", b'"', b"\t"]


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
    got = [line for w in windows(chunks, size) for line in window_lines(w).to_list()]
    assert got == reference(data)


def test_over_long_line_is_cut_as_line_splitter_cuts_it() -> None:
    data = b"short\n" + b"x" * 5000 + b"\xff" * 10 + b"\nend\n"
    assert window_lines(data, max_line=4096).to_list() == reference(data, 4096)
    assert len(window_lines(data, max_line=4096)[1]) == 4096
