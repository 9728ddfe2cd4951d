#!/usr/bin/env python3
"""The long fuzz campaign: the targets of tests/robustness/fuzzing/ (analyze, parsers, text, api) in a loop,
for `--minutes` of wall time and/or `--cases` cases, with a JSON report.

Usage::

    .venv/bin/python bench/fuzz_campaign.py --minutes 3                 # a new campaign, random seed
    .venv/bin/python bench/fuzz_campaign.py --minutes 60 --resume       # continue the last seed's case indices
    .venv/bin/python bench/fuzz_campaign.py --cases 2000 --seed 42 --targets analyze,parsers
    .venv/bin/python bench/fuzz_campaign.py --aggregate                 # totals over every run recorded
    .venv/bin/python bench/fuzz_campaign.py --replay bench/out/fuzz/findings/<dir>/case.json
    .venv/bin/python bench/fuzz_campaign.py --case analyze:185 --seed 42   # one case again, minimized

How it runs (and why):

* Reproducible: case `i` of target `t` under seed `s` is drawn from `random.Random(f"{s}:{t}:{i}")`, so a case
  is named by `(seed, target, index)` and `--case` rebuilds it. Runs append to `OUT/runs.jsonl`; `--resume`
  starts each target after the highest index the seed already ran, so resumed runs add cases, not repeats, and
  `--aggregate` can state the CPU time of the whole campaign.
* Hangs: cases run in worker processes (spawned: polars' thread pool does not survive a fork) that the parent
  kills when a case has run over HANG_S (10 s) of wall time *and* of the worker's CPU time, or over HANG_WALL_S
  (60 s) of wall time whatever its CPU (a case blocked on a read uses none), counted from when its input is
  drawn (the worker says "running": drawing it is the harness's work, not ietop's). Wall time alone called a case that
  got a fraction of a core on a busy machine a hang (seen once in run 4, not reproducible). A signal
  in-process would not do: a regex or polars only returns to Python, where a handler runs, when it is done.
* Findings: each new signature (kind + key: exception and innermost frame, JSON path, control-character class)
  is minimized by the worker (ddmin over lines, then bytes, within MINIMIZE_S) and written to
  `OUT/findings/<signature>/` (the input files and `case.json`: what it violates, the command, the case).
  Signatures already on disk are not minimized again.
* CPU: `resource.getrusage` of the parent and of its (reaped) workers; per target, the workers' own
  `time.process_time` per case (minimization apart).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import multiprocessing as mp
import random
import resource
import sys
import time
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timezone
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.robustness.fuzzing.campaign import (  # noqa: E402 - after the path is set up
    MINIMIZE_S,
    aggregate,
    case_at,
    finding_command,
    finding_slug,
    minimize_check,
    read_runs,
    worker,
)
from tests.robustness.fuzzing.cases import Input  # noqa: E402
from tests.robustness.fuzzing.checks import HANG_S, Violation  # noqa: E402
from tests.robustness.fuzzing.known import known, outside_key  # noqa: E402
from tests.robustness.fuzzing.run import FUZZ_TARGETS, TARGETS, minimize, one_line, run_case  # noqa: E402

HANG_WALL_S = 6 * HANG_S


def worker_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a worker (all its threads: polars runs several); 0 once it is gone."""
    try:
        t = psutil.Process(pid).cpu_times()
    except (psutil.Error, OSError):
        return 0.0
    return float(t.user + t.system)

DEFAULT_OUT = ROOT / "bench" / "out" / "fuzz"
SCHEDULE = ("analyze", "parsers", "analyze", "text", "analyze", "parsers", "analyze", "api")
"""Cases are dealt in this order: analyze is the most valuable and the slowest (~10 cases/s against 50-300)."""
CRASH_KINDS = ("crash", "parser_exception", "worker_died")


# --------------------------------------------------------------------------------------------- parent


@dataclasses.dataclass
class Slot:
    """One worker process and what it is doing."""

    proc: Any
    conn: Connection
    busy: bool = False
    """From a case sent to the worker's "idle" (its result, then any minimization)."""
    task: tuple[str, int] | None = None
    deadline: float = float("inf")
    started: float = 0.0
    """When the current case was sent (monotonic), and the worker's CPU seconds then."""
    cpu_at_start: float = 0.0
    minimizing: str | None = None
    sent: int = 0
    """How many of the campaign's signatures this worker was told about."""
    recycle: bool = False
    """Replace the worker once idle (its peak RSS went past MEMORY_MB: it exits by itself)."""


@dataclasses.dataclass
class Finding:
    signature: str
    kind: str
    key: str
    target: str
    detail: str
    first_case: str
    count: int = 0
    known: str | None = None
    reproducer: str | None = None
    one_line: str | None = None
    minimized: bool = False


