"""The long fuzz campaign's pieces outside its parent loop (bench/fuzz_campaign.py has the loop, its options and
why it runs as it does): the worker process that runs and minimizes cases, and the records on disk (a finding's
directory and command, the totals of OUT/runs.jsonl).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import resource
import time
from collections import Counter
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from tests.robustness.fuzzing.analyze import check_analyze
from tests.robustness.fuzzing.cases import Input, case_input, random_case
from tests.robustness.fuzzing.checks import Violation
from tests.robustness.fuzzing.known import outside_key
from tests.robustness.fuzzing.run import minimize, run_case
from tests.robustness.fuzzing.seeds import api_seeds, log_seeds

MEMORY_MB = 1024
"""A case that takes the worker's peak RSS past this is a `memory` violation (the worker is then replaced:
a peak never comes down). Analyze's peak on the fixtures is ~150 MB."""
MINIMIZE_S = 60.0
"""Wall budget of one minimization (analyze cases cost ~0.1 s per try: a few hundred tries)."""


# ----------------------------------------------------------------------------------------------- worker


def case_at(seed: int, target: str, index: int) -> Input:
    return case_input(random_case(target, random.Random(f"{seed}:{target}:{index}"), index))


def minimize_check(inp: Input, v: Violation) -> Any:
    """The check a minimization reruns: for analyze only the run the violation came from (and the JSON run
    the differential compares with)."""
    if inp.target != "analyze" or not v.mode:
        return None
    modes = [v.mode]  # check_analyze adds the run a JSON run is compared with
    return lambda i: check_analyze(i, modes)


def worker(conn: Connection, seed: int) -> None:
    """Run the cases the parent sends; answer each with its result, then each new signature minimized."""
    log_seeds()
    api_seeds()
    done: set[str] = set()
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg[0] == "stop":
            return
        _, target, index, skip = msg
        done.update(skip)
        inp = case_at(seed, target, index)
        conn.send(("running",))  # the case's clock starts here: drawing its input is the harness's time
        drawn_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        t0 = time.process_time()
        try:
            violations = run_case(inp)
        except Exception as exc:  # the harness itself: reported, not lost
            violations = [Violation("harness_error", type(exc).__name__, repr(exc)[:300])]
        cpu = time.process_time() - t0
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        # A peak reached while the input was drawn (a mutation's intermediate text: a 20-byte api case was blamed
        # in run 5) is the harness's memory, not ietop's: a fresh worker, no finding.
        harness_peak = drawn_mb > MEMORY_MB
        if peak_mb > MEMORY_MB and not harness_peak:
            violations.append(Violation("memory", outside_key(target, inp), f"peak RSS {peak_mb} MB after this case"))
        conn.send(("result", target, index, cpu, violations, inp if violations else None))
        if harness_peak:
            conn.send(("recycle",))
        for v in violations:
            if v.signature in done:
                continue
            done.add(v.signature)
            if v.kind in ("harness_error", "memory"):
                continue  # nothing to minimize by: the check does not see memory
            conn.send(("minimizing", v.signature))
            t1 = time.process_time()
            small = minimize(inp, v.signature, minimize_check(inp, v), MINIMIZE_S)
            conn.send(("minimized", v.signature, small, time.process_time() - t1))
        conn.send(("idle",))
        if harness_peak or any(v.kind == "memory" for v in violations):
            return  # its peak stays: the parent starts a fresh worker


# ---------------------------------------------------------------------------------------------- records


def finding_slug(signature: str) -> str:
    """A finding's directory under OUT/findings: its signature as a file name, made unique by a hash of it."""
    digest = hashlib.sha1(signature.encode()).hexdigest()[:8]
    return re.sub(r"[^A-Za-z0-9._-]+", "_", signature)[:80].strip("_") + "-" + digest


def finding_command(inp: Input, names: Sequence[str]) -> str:
    """How to run a finding's saved input files (`names`) again, for its case.json."""
    if inp.target == "analyze":
        engine = f" --engine {inp.option}" if inp.option else ""
        return f"ietop analyze {' '.join(names)}{engine} [--json | --json --all-requests | --csv DIR]"
    return (f"python bench/fuzz_campaign.py --replay {Path(names[0]).parent / 'case.json'}  "
            f"({inp.target} target: {inp.option or 'default'}, arg {inp.arg})")


def aggregate(out: Path) -> dict[str, Any]:
    """Totals over every run in OUT/runs.jsonl: cases, CPU, distinct signatures."""
    runs = read_runs(out)
    cases: Counter[str] = Counter()
    cpu: Counter[str] = Counter()
    sigs: dict[str, dict[str, Any]] = {}
    total = 0.0
    for run in runs:
        total += run["cpu_s"]["total"]
        for t, row in run["targets"].items():
            cases[t] += row["cases"]
            cpu[t] += row["cpu_s"]
        for f in run["findings"]:
            s = sigs.setdefault(f["signature"], {"signature": f["signature"], "known": f["known"], "count": 0,
                                                 "first_case": f["first_case"]})
            s["count"] += f["count"]
    return {"runs": len(runs), "cases": sum(cases.values()), "cases_by_target": dict(cases),
            "cpu_s": round(total, 1), "cpu_hours": round(total / 3600, 3),
            "cpu_s_by_target": {t: round(v, 1) for t, v in cpu.items()},
            "distinct_signatures": len(sigs), "new_signatures": sorted(s for s, v in sigs.items() if not v["known"]),
            "known_signatures": sorted(s for s, v in sigs.items() if v["known"])}


def read_runs(out: Path) -> list[dict[str, Any]]:
    path = out / "runs.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
