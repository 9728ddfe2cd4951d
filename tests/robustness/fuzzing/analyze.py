"""The analyze target: `ietop analyze` end to end, in-process through `ietop.cli.main` (a subprocess costs ~0.5 s
of interpreter start), each case's runs checked against the invariants of checks.py.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
import shutil
import tempfile
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.robustness.fuzzing.cases import Input
from tests.robustness.fuzzing.checks import (
    HANG_S,
    CaseTimeout,
    Violation,
    check_json_text,
    check_lines,
    control_chars,
    exc_detail,
    exc_key,
    same_facts,
)


class _Capture(io.StringIO):
    """stdout/stderr for an in-process run: `main` closes stderr on a broken pipe; keep the text readable."""

    def close(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


@dataclass
class CliRun:
    code: int | None
    out: str
    err: str
    exc: BaseException | None
    seconds: float


def run_cli(argv: Sequence[str]) -> CliRun:
    """`ietop.cli.main(argv)` in this process, its output captured; SystemExit is an exit (argparse exits
    that way), any other exception escaping it is what a user sees as a traceback."""
    from ietop.cli import main

    out, err = _Capture(), _Capture()
    exc: BaseException | None = None
    code: int | None = None
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            if isinstance(stop.code, str):
                err.write(stop.code + "\n")
        except CaseTimeout:
            raise
        except Exception as e:  # what would print a traceback
            exc = e
    return CliRun(code, out.getvalue(), err.getvalue(), exc, time.perf_counter() - t0)


class Workdir:
    """A private directory for the files of the cases of one process, reused case after case."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="ietop-fuzz-"))

    def write(self, files: Sequence[bytes]) -> list[str]:
        paths = []
        for i, data in enumerate(files):
            p = self.path / f"case{i}.log"
            p.write_bytes(data)
            paths.append(str(p))
        return paths

    def csv_dir(self) -> Path:
        d = self.path / "csv"
        shutil.rmtree(d, ignore_errors=True)
        return d

    def cleanup(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


@functools.lru_cache(maxsize=1)
def _workdir() -> Workdir:
    return Workdir()


def _check_exit(mode: str, run: CliRun) -> list[Violation]:
    out: list[Violation] = []
    if run.exc is not None:
        return [Violation("crash", exc_key(run.exc), exc_detail(run.exc), mode)]
    if "Traceback (most recent call last)" in run.err:
        out.append(Violation("stderr", "traceback on stderr", run.err[-300:], mode))
    if run.code not in (0, 1, 2):
        out.append(Violation("exit", f"code {run.code}", run.err[-200:], mode))
    elif run.code == 2:
        out.append(Violation("exit", "usage error for readable files", run.err[-200:], mode))
    if run.code != 0:
        lines = run.err.splitlines()
        errors = [ln for ln in lines if not ln.startswith("ietop: note:")]
        if len(errors) != 1 or not errors[0].startswith("ietop: error:") or not run.err.endswith("\n"):
            out.append(Violation("stderr", "failure not one 'ietop: error:' line", repr(run.err[-300:]), mode))
        if run.out:
            out.append(Violation("partial_stdout", f"exit {run.code}", repr(run.out[:200]), mode))
    if run.seconds > HANG_S:
        out.append(Violation("hang", f"analyze {mode}", f"{run.seconds:.1f} s", mode))
    return out


_GIN_STAMP = re.compile(rb"\[GIN\] (\d{4})/(\d\d)/(\d\d) - (\d\d:\d\d:\d\d) \|")


def time_window(files: Sequence[bytes]) -> list[str]:
    """`--since A --until B` at a third and two thirds of the case's GIN stamps, for one case in three that has
    any (drawn from its content, so a case and its minimized forms keep the choice); else []. A bound falls
    inside runs of probes, which the columnar reader then splits (ietop.pipeline.bulk.stream._timed_counts)."""
    data = b"".join(files)
    if zlib.crc32(data) % 3:
        return []
    stamps = [text for m in _GIN_STAMP.finditer(data) if _valid(text := (b"%s-%s-%sT%s" % m.groups()).decode())]
    if not stamps:
        return []
    # A log's stamps need not rise (restarts, mutations): the earlier one is --since, as the CLI requires.
    since, until = sorted((stamps[len(stamps) // 3], stamps[2 * len(stamps) // 3]))
    return ["--since", since, "--until", until]


def _valid(stamp: str) -> bool:
    """A time --since takes (a mutated stamp may be 2025-02-29 or 24:00:00, which the CLI refuses)."""
    try:
        datetime.fromisoformat(stamp)
    except ValueError:
        return False
    return True


def check_analyze(inp: Input, modes: Sequence[str] | None = None, workdir: Workdir | None = None) -> list[Violation]:
    """Run `ietop analyze` on the case's files (text, json, json_all, and csv when `inp.csv`; json_win and
    json_all_win, the JSON of a time window, when `time_window` gives one) and check every invariant. `modes`
    restricts the runs (the minimizer reruns only the one that failed)."""
    wd = workdir or _workdir()
    paths = wd.write(inp.files)
    base = ["analyze", *paths] + (["--engine", inp.option] if inp.option else [])
    window = time_window(inp.files)
    wanted = list(modes) if modes is not None else ["text", "json", "json_all"] + (["csv"] if inp.csv else []) \
        + (["json_win", "json_all_win"] if window else [])
    for one, other in (("json_all", "json"), ("json_all_win", "json_win")):
        if other in wanted and one not in wanted:
            wanted.append(one)  # the differential needs both
        if one in wanted and other not in wanted:
            wanted.insert(0, other)
    argv = {"text": base, "json": [*base, "--json"], "json_all": [*base, "--json", "--all-requests"],
            "json_win": [*base, "--json", *window], "json_all_win": [*base, "--json", "--all-requests", *window]}
    csv_dir = wd.csv_dir() if "csv" in wanted else None
    if csv_dir is not None:
        argv["csv"] = [*base, "--csv", str(csv_dir)]
    runs = {mode: run_cli(argv[mode]) for mode in wanted}
    out: list[Violation] = []
    for mode, run in runs.items():
        out.extend(_check_exit(mode, run))
    codes = {m: r.code for m, r in runs.items() if r.exc is None}
    if len(set(codes.values())) > 1:
        out.append(Violation("modes_disagree", " ".join(f"{m}={c}" for m, c in sorted(codes.items())),
                             "; ".join(f"{m}: {r.err.strip()[:120]}" for m, r in runs.items()), ""))
    text_run = runs.get("text")
    if text_run is not None and text_run.exc is None and text_run.code == 0:
        for cls, cp, ctx in control_chars(text_run.out):
            out.append(Violation("control_char_text", cls, f"{cp} in {ctx!r}", "text"))
    docs: dict[str, Any] = {}
    for mode in ("json", "json_all", "json_win", "json_all_win"):
        json_run = runs.get(mode)
        if json_run is None or json_run.exc is not None or json_run.code != 0:
            continue
        doc, found = check_json_text(json_run.out, mode)
        out.extend(found)
        if isinstance(doc, dict):
            docs[mode] = doc
            out.extend(check_lines(doc, inp.files, mode))
    for folded, listed in (("json", "json_all"), ("json_win", "json_all_win")):
        if folded not in docs or listed not in docs:
            continue
        differs = same_facts(docs[listed], docs[folded])
        if differs is not None:
            engines = "+".join(sorted({str(s.get("engine")) for s in docs[folded].get("sources", [])}))
            out.append(Violation("bulk_differs", f"{differs} ({engines})", "the columnar reader's document "
                                 f"differs from the per-line one's ({' '.join(window) or 'whole log'})", folded))
    if csv_dir is not None and runs["csv"].exc is None and runs["csv"].code == 0:
        for table in sorted(csv_dir.glob("*.csv")):
            body = table.read_text(encoding="utf-8", errors="replace")
            for cls, cp, ctx in control_chars(body):
                out.append(Violation("control_char_csv", f"{cls} in {table.stem}", f"{cp} in {ctx!r}", "csv"))
    # One violation per signature and run: a hostile value copied into ten records is one finding.
    unique: dict[tuple[str, str], Violation] = {}
    for v in out:
        unique.setdefault((v.signature, v.mode), v)
    return list(unique.values())
