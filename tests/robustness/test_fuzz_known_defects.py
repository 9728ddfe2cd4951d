"""The fuzz harness's oracles on hand-made inputs, and the one-line reproducer of every defect the fuzzing found
(KNOWN, tests/robustness/fuzzing/known.py).

A known defect still open is a strict xfail here and is tolerated by the bounded fuzz tests; its fix makes the
reproducer pass, the strict xfail then fails (XPASS), and the fix sets `open=False` in KNOWN: from then on the
reproducer is a regression test and the fuzz tests fail on the defect again.
"""

from __future__ import annotations

import pytest

from tests.robustness.fuzzing.cases import Input
from tests.robustness.fuzzing.checks import Violation, check_json_text, control_chars, exc_key, physical_lines
from tests.robustness.fuzzing.known import KNOWN, KnownDefect
from tests.robustness.fuzzing.mutate import DIGITS_400, Recipe, materialize
from tests.robustness.fuzzing.run import TARGETS, describe, minimize, one_line, run_case
from tests.robustness.fuzzing.seeds import log_seeds


def _param(k: KnownDefect) -> object:
    marks = [pytest.mark.xfail(strict=True, reason=f"open known defect: {k.title}")] if k.open else []
    return pytest.param(k, id=k.id, marks=marks)


@pytest.mark.parametrize("defect", [_param(k) for k in KNOWN])
def test_known_defect_reproducer(defect: KnownDefect) -> None:
    found = [v for v in run_case(defect.input) if defect.matches(v)]
    assert not found, f"{defect.id}: {one_line(defect.shown)}\n" + describe(found, defect.input)


def test_every_known_defect_has_a_one_line_reproducer() -> None:
    for k in KNOWN:
        # One line; two where the first sets the state the second trips on (N10, N12) or is what the NULs follow (N16).
        assert k.line.count(b"\n") <= (1 if k.id.startswith(("N10-", "N12-", "N16-")) else 0), k.id
        assert k.target in TARGETS, k.id
        assert len(one_line(k.shown)) < 300, k.id


# The oracles themselves: each must see what it is there to see, or the fuzzing proves nothing.


def test_json_oracle_rejects_non_json_constants_and_overflowing_floats() -> None:
    _doc, found = check_json_text('{"a":[{"b":NaN}],"c":1}', "json")
    assert [(v.kind, v.key) for v in found] == [("json_invalid", "a[].b")]
    _doc, found = check_json_text('{"a":1e999,"n":' + "9" * 20 + ',"s":"x\u009by"}', "json")
    assert {(v.kind, v.key) for v in found} == {("json_nonfinite", "a"), ("json_int_beyond_2^53", "n"),
                                                ("control_char_json", "C1 in s")}
    assert check_json_text("{", "json")[1][0].kind == "json_invalid"


def test_control_character_classes() -> None:
    assert [c for c, _, _ in control_chars("ok\n\ttext ±é")] == []
    assert [c for c, _, _ in control_chars("a\x1bb\x7fc\x85d\u2067e")] == ["C0", "DEL", "C1", "bidi"]
    assert control_chars("\r", allow_c0=True) == []


def test_physical_lines_counts_a_last_unterminated_line() -> None:
    assert [physical_lines(d) for d in (b"", b"a", b"a\n", b"a\nb", b"\n\n")] == [0, 1, 1, 2, 2]


def test_mutations_keep_the_line_structure() -> None:
    seeds = log_seeds()
    base = materialize(Recipe(0, 0, 10), seeds)
    assert base.count(b"\n") == min(10, len(seeds[0].lines))
    for name in ("number", "number_all", "field", "cut", "inject", "nul_pad", "long", "ts_hostile", "crlf", "byte"):
        data = materialize(Recipe(0, 0, 10, ((name, 3, 1),)), seeds)
        assert data.count(b"\n") == base.count(b"\n"), name
    assert DIGITS_400 in materialize(Recipe(0, 0, 10, (("number", 0, 0),)), seeds)


def test_crash_oracle_names_the_innermost_product_frame() -> None:
    from parsers.text.framing import LineSplitter

    with pytest.raises(ValueError, match="max_line") as info:
        LineSplitter(0)
    assert exc_key(info.value) == "ValueError@parsers/text/framing.py:__init__"


def test_minimizer_keeps_the_signature_and_drops_the_rest() -> None:
    def check(inp: Input) -> list[Violation]:
        hit = any(b"BAD" in line for line in inp.files[0].split(b"\n"))
        return [Violation("crash", "x", "")] if hit else []

    data = b"\n".join([b"noise %d" % i for i in range(30)] + [b"xxBADxx"] + [b"more"] * 9)
    small = minimize(Input("text", (data,)), "crash[x]", check, budget_s=10)
    assert small.files == (b"BAD",)
