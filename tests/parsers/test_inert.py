"""The one definition of what must not reach a human-facing output (parsers.text.inert): for any text, `visible`
leaves none of it and tells distinct characters apart; `escape_json` leaves none of it in JSON that still
decodes to the same values."""

from __future__ import annotations

import json
import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.text.inert import FORBIDDEN, characters, escape_json, stand_in, visible

ALL_FORBIDDEN = [chr(c) for c in range(sys.maxunicode + 1) if FORBIDDEN.fullmatch(chr(c))]
# The tracker's cases and their neighbours: ESC, 8-bit CSI/OSC/DCS/ST, DEL, bidi overrides, isolates and
# marks, line and paragraph separators, invisible characters.
NAMED = "\x1b\x07\r\x9b\x9d\x90\x9c\x7f\x85\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
NAMED += "\u2028\u2029\u200b\u2060\ufeff\xad\ufff9\U000e0001\U000e0041\udcff"

# Any text, surrogates included, with the forbidden characters and text that looks like their stand-ins drawn
# often rather than by chance.
_char = st.one_of(st.characters(exclude_categories=()), st.sampled_from(ALL_FORBIDDEN), st.sampled_from(NAMED))
texts = st.lists(st.one_of(st.text(_char), st.sampled_from(["\\x9b", "\\u202e", "␛", "\\"]))).map("".join)


def test_the_tracker_cases_are_forbidden_and_tab_newline_are_not() -> None:
    for char in NAMED:
        assert FORBIDDEN.fullmatch(char), hex(ord(char))
    for char in "\t\n abc→é中😀\u200c\u200d\ufe0f":
        assert not FORBIDDEN.fullmatch(char), hex(ord(char))


def test_the_literal_list_is_the_pattern_less_the_surrogates() -> None:
    # polars replaces from the list (CSV), Python from the pattern (report, dashboard, JSON): the same set.
    assert sorted(characters()) == [c for c in ALL_FORBIDDEN if not 0xD800 <= ord(c) <= 0xDFFF]


def test_every_forbidden_character_is_non_printable() -> None:
    # visible's and escape_json's fast paths skip printable text: sound only while this holds.
    assert [hex(ord(c)) for c in ALL_FORBIDDEN if c.isprintable()] == []


def test_stand_ins_are_distinct_printable_and_keep_todays_dashboard_forms() -> None:
    shown = [stand_in(c) for c in ALL_FORBIDDEN]
    assert len(set(shown)) == len(shown)
    assert all(s.isprintable() and not FORBIDDEN.search(s) for s in shown)
    assert visible("a\x1b[2Jb\x07c\x9bd") == "a␛[2Jb\\x07c\\x9bd"  # as tui/format.py always showed them
    assert visible("\u202eevil\u2066") == "\\u202eevil\\u2066"
    assert visible("\U000e0041") == "\\U000e0041"


@given(texts)
@settings(max_examples=400, deadline=None)
def test_visible_leaves_nothing_forbidden(text: str) -> None:
    shown = visible(text)
    assert FORBIDDEN.search(shown) is None
    if FORBIDDEN.search(text) is None:
        assert shown == text


@given(st.lists(st.sampled_from(ALL_FORBIDDEN)), st.lists(st.sampled_from(ALL_FORBIDDEN)))
@settings(max_examples=400, deadline=None)
def test_distinct_controls_show_distinct(a: list[str], b: list[str]) -> None:
    # Each stand-in says how long it is ("\x" 2 digits, "\u" 4, "\U" 8, "␛" one): a run of them reads back one
    # way only, so two different runs of controls never show alike.
    if a != b:
        assert visible("".join(a)) != visible("".join(b))


_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                     st.text(_char))
json_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                             st.dictionaries(st.text(_char), inner, max_size=4)),
                           max_leaves=12)


@given(json_values, st.sampled_from([None, 1]))
@settings(max_examples=400, deadline=None)
def test_escape_json_leaves_nothing_forbidden_and_the_same_values(value: Any, indent: int | None) -> None:
    # indent=1 puts newlines between tokens: whitespace outside strings must stay as it is.
    text = escape_json(json.dumps(value, ensure_ascii=False, indent=indent))
    assert FORBIDDEN.search(text) is None
    assert json.loads(text) == value


def test_escape_json_writes_past_the_bmp_as_a_surrogate_pair() -> None:
    assert escape_json(json.dumps("a\U000e0041\x7f", ensure_ascii=False)) == '"a\\udb40\\udc41\\u007f"'
    assert escape_json('"plain ascii"') == '"plain ascii"'
