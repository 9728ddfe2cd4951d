#!/usr/bin/env python3
"""Instructions per line of the dashboard's ingest (tailer -> parser -> store), counted by callgrind.

Wall-clock ingest on a shared 2-core VM drifts by a third between minutes (bench/dashboard.py reports
medians of interleaved rounds for that reason); an instruction count does not drift, so it is what tells
whether a change to the ingest path made it cheaper. Only the ingest section is counted: the child
switches callgrind's instrumentation on after its imports and off after the last line.

    .venv/bin/python bench/ingest_instructions.py                  # SYNTHETIC slice, ~1 min under valgrind
    .venv/bin/python bench/ingest_instructions.py --log server.log # any Ollama log
    git worktree add /tmp/old REV && .venv/bin/python bench/ingest_instructions.py --checkout /tmp/old

The default log is 24,000 lines of the synthetic benchmark log (bench/gen_ollama_log.py, seed 1):
four 6,000-line runs taken at 0 %, 27 %, 53 % and 80 % of a 40 MB log, one from each era region.
Needs valgrind (callgrind_control comes with it).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = r"""
import os, subprocess, sys
sys.path.insert(0, os.getcwd())
from ietop.pipeline.feeds import Evidence, TailFeed
from ietop.model.live import LiveView
from ietop.model.store import Store
from ietop.runtime import tune_gc
tune_gc()
view = LiveView(); store = Store(view); view.attach(store)
feed = TailFeed(store, sys.argv[1], "ollama", Evidence(), from_start=True)
tailer, tail = feed.tailer, feed.tail
# The dashboard applies a batch at once (Store.apply_all); older checkouts (for comparisons) one at a time.
apply_all = getattr(store, "apply_all", None) or (lambda items: [store.apply(*item) for item in items])
subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], capture_output=True, check=False)
n = 0
texts = hasattr(tailer, "read_texts")  # older checkouts (for comparisons) read Line objects
while True:
    lines = tailer.read_texts() if texts else tailer.read_available()
    if not lines and not tailer.has_more:
        break
    n += len(lines)
    apply_all(tail.parse(lines if texts else [(line.text, None) for line in lines]))
subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], capture_output=True, check=False)
print("lines", n, file=sys.stderr)
"""


def era_slice(out: Path, tmp: Path) -> None:
    """The default log: four 6,000-line runs of a 40 MB synthetic log (SYNTHETIC, seed 1)."""
    big = tmp / "synthetic-40M.log"
    subprocess.run([sys.executable, str(ROOT / "bench" / "gen_ollama_log.py"), str(big), "--size", "40M",
                    "--seed", "1"], check=True, capture_output=True)
    lines = big.read_bytes().split(b"\n")
    n = len(lines)
    starts = [0, int(n * 0.27), int(n * 0.53), int(n * 0.80)]
    out.write_bytes(b"".join(b"\n".join(lines[s : s + 6000]) + b"\n" for s in starts))


def count(log: Path, checkout: Path) -> tuple[int, int]:
    """(instructions, lines) of the ingest section for `log`, run from `checkout`."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null",
         sys.executable, "-c", CHILD, str(log)],
        cwd=checkout, capture_output=True, text=True, check=False, env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    collected = re.search(r"Collected : (\d+)", done.stderr)
    lines = re.search(r"^lines (\d+)$", done.stderr, re.M)
    if done.returncode != 0 or collected is None or lines is None:
        raise SystemExit(f"callgrind run failed (exit {done.returncode}): {done.stderr.strip()[-800:]}")
    return int(collected.group(1)), int(lines.group(1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log", type=Path, help="an Ollama log (default: the synthetic era slice)")
    ap.add_argument("--checkout", type=Path, default=ROOT,
                    help="count the ingest of this checkout instead (e.g. a `git worktree` of an older commit)")
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("needs valgrind (callgrind_control)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ietop-instr-") as d:
        log = args.log
        if log is None:
            log = Path(d) / "era-slice.log"
            era_slice(log, Path(d))
        instructions, lines = count(log, args.checkout.resolve())
    print(f"{instructions:,} instructions for {lines:,} lines: {instructions / max(lines, 1):,.0f} per line "
          f"({'synthetic era slice' if args.log is None else args.log}; {args.checkout})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