class Campaign:
    def __init__(self, seed: int, out: Path, targets: Sequence[str], workers: int, start: dict[str, int]) -> None:
        self.seed = seed
        self.out = out
        self.targets = [t for t in SCHEDULE if t in targets] or list(targets)
        self.next = {t: start.get(t, 0) for t in targets}
        self.first = dict(self.next)
        self.cases: Counter[str] = Counter()
        self.cpu: dict[str, float] = dict.fromkeys(targets, 0.0)
        self.min_cpu = 0.0
        self.kinds: dict[str, Counter[str]] = {t: Counter() for t in targets}
        self.findings: dict[str, Finding] = {}
        self.signatures: list[str] = sorted(self._on_disk())
        self.turn = 0
        self.ctx = mp.get_context("spawn")
        self.slots = [self._spawn() for _ in range(workers)]

    def _on_disk(self) -> set[str]:
        found = set()
        for case in (self.out / "findings").glob("*/case.json"):
            try:
                found.add(json.loads(case.read_text())["signature"])
            except (OSError, ValueError, KeyError):
                continue
        return found

    def _spawn(self) -> Slot:
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=worker, args=(child, self.seed), daemon=True)
        proc.start()
        child.close()
        return Slot(proc, parent)

    def _dispatch(self, slot: Slot) -> None:
        target = self.targets[self.turn % len(self.targets)]
        self.turn += 1
        index = self.next[target]
        self.next[target] = index + 1
        skip = self.signatures[slot.sent:]
        slot.sent = len(self.signatures)
        slot.conn.send(("case", target, index, skip))
        slot.task = (target, index)
        slot.busy = True
        slot.started = time.monotonic()
        slot.cpu_at_start = worker_cpu_s(slot.proc.pid)
        slot.deadline = slot.started + 2 * HANG_WALL_S  # drawing the input; the case's own clock starts at "running"

    def run(self, minutes: float | None, max_cases: int | None) -> None:
        end = time.monotonic() + minutes * 60 if minutes else float("inf")
        dealt = 0
        for slot in self.slots:
            if time.monotonic() < end and (max_cases is None or dealt < max_cases):
                self._dispatch(slot)
                dealt += 1
        while any(s.busy for s in self.slots):
            busy = [s for s in self.slots if s.busy]
            timeout = max(0.0, min(s.deadline for s in busy) - time.monotonic())
            ready = wait([s.conn for s in busy], timeout=min(timeout, 1.0))
            for slot in busy:
                if slot.conn in ready:
                    try:
                        msg = slot.conn.recv()
                    except (EOFError, OSError):
                        self._lost(slot, "worker_died", "the worker process died")
                        continue
                    if self._handle(slot, msg) and slot.recycle:
                        self._stop(slot)
                        self._replace(slot)
                    if not slot.busy and time.monotonic() < end and (max_cases is None or dealt < max_cases):
                        self._dispatch(slot)
                        dealt += 1
                elif time.monotonic() > slot.deadline and self._starved(slot):
                    slot.deadline = time.monotonic() + 1.0
                elif time.monotonic() > slot.deadline:
                    self._lost(slot, "hang" if slot.minimizing is None else "minimize_timeout",
                               f"over {HANG_S:.0f} s" if slot.minimizing is None else "minimization ran out")
                    if time.monotonic() < end and (max_cases is None or dealt < max_cases):
                        self._dispatch(slot)
                        dealt += 1
        for slot in self.slots:
            self._stop(slot)

    @staticmethod
    def _starved(slot: Slot) -> bool:
        """A case past its deadline that has not had HANG_S of CPU yet, within HANG_WALL_S: the machine is busy,
        not the case stuck. Minimization keeps its wall-time budget."""
        if slot.minimizing is not None or slot.task is None:
            return False
        if time.monotonic() - slot.started > HANG_WALL_S:
            return False
        return worker_cpu_s(slot.proc.pid) - slot.cpu_at_start < HANG_S

    def _handle(self, slot: Slot, msg: tuple[Any, ...]) -> bool:
        """Returns True when the worker is idle again."""
        if msg[0] == "recycle":  # the worker's peak RSS came from drawing an input: it exits once idle
            slot.recycle = True
            return False
        if msg[0] == "running":
            slot.started = time.monotonic()
            slot.cpu_at_start = worker_cpu_s(slot.proc.pid)
            slot.deadline = slot.started + HANG_S
            return False
        if msg[0] == "result":
            _, target, index, cpu, violations, inp = msg
            self.cases[target] += 1
            self.cpu[target] = self.cpu.get(target, 0.0) + cpu
            slot.task = None
            slot.deadline = time.monotonic() + HANG_S  # until its "idle" or "minimizing"
            for v in violations:
                self._record(v, target, index, inp)
            slot.recycle = any(v.kind == "memory" for v in violations)
            return False
        if msg[0] == "minimizing":
            slot.minimizing = msg[1]
            slot.deadline = time.monotonic() + MINIMIZE_S + 3 * HANG_S
            return False
        if msg[0] == "minimized":
            _, signature, small, cpu = msg
            self.min_cpu += cpu
            slot.minimizing = None
            slot.deadline = time.monotonic() + HANG_S
            self._save(signature, small, minimized=True)
            return False
        slot.task = None
        slot.minimizing = None
        slot.busy = False
        slot.deadline = float("inf")
        return True  # idle

    def _record(self, v: Violation, target: str, index: int, inp: Input | None) -> None:
        self.kinds[target][v.kind] += 1
        f = self.findings.get(v.signature)
        if f is None:
            k = known(v, inp=inp)
            f = self.findings[v.signature] = Finding(v.signature, v.kind, v.key, target, v.detail,
                                                     f"{self.seed}:{target}:{index}", known=k.id if k else None)
            if v.signature not in self.signatures:
                self.signatures.append(v.signature)
                if inp is not None:
                    self._save(v.signature, inp, minimized=False)  # replaced once minimized
            else:
                f.reproducer = str(self.out / "findings" / finding_slug(v.signature))
        f.count += 1

    def _save(self, signature: str, inp: Input, minimized: bool) -> None:
        f = self.findings.get(signature)
        d = self.out / "findings" / finding_slug(signature)
        d.mkdir(parents=True, exist_ok=True)
        for old in d.glob("input-*"):
            old.unlink()
        names = []
        for i, data in enumerate(inp.files):
            p = d / f"input-{i}.log"
            p.write_bytes(data)
            names.append(str(p))
        command = finding_command(inp, names)
        shown = [one_line(data) for data in inp.files]
        meta: dict[str, Any] = {
            "signature": signature, "kind": f.kind if f else "", "key": f.key if f else "",
            "detail": f.detail if f else "", "known": f.known if f else None, "target": inp.target,
            "option": inp.option, "arg": inp.arg, "csv": inp.csv, "case": f.first_case if f else "",
            "minimized": minimized, "files": [Path(n).name for n in names], "command": command,
            "one_line": shown,
        }
        (d / "case.json").write_text(json.dumps(meta, indent=1, ensure_ascii=True) + "\n")
        if f is not None:
            f.reproducer, f.minimized, f.one_line = str(d), minimized, " | ".join(shown)

    def _lost(self, slot: Slot, kind: str, detail: str) -> None:
        """A worker that ran over its deadline or died: kill it, record its case, start another."""
        task, minimizing = slot.task, slot.minimizing
        self._stop(slot, kill=True)
        self._replace(slot)
        if task is not None:
            target, index = task
            self.cases[target] += 1
            self.cpu[target] = self.cpu.get(target, 0.0) + (HANG_S if kind == "hang" else 0.0)
            inp = case_at(self.seed, target, index)
            self._record(Violation(kind, outside_key(target, inp), detail), target, index, inp)
        elif minimizing is not None:
            self.kinds.setdefault("minimizer", Counter())["minimize_timeout"] += 1

    def _replace(self, slot: Slot) -> None:
        fresh = self._spawn()
        slot.proc, slot.conn, slot.task, slot.minimizing, slot.sent = fresh.proc, fresh.conn, None, None, 0
        slot.busy = slot.recycle = False
        slot.deadline = float("inf")

    def _stop(self, slot: Slot, kill: bool = False) -> None:
        if kill:
            slot.proc.kill()
        else:
            with contextlib.suppress(BrokenPipeError, OSError):
                slot.conn.send(("stop",))
        slot.proc.join(timeout=5)
        if slot.proc.is_alive():
            slot.proc.kill()
            slot.proc.join()
        slot.conn.close()

    def report(self, wall: float, started: str) -> dict[str, Any]:
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        parent_cpu = me.ru_utime + me.ru_stime
        worker_cpu = kids.ru_utime + kids.ru_stime
        targets = {}
        for t in self.next:
            kinds = self.kinds.get(t, Counter())
            targets[t] = {
                "cases": self.cases[t], "first_index": self.first[t], "next_index": self.next[t],
                "cpu_s": round(self.cpu.get(t, 0.0), 2),
                "crashes": sum(n for k, n in kinds.items() if k in CRASH_KINDS), "hangs": kinds.get("hang", 0),
                "violations": dict(sorted(kinds.items())),
            }
        findings = sorted(self.findings.values(), key=lambda f: (f.known is not None, f.kind, f.signature))
        return {
            "schema": "ietop.fuzz_campaign/1", "seed": self.seed, "started": started, "wall_s": round(wall, 1),
            "workers": len(self.slots),
            "cpu_s": {"parent": round(parent_cpu, 1), "workers": round(worker_cpu, 1),
                      "total": round(parent_cpu + worker_cpu, 1), "minimizing": round(self.min_cpu, 1)},
            "cases": sum(self.cases.values()),
            "targets": targets,
            "violations_by_kind": dict(sorted(sum((Counter(k) for k in self.kinds.values()), Counter()).items())),
            "findings": [dataclasses.asdict(f) for f in findings],
        }


