"""llama.cpp text-server values (`n_ctx=2048 tid="1306"`) read without json.loads where that is safe: the
same value json.loads gives, or the raw text where json.loads refuses it."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.ollama.llamacpp import _json_value


def obvious(raw: str) -> object:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


_values = st.one_of(
    st.text(alphabet='0123456789-+.eE"\\ \t\x00\x7fé\u2028xa', max_size=12),
    st.integers(0, 10**30).map(str),
    st.text(max_size=8).map(lambda t: f'"{t}"'),
    st.sampled_from(["0", "007", "-1", "1.5", "true", "null", '""', '"', '"a"b"', '"\\u00e9"', "1" * 5000]),
)


@settings(max_examples=3000, deadline=None)
@given(_values)
def test_values_read_as_json_would(raw: str) -> None:
    got, want = _json_value(raw), obvious(raw)
    assert got == want and type(got) is type(want), (raw, got, want)
