"""`ietop analyze` end to end on mutated real logs (hypothesis; tests/robustness/fuzzing/ has the mutations, in
mutate.py, and the invariants, in checks.py): no traceback, one-line errors, strict and finite JSON, line counts that
add up, the columnar reader agreeing with the per-line one, no terminal control character in the report or the CSV.

Bounded for CI (400 cases: ~35 s on two busy cores); `IETOP_FUZZ_EXAMPLES=5000` runs longer, and
bench/fuzz_campaign.py is the long form. Open known defects (KNOWN, in fuzzing/known.py) are tolerated here and
counted (`--hypothesis-show-statistics`); test_fuzz_known_defects.py holds their reproducers.
"""

from __future__ import annotations

import os
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from tests.robustness.fuzzing.analyze import Workdir
from tests.robustness.fuzzing.cases import Case, case_strategy
from tests.robustness.fuzzing.checks import check_json_text
from tests.robustness.fuzzing.known import new_violations
from tests.robustness.fuzzing.mutate import Recipe, materialize
from tests.robustness.fuzzing.run import check_bounded, fuzz_settings
from tests.robustness.fuzzing.seeds import log_seeds, seed_deck


@fuzz_settings(400)
@given(st.deferred(lambda: case_strategy("analyze")))
def test_analyze_holds_its_invariants_on_mutated_logs(case: Case) -> None:
    check_bounded(case)


def test_console_script_on_a_hostile_log() -> None:
    """The one subprocess case: the installed entry point, as a user runs it, on a log carrying every kind of
    hostile value at once (it runs in-process everywhere else: ~0.5 s of start-up per run)."""
    recipe = Recipe(0, 0, 40, (("number", 3, 0), ("inject", 5, 14), ("nul_pad", 7, 2), ("long", 9, 2),
                               ("ts_hostile", 11, 1), ("field", 13, 4), ("cut", 15, 30)))
    log = Workdir()
    try:
        path = log.write([materialize(recipe, log_seeds(), seed_deck())])[0]
        env = {**os.environ, "COLUMNS": "120"}
        for extra in ([], ["--json"]):
            run = subprocess.run([sys.executable, "-m", "ietop", "analyze", path, *extra], capture_output=True,
                                 text=True, env=env, timeout=120, check=False)
            assert run.returncode in (0, 1), run.stderr
            assert "Traceback" not in run.stderr, run.stderr
            if run.returncode:
                assert run.stderr.count("\n") == 1 and run.stdout == "", run.stderr
            elif extra:
                _doc, found = check_json_text(run.stdout, "json")
                new, _seen = new_violations(found)
                assert not new, [v.signature for v in new]
    finally:
        log.cleanup()


def test_a_case_with_access_lines_is_also_checked_in_a_time_window() -> None:
    """One case in three that has GIN lines runs --json with and without --all-requests inside --since/--until
    too, and the two documents must agree (the columnar reader splits runs of probes at the bounds)."""
    from tests.robustness.fuzzing.analyze import check_analyze, time_window
    from tests.robustness.fuzzing.cases import Input

    def probes(minute: int) -> bytes:
        return b"".join(b"[GIN] 2026/06/20 - 10:%02d:%02d | 200 |      52.021\xc2\xb5s |       127.0.0.1 | HEAD     "
                        b"\"/\"\n" % (minute, s // 3) for s in range(90))

    task = (b"slot update_slots: id  0 | task 7 | new prompt, n_ctx_slot = 4096, n_keep = 4, task.n_tokens = 100\n"
            b"slot      release: id  0 | task 7 | stop processing: n_tokens = 120, truncated = 0\n")
    start = b'time=2026-06-20T10:00:00.000Z level=INFO source=routes.go:1 msg="Listening on 127.0.0.1:11434 ' \
            b'(version 0.32.7)"\n'
    files = next(f for n in range(30) if time_window(f := (start + probes(0) + task + b"#%d\n" % n + probes(1),)))
    assert time_window(files)[1::2] == ["2026-06-20T10:00:20", "2026-06-20T10:01:10"]
    assert check_analyze(Input("analyze", files)) == []
