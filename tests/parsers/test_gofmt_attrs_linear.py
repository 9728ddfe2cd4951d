"""slog attributes tokenized in linear time (issue 21): the key pattern tried every position of a long run of
non-space characters without `=` (5,000 digits, a blob), so a 1 MB line took 17 s (found by
bench/fuzz_campaign.py). A key now starts a token; on space-separated attributes, as Go's slog writes them, the
tokens are the old pattern's."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.ollama.gofmt import _ATTR_RE, parse_attrs

OLD = re.compile(r'("[^"\\]*(?:\\.[^"\\]*)*"|[^\s=]+)=("[^"\\]*(?:\\.[^"\\]*)*"|\S*)')
WORD = st.text(alphabet="abcXYZ019._-:/", min_size=1, max_size=8)
VALUE = st.one_of(WORD, WORD.map(lambda w: f'"{w} {w}"'), st.just('""'), st.just('"a=b c"'))
TOKEN = st.one_of(st.tuples(WORD, VALUE).map("=".join), WORD)


@settings(max_examples=500, deadline=None)
@given(st.lists(TOKEN, max_size=12).map(" ".join))
def test_same_tokens_as_before_on_slog_attributes(attrs: str) -> None:
    assert _ATTR_RE.findall(attrs) == OLD.findall(attrs)


def test_a_megabyte_of_runs_without_an_equals_sign() -> None:
    line = ("mar 1" + "0" * 5000 + " 11:39:07 gpu=GPU-1 ") * 200
    assert parse_attrs(line) == {"gpu": "GPU-1"}
