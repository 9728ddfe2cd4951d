"""The parsers on their own, on mutated fixture lines (hypothesis; tests/robustness/fuzzing/ has the mutations):
every engine parser, `detect_engine`, the framing and its columnar twin, envelopes, JSON records, run starts, the
engine API answers, the proxy's stream meter and JSONL, Prometheus scrapes. None may raise; each returns its
documented types; NUL padding before a line does not change what the line says; chunking does not change the lines.

Bounded for CI (~15 s); `IETOP_FUZZ_EXAMPLES` runs each longer.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.robustness.fuzzing.cases import Case, case_strategy
from tests.robustness.fuzzing.run import check_bounded, fuzz_settings


@fuzz_settings(500)
@given(st.deferred(lambda: case_strategy("parsers")))
def test_engine_parsers_hold_on_mutated_lines(case: Case) -> None:
    check_bounded(case)


@fuzz_settings(300)
@given(st.deferred(lambda: case_strategy("text")))
def test_framing_and_text_helpers_hold_on_mutated_bytes(case: Case) -> None:
    check_bounded(case)


@fuzz_settings(300)
@given(st.deferred(lambda: case_strategy("api")))
def test_api_answers_streams_and_scrapes_hold_on_mutated_bodies(case: Case) -> None:
    check_bounded(case)
