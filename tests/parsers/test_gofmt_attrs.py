"""parse_attrs remembers attribute texts it has seen (scheduler lines repeat them): same answers, bounded."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.ollama import gofmt
from parsers.ollama.gofmt import parse_attrs, unquote
from parsers.text.memo import MAX_KEY_LEN


def obvious_attrs(attrs: str) -> dict[str, str]:
    return {unquote(k): unquote(v) for k, v in gofmt._ATTR_RE.findall(attrs)}


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(['a=1', 'b="x y"', '"k k"=v', 'c=', 'd="q\\"q"', 'e="unterminated', ' ', '=', 'f=2']),
                max_size=8).map(" ".join))
def test_same_answer_first_time_and_remembered(attrs: str) -> None:
    first = dict(parse_attrs(attrs))
    assert first == obvious_attrs(attrs)
    assert dict(parse_attrs(attrs)) == first


def test_memory_is_bounded() -> None:
    for i in range(3 * gofmt._ATTRS_SEEN_MAX):
        assert parse_attrs(f"id={i} model=m") == {"id": str(i), "model": "m"}
    assert len(gofmt._ATTRS_SEEN) <= gofmt._ATTRS_SEEN_MAX


def test_long_texts_are_not_remembered() -> None:
    long = "prompt=" + "x" * (MAX_KEY_LEN + 10)
    assert parse_attrs(long) == {"prompt": "x" * (MAX_KEY_LEN + 10)}
    assert long not in gofmt._ATTRS_SEEN
