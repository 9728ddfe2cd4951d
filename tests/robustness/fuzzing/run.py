"""Structure-aware fuzzing of ietop's parsers and `ietop analyze`: the engine shared by the bounded tests
(tests/robustness/test_fuzz_*.py, in CI) and the long campaign (bench/fuzz_campaign.py, on demand). This module
runs a case (`run_case`, `check_bounded`), minimizes a failing one and shows it; the rest of the package:

* seeds.py: the fixture and SYNTHETIC seeds a case starts from;
* mutate.py: the operations that mutate a window of a seed (`Recipe`, `OPS`);
* cases.py: a `Case`, drawn by hypothesis or a seeded generator, and the `Input` it materializes to;
* checks.py: the invariants (`Violation.kind`) and their oracles;
* analyze.py, targets.py: the targets, each running the product on an `Input` and checking it;
* known.py: the known defects (`KNOWN`) a bounded test tolerates while they are open;
* campaign.py: the long campaign's worker and run records (bench/fuzz_campaign.py drives them).

What is fuzzed
--------------
Four targets, each a `Target` that draws a case, materializes it to bytes (`Input`) and checks it:

* ``analyze``: `ietop analyze` end to end, in-process through `ietop.cli.main` (a subprocess costs ~0.5 s of
  interpreter start; in-process a case costs ~50-150 ms for its three runs: the plain report, `--json` by the
  columnar reader, `--json --all-requests` by the per-line reader; `--csv` on every CSV_EVERY-th case).
* ``parsers``: the engine parsers themselves (Ollama, vLLM, MLX, the proxy JSONL), line by line as the
  pipeline feeds them (framing, `strip_inner`, `parse`, `flush`), plus `detect_engine`.
* ``text``: framing (`split_lines` under any chunking, the columnar `window_lines` it must equal), envelopes,
  journald/vLLM JSON records, run starts.
* ``api``: engine API answers (`/api/ps`, `/api/version`, `/v1/models`, `/health`), the proxy's `StreamMeter`,
  proxy JSONL records, Prometheus scrapes.

Why hypothesis, and no coverage-guided (atheris) target
--------------------------------------------------------
`pip install atheris` works here: 3.0.0 comes as a manylinux cp311 wheel (nothing to compile), and it runs. It
was tried and not adopted:

1. Measured: 60 s of atheris on the four engine parsers plus `detect_engine` (all instrumented, seeded with 666
   20-line slices of the fixtures) ran 36,884 inputs, reached ~1,600 edges and found nothing; in the same minute
   the structured mutator finds the proxy JSONL OverflowError (KNOWN N1) and more.
2. The defects that matter here are semantic: an `Infinity` in `--json`, a C1 control in the report, a line
   count that does not add up, the columnar reader disagreeing with the per-line one. They need a well-formed
   multi-line log around one hostile field and an oracle over the whole report; byte mutations guided by edge
   coverage spend their time on prefixes the first regex rejects.
3. Coverage sees little of the hot path: its branches are taken inside `re` (C) and polars (Rust).
4. It is a native dependency with no macOS arm64 wheel for 3.0.0 (pip finds only 2.2.2 there): MLX users and
   their machines are on macOS. hypothesis is already a test dependency, so pyproject.toml is unchanged.

Hypothesis drives the bounded tests: it shrinks a failing `Recipe` (fewer operations, a shorter window, the
first seed) so a failure reads as a small input. The campaign draws the same recipes from a seeded
`random.Random` (a case is reproducible from `(seed, target, index)`), runs each case in a worker process
under a hard per-case timeout (hangs), and minimizes each new failure itself (line- then byte-level ddmin).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import time
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tests.robustness.fuzzing.analyze import check_analyze
from tests.robustness.fuzzing.cases import Case, Input, case_input
from tests.robustness.fuzzing.checks import HANG_S, CaseTimeout, Violation
from tests.robustness.fuzzing.known import new_violations, outside_key
from tests.robustness.fuzzing.targets import check_api, check_glued, check_parsers, check_scaling, check_text

if TYPE_CHECKING:
    import hypothesis


# ---------------------------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    name: str
    check: Callable[[Input], list[Violation]]


def _analyze_check(inp: Input) -> list[Violation]:
    return check_analyze(inp)


TARGETS: dict[str, Target] = {
    "analyze": Target("analyze", _analyze_check),
    "parsers": Target("parsers", check_parsers),
    "text": Target("text", check_text),
    "api": Target("api", check_api),
    "glued": Target("glued", check_glued),
    "scaling": Target("scaling", check_scaling),
}
FUZZ_TARGETS = ("analyze", "parsers", "text", "api")
"""What the tests and the campaign draw cases for (`glued` and `scaling` only rerun known defects' reproducers)."""


# ---------------------------------------------------------------------------------------- bounded tests


@contextlib.contextmanager
def watchdog(seconds: float = HANG_S) -> Iterator[None]:
    """SIGALRM after `seconds` (main thread, POSIX): a best effort in-process (C code such as a regex or
    polars only sees the signal when it returns); the campaign also runs cases in a killable worker."""
    if not hasattr(signal, "setitimer") or seconds <= 0:
        yield
        return

    def fire(_signum: int, _frame: types.FrameType | None) -> None:
        raise CaseTimeout(f"case ran over {seconds:.0f} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def fuzz_settings(default: int) -> hypothesis.settings:
    """The bounded tests' hypothesis settings: `fuzz_examples(default)` examples, no deadline (a busy CI machine
    must not turn a slow case into a failure: hangs have their own alarm), and no explain phase (it reruns a
    failing analyze case hundreds of times: 95 s measured, for a line of commentary)."""
    from hypothesis import HealthCheck, Phase, settings

    return settings(max_examples=fuzz_examples(default), deadline=None,
                    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def fuzz_examples(default: int) -> int:
    """max_examples of a bounded fuzz test: IETOP_FUZZ_EXAMPLES when set (to run longer), else `default`."""
    value = os.environ.get("IETOP_FUZZ_EXAMPLES", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else default


def check_bounded(case: Case) -> None:
    """The bounded tests' step: run the case under the watchdog, count the open known defects it shows
    (`hypothesis.event`), fail on anything else with the input in the message."""
    from hypothesis import event

    inp = case_input(case)
    try:
        with watchdog():
            violations = run_case(inp)
    except CaseTimeout as exc:  # a BaseException: turned into a violation, known (N7, N14) or not
        violations = [Violation("hang", outside_key(inp.target, inp), str(exc))]
    new, seen = new_violations(violations)
    for k in seen:
        event(f"open known defect {k.id}")
    assert not new, describe(new, inp)


def describe(violations: Sequence[Violation], inp: Input) -> str:
    """A failure message: each violation, then the input as one line per file and how to run it."""
    rows = [f"{v.signature} ({v.mode or inp.target}): {v.detail}" for v in violations]
    files = [f"  file {i}: {one_line(data, 600)}" for i, data in enumerate(inp.files)]
    how = (f"  target {inp.target}, option {inp.option or '-'}, arg {inp.arg}"
           + (", with --csv" if inp.csv else ""))
    return "\n".join([*rows, *files, how])


def run_case(inp: Input) -> list[Violation]:
    """The target's check, with exceptions of the harness itself reported rather than lost."""
    return TARGETS[inp.target].check(inp)


# -------------------------------------------------------------------------------------------- minimizer


def _still(inp: Input, signature: str, check: Callable[[Input], list[Violation]]) -> bool:
    try:
        return any(v.signature == signature for v in check(inp))
    except CaseTimeout:
        return signature.startswith("hang")


def minimize(inp: Input, signature: str, check: Callable[[Input], list[Violation]] | None = None,
             budget_s: float = 60.0) -> Input:
    """The smallest input (ddmin over lines, then over the bytes of each remaining line) whose check still
    reports `signature`; stops at `budget_s`."""
    run = check or run_case
    deadline = time.monotonic() + budget_s
    current = inp
    for f in range(len(inp.files)):
        current = _minimize_file(current, f, signature, run, deadline)
    return current


def _minimize_file(inp: Input, f: int, signature: str, run: Callable[[Input], list[Violation]],
                   deadline: float) -> Input:
    def rebuild(lines: Sequence[bytes]) -> Input:
        return dataclasses.replace(inp, files=_with(inp.files, f, b"\n".join(lines)))

    lines = _ddmin(inp.files[f].split(b"\n"), lambda keep: _still(rebuild(keep), signature, run), deadline)
    for li in range(len(lines)):
        if len(lines[li]) > 1:
            lines[li] = _minimize_line(lines, li, rebuild, signature, run, deadline)
    return rebuild(lines)


def _minimize_line(lines: list[bytes], li: int, rebuild: Callable[[Sequence[bytes]], Input], signature: str,
                   run: Callable[[Input], list[Violation]], deadline: float) -> bytes:
    head, tail = lines[:li], lines[li + 1:]

    def fails(keep: list[int]) -> bool:
        return _still(rebuild([*head, bytes(keep), *tail]), signature, run)

    kept: list[int] = _ddmin(list(lines[li]), fails, deadline)
    return bytes(kept)


def _with(files: tuple[bytes, ...], i: int, data: bytes) -> tuple[bytes, ...]:
    return (*files[:i], data, *files[i + 1:])


T = typing.TypeVar("T")


def _ddmin(items: list[T], fails: Callable[[list[T]], bool], deadline: float) -> list[T]:
    """Zeller's ddmin, complements only: remove chunks while the failure stays; halve the chunk when none can
    go. Greedy, bounded by `deadline`."""
    n = 2
    while len(items) >= 2 and time.monotonic() < deadline:
        size = max(1, len(items) // n)
        removed = False
        start = 0
        while start < len(items) and time.monotonic() < deadline:
            candidate = items[:start] + items[start + size:]
            if candidate and fails(candidate):
                items = candidate
                removed = True
            else:
                start += size
        if not removed:
            if size == 1:
                break
            n = min(len(items), n * 2)
    return items


def one_line(data: bytes, limit: int = 300) -> str:
    """A reproducer as one printable line (Python bytes literal), long runs folded: b'9'*400 and b'\\x00'*4096,
    and a line that is one unit repeated as unit*count."""
    if len(data) > 2000:
        for p in range(1, 301):
            if data[p:] == data[:-p]:
                count = len(data) // p
                rest = data[count * p:]
                return f"{data[:p]!r}*{count}" + (f"+{rest!r}" if rest else "")
    text = repr(data)
    text = re.sub(r"(9{20,}|0{20,}|(?:\\x00){8,}|x{20,}|m{20,})", lambda m: _fold(m.group()), text)
    text = text.removeprefix("b''+").removesuffix("+b''")
    return text if len(text) <= limit else text[:limit] + f"…({len(data)} bytes)"


def _fold(run: str) -> str:
    unit = "\\x00" if run.startswith("\\x00") else run[0]
    count = len(run) // len(unit)
    return f"'+b'{unit}'*{count}+b'"
