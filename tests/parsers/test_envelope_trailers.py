"""Trailing CRs and `<br>` tags come off a pasted line in linear time (a megabyte of CRs was quadratic: found by
bench/fuzz_campaign.py)."""

from __future__ import annotations

import pytest

from parsers.text.envelope import _strip_trailers


@pytest.mark.parametrize(("line", "stripped"), [
    ("a\r", "a"), ("a<br/>\r", "a"), ("a<BR>", "a"), ("a<br />\r\r<br>", "a"), ("<br>", ""), ("x>", "x>"),
    ("no trailer", "no trailer"), ("", ""),
])
def test_trailers(line: str, stripped: str) -> None:
    assert _strip_trailers(line) == stripped


def test_a_megabyte_of_carriage_returns() -> None:
    assert _strip_trailers("x" + "\r" * 1_000_000) == "x"
    assert _strip_trailers("y" + "<br/>" * 200_000) == "y"


def test_json_nested_a_thousand_deep_is_not_json_to_the_parsers() -> None:
    """json.loads raises RecursionError, not ValueError, past ~1,000 levels (found by bench/fuzz_campaign.py)."""
    from parsers.api.engine_api import _json
    from parsers.ollama.llamacpp import parse_json_line

    deep = '{"":' * 5000 + "{" + "}" * 5001
    assert _json(deep.encode()) is None
    assert parse_json_line(deep, 1) is None
