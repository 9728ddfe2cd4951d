"""LineSplitter: lines and offsets must not depend on how the bytes were chunked.

The tailer feeds whatever ``read`` returned, so chunk boundaries fall anywhere: inside
a line, inside a CRLF, inside a multi-byte UTF-8 character, inside an over-long line.
The reference semantics are ``data.split(b"\\n")`` decoded line by line, NULs at the start of
each line dropped as padding (``expected``).
"""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from parsers.text.framing import Line, LineSplitter, split_lines, split_texts


def expected(data: bytes, max_line: int, *, final: bool = True) -> list[Line]:
    """Reference framing, written the slow obvious way."""
    out: list[Line] = []
    offset = 0
    parts = data.split(b"\n")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        pad = len(part) - len(part.lstrip(b"\x00"))
        part, offset = part[pad:], offset + pad
        if len(part) > max_line:
            # An over-long line is known to be cut before its newline arrives.
            out.append(Line(offset, part[:max_line].decode("utf-8", "replace"), True))
        elif last and (not part or not final):
            pass
        else:
            body = part[:-1] if part.endswith(b"\r") else part
            out.append(Line(offset, body.decode("utf-8", "replace"), False))
        offset += len(part) + 1
    return out


def feed_chunks(data: bytes, cuts: list[int], max_line: int) -> tuple[list[Line], list[Line]]:
    splitter = LineSplitter(max_line)
    fed: list[Line] = []
    bounds = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    for a, b in pairwise(bounds):
        fed.extend(splitter.feed(data[a:b]))
        assert splitter.pending <= max_line
    return fed, splitter.flush()


def test_partial_line_is_held_until_newline() -> None:
    sp = LineSplitter()
    assert sp.feed(b"time=1 a\ntime=2 b") == [Line(0, "time=1 a", False)]
    assert sp.pending == len(b"time=2 b")
    assert sp.feed(b" more\n") == [Line(9, "time=2 b more", False)]
    assert sp.pending == 0
    assert sp.flush() == []


def test_flush_returns_unterminated_last_line() -> None:
    sp = LineSplitter()
    assert sp.feed(b"a\nb") == [Line(0, "a", False)]
    assert sp.flush() == [Line(2, "b", False)]
    assert sp.flush() == []


def test_crlf_and_lone_cr() -> None:
    data = b"one\r\ntwo\r\r\nthree\rx\n"
    assert list(split_lines([data])) == [
        Line(0, "one", False),
        Line(5, "two\r", False),
        Line(11, "three\rx", False),
    ]


def test_crlf_split_between_chunks() -> None:
    assert list(split_lines([b"one\r", b"\ntwo\r"])) == [Line(0, "one", False), Line(5, "two", False)]


def test_invalid_utf8_replaced_and_nul_kept() -> None:
    lines = list(split_lines([b"bad \xff\xfe end\n", b"nul \x00 here\n"]))
    assert lines == [Line(0, "bad \ufffd\ufffd end", False), Line(11, "nul \x00 here", False)]


def test_nul_padding_before_a_line_is_dropped_and_counted() -> None:
    """copytruncate under a writer without O_APPEND: a hole of NULs as long as the old log, then its next line."""
    sp = LineSplitter()
    assert sp.feed(b"\x00" * 4096) == []
    assert sp.pending == 0  # padding is never held: a hole of any size costs no memory
    assert sp.feed(b"\x00" * 10 + b"time=1 after\nnext\n") == [Line(4106, "time=1 after", False), Line(4119, "next", False)]
    assert sp.padding == 4106


def test_padding_longer_than_max_line_does_not_cut_the_line() -> None:
    assert list(split_lines([b"\x00" * 5000, b"\x00" * 5000 + b"real line\n"], max_line=100)) == [
        Line(10_000, "real line", False)
    ]


def test_nul_padding_only_at_line_starts() -> None:
    data = b"a\x00b\n\x00\x00\r\n\x00\x00\n\x00c\x00\n\x00\x00"
    assert list(split_lines([data])) == [
        Line(0, "a\x00b", False),  # inside a line a NUL is data
        Line(6, "", False),  # padding then a line ending: still a line, so line numbers stay wc -l's
        Line(10, "", False),
        Line(12, "c\x00", False),
    ]  # trailing padding with no line after it is no line


def test_multibyte_char_split_across_chunks() -> None:
    data = "[GIN] | 200 | 16.724µs |\n7月 21\n".encode()
    mu = data.index("µ".encode())
    lines = list(split_lines([data[: mu + 1], data[mu + 1 :]]))
    assert [ln.text for ln in lines] == ["[GIN] | 200 | 16.724µs |", "7月 21"]
    assert lines[1].offset == data.index("7月".encode())


def test_empty_lines_are_lines() -> None:
    assert list(split_lines([b"\n\na\n\n"])) == [
        Line(0, "", False),
        Line(1, "", False),
        Line(2, "a", False),
        Line(4, "", False),
    ]