def replay(path: Path) -> int:
    """Rerun a saved finding: exit 1 while its signature still reproduces, 0 once fixed."""
    meta = json.loads(path.read_text())
    files = tuple((path.parent / name).read_bytes() for name in meta["files"])
    inp = Input(meta["target"], files, meta["option"], meta["arg"], meta["csv"])
    violations = run_case(inp)
    print(json.dumps({"signature": meta["signature"], "reproduces": any(v.signature == meta["signature"]
                                                                        for v in violations),
                      "violations": [dataclasses.asdict(v) for v in violations]}, indent=1))
    return 1 if any(v.signature == meta["signature"] for v in violations) else 0


def one_case(spec: str, seed: int) -> int:
    target, _, index = spec.partition(":")
    inp = case_at(seed, target, int(index))
    violations = run_case(inp)
    rows = []
    for v in violations:
        small = minimize(inp, v.signature, minimize_check(inp, v), MINIMIZE_S)
        k = known(v)
        rows.append({**dataclasses.asdict(v), "known": k.id if k else None, "option": small.option, "arg": small.arg,
                     "one_line": [one_line(d, 2000) for d in small.files]})
    print(json.dumps({"case": f"{seed}:{spec}", "input": [one_line(d) for d in inp.files], "option": inp.option,
                      "violations": rows}, indent=1, ensure_ascii=False))
    return 1 if violations else 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--minutes", type=float, help="wall-clock budget (default 3 when --cases is not given)")
    ap.add_argument("--cases", type=int, help="stop after this many cases (all targets together)")
    ap.add_argument("--seed", type=int, help="campaign seed (default: random; recorded in the report)")
    ap.add_argument("--targets", default=",".join(FUZZ_TARGETS), help="comma-separated subset")
    ap.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="findings and runs.jsonl (default bench/out/fuzz)")
    ap.add_argument("--resume", action="store_true", help="continue the seed's case indices (the last run's seed "
                                                          "without --seed)")
    ap.add_argument("--aggregate", action="store_true", help="print the totals of every recorded run and exit")
    ap.add_argument("--replay", type=Path, help="rerun a finding's case.json (exit 1 while it reproduces)")
    ap.add_argument("--case", help="TARGET:INDEX: run one case of --seed, minimize what it violates")
    args = ap.parse_args(argv)
    if args.aggregate:
        print(json.dumps(aggregate(args.out), indent=1))
        return 0
    if args.replay:
        return replay(args.replay)
    targets = [t for t in args.targets.split(",") if t]
    if unknown := [t for t in targets if t not in TARGETS]:
        ap.error(f"unknown target(s) {unknown}; known: {', '.join(TARGETS)}")
    previous = read_runs(args.out)
    seed = args.seed
    if seed is None and args.resume and previous:
        seed = previous[-1]["seed"]
    if seed is None:
        seed = random.SystemRandom().randrange(1 << 31)
    if args.case:
        return one_case(args.case, seed)
    start: dict[str, int] = {}
    if args.resume:
        for run in previous:
            if run["seed"] == seed:
                for t, row in run["targets"].items():
                    start[t] = max(start.get(t, 0), row["next_index"])
    minutes = args.minutes if args.minutes is not None or args.cases is not None else 3.0
    args.out.mkdir(parents=True, exist_ok=True)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t0 = time.monotonic()
    campaign = Campaign(seed, args.out, targets, max(1, args.workers), start)
    try:
        campaign.run(minutes, args.cases)
    except KeyboardInterrupt:
        for slot in campaign.slots:
            campaign._stop(slot, kill=True)
    report = campaign.report(time.monotonic() - t0, started)
    with (args.out / "runs.jsonl").open("a") as f:
        f.write(json.dumps(report) + "\n")
    report["aggregate"] = aggregate(args.out)
    print(json.dumps(report, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
