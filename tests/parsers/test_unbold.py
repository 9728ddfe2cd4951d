"""Markdown bold removed from pasted lines in linear time (issue 21: the regex's lazy scan made a long line
of `**kwargs` take minutes). `unbold` must do exactly what the regex does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.text.envelope import BOLD_RE, unbold

PIECES = st.sampled_from(["**", "*", " ", "\t", "a", "b)", "x=1", "é", "***", "  "])


@settings(max_examples=3000, deadline=None)
@given(st.lists(PIECES, max_size=24).map("".join))
def test_same_as_the_regex(line: str) -> None:
    assert unbold(line) == BOLD_RE.sub(r"\1", line)


@given(st.text(max_size=60))
def test_same_as_the_regex_on_any_text(line: str) -> None:
    assert unbold(line) == BOLD_RE.sub(r"\1", line)


def test_pasted_lines() -> None:
    assert unbold('**time=2024-05-01T10:00:00Z level=INFO msg="llama runner started"**') == (
        'time=2024-05-01T10:00:00Z level=INFO msg="llama runner started"')
    assert unbold("****NvRmMemInit failed****") == "****NvRmMemInit failed****"


def test_a_megabyte_of_openers_without_closers() -> None:
    line = " **a)" * 200_000  # quadratic for the regex: minutes; here one pass
    assert unbold(line) == line