def test_cut_line_flagged_and_offsets_right() -> None:
    data = b"short\n" + b"x" * 25 + b"\nafter\n"
    lines = list(split_lines([data], max_line=10))
    assert lines == [Line(0, "short", False), Line(6, "x" * 10, True), Line(32, "after", False)]


def test_line_of_exactly_max_is_not_cut() -> None:
    assert list(split_lines([b"x" * 10, b"\n"], max_line=10)) == [Line(0, "x" * 10, False)]


def test_endless_line_keeps_memory_bounded() -> None:
    sp = LineSplitter(max_line=100)
    first = sp.feed(b"y" * 60)
    assert first == []
    cut = sp.feed(b"y" * 60)
    assert cut == [Line(0, "y" * 100, True)]
    for _ in range(1000):
        assert sp.feed(b"y" * 4096) == []
        assert sp.pending == 0
    rest = sp.feed(b"yy\nnext\n")
    assert rest == [Line(120 + 4096 * 1000 + 3, "next", False)]


def test_start_offset() -> None:
    sp = LineSplitter(start_offset=1000)
    assert sp.feed(b"a\nbc\n") == [Line(1000, "a", False), Line(1002, "bc", False)]
    assert sp.offset == 1005


def test_bad_max_line() -> None:
    with pytest.raises(ValueError, match="max_line"):
        LineSplitter(max_line=0)


# Bytes biased towards the interesting ones: newline, CR, NUL, UTF-8 lead and
# continuation bytes, invalid bytes.
_bytes = st.lists(
    st.one_of(
        st.sampled_from([b"\n", b"\r", b"\r\n", b"\x00", "µ".encode(), "月".encode(), b"\xff", b"\xe6\x9c"]),
        st.binary(max_size=8),
    ),
    max_size=60,
).map(b"".join)


@given(data=_bytes, cuts=st.lists(st.integers(min_value=0), max_size=12), max_line=st.integers(1, 40))
def test_chunking_does_not_matter(data: bytes, cuts: list[int], max_line: int) -> None:
    fed, flushed = feed_chunks(data, cuts, max_line)
    whole, whole_flushed = feed_chunks(data, [], max_line)
    assert fed + flushed == whole + whole_flushed == expected(data, max_line)
    assert fed == expected(data, max_line, final=False)


@given(data=_bytes, cuts=st.lists(st.integers(min_value=0), max_size=12))
def test_offsets_point_at_the_line(data: bytes, cuts: list[int]) -> None:
    fed, flushed = feed_chunks(data, cuts, 1 << 20)
    for line in fed + flushed:
        raw = line.text.encode("utf-8") if "\ufffd" not in line.text else b""
        assert data[line.offset :].startswith(raw)
        assert line.offset == 0 or data[: line.offset].rstrip(b"\x00")[-1:] in (b"", b"\n")
        assert data[line.offset : line.offset + 1] != b"\x00"


@given(text=st.text(max_size=200), cuts=st.lists(st.integers(min_value=0), max_size=8))
def test_valid_utf8_round_trips(text: str, cuts: list[int]) -> None:
    data = text.encode("utf-8")
    fed, flushed = feed_chunks(data, cuts, 1 << 20)
    parts = [p.lstrip("\x00") for p in text.split("\n")]  # leading NULs are padding
    if not parts[-1]:
        parts.pop()
    assert [ln.text for ln in fed + flushed] == [p.removesuffix("\r") for p in parts]


@given(data=_bytes, cuts=st.lists(st.integers(min_value=0), max_size=12), max_line=st.integers(1, 40),
       texts_at=st.lists(st.booleans(), max_size=14))
def test_texts_are_the_lines_texts(data: bytes, cuts: list[int], max_line: int, texts_at: list[bool]) -> None:
    """feed_texts/flush_texts give each line's text, whatever the chunking, and may be mixed with feed()."""
    splitter = LineSplitter(max_line)
    got: list[str] = []
    bounds = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    for i, (a, b) in enumerate(pairwise(bounds)):
        if i < len(texts_at) and texts_at[i]:
            got.extend(splitter.feed_texts(data[a:b]))
        else:
            got.extend(line.text for line in splitter.feed(data[a:b]))
        assert splitter.pending <= max_line
    got.extend(splitter.flush_texts())
    assert got == [line.text for line in expected(data, max_line)]


@given(data=_bytes, cuts=st.lists(st.integers(min_value=0), max_size=12))
def test_split_texts_is_split_lines(data: bytes, cuts: list[int]) -> None:
    bounds = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    chunks = [data[a:b] for a, b in pairwise(bounds)]
    assert [t for batch in split_texts(chunks, 16) for t in batch] == [ln.text for ln in split_lines(chunks, 16)]
