#!/usr/bin/env python3
"""Peak RSS of `ietop analyze LOG --parquet DIR` and `--csv DIR` at two log sizes: flat in the log size?

The tables are streamed from the spooled records (ietop/analyze/frames.py), so writing them should not grow
the resident set with the log. Two SYNTHETIC Ollama logs per profile (bench/gen_ollama_log.py: the default
`mixed` and `busy`), every mode run as its own child process:

* `parquet`, `csv`: `python -m ietop analyze LOG --parquet|--csv DIR`, peak RSS of the whole command, measured
  as bench/analyze_vs_grep.py measures (GNU time's %M where installed: the child's own peak, not this script's
  inherited one). That peak is the larger of the analysis' and the tables';
* `json`: `analyze LOG --json > /dev/null`, the peak of the analysis alone: up to a few hundred MB of log it
  is the larger one, and then the two rows above only show it;
* `tables-parquet`, `tables-csv`: the table step alone. A child runs the analysis as the CLI does, resets its
  high-water mark (Linux: `5 > /proc/self/clear_refs`), writes the tables and reports VmHWM: the step's own
  peak (RSS it started from included), whatever the analysis peaked at before; and the `step` row, what the
  step added to the RSS it started from.

    .venv/bin/python bench/tables_rss.py                                  # 30M and 100M, both profiles
    .venv/bin/python bench/tables_rss.py --sizes 100M 1G --profiles mixed
    .venv/bin/python bench/tables_rss.py --compare-checkout /tmp/old      # another checkout, same run
    .venv/bin/python bench/tables_rss.py --cmd "{python} -m ietop analyze {file} --{fmt} {dir} --all-requests"

`--cmd` / `--compare-cmd` are templates for the parquet, csv and json modes ({python} {file} {fmt} {dir}
replaced, no shell; run from the checkout). `--compare-checkout DIR` runs every mode with DIR's ietop instead
(its working directory and PYTHONPATH): e.g. the implementation before a change, extracted with
`git archive REV | tar -x -C /tmp/old`. Logs are kept in OUT_DIR and reused when their .meta.json says the same
generator code, seed, profile and size made them (`--regenerate` to make them again). Results: a table on
stdout, everything in OUT_DIR/tables_rss.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
GENERATOR = BENCH_DIR / "gen_ollama_log.py"
DEFAULT_CMD = "{python} -m ietop analyze {file} --{fmt} {dir}"
"""For json the command's stdout goes to a file that is then removed, and `{dir}` is dropped."""

sys.path.insert(0, str(BENCH_DIR))
from analyze_vs_grep import GNU_TIME, BenchError, Run, measure, rss_floor_mb, size_label, tail  # noqa: E402
from gen_ollama_log import PROFILES, parse_size, source_digest  # noqa: E402  (bench/ is not a package)

MODES = ("parquet", "csv", "json", "tables-parquet", "tables-csv")

# The `tables-*` child: the analysis as `ietop analyze` runs it (its gc setting too), then the table step
# alone. Imports only what every checkout with `write_tables` has, so an older one can be measured.
PHASE_CODE = r"""
import gc, json, sys
from ietop.analyze.frames import write_tables
from ietop.analyze.report import Analysis
try:
    from ietop.runtime import tune_gc
    tune_gc(raise_threshold=True)
except ImportError:
    pass
def hwm():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM"))
log, fmt, out = sys.argv[1:4]
an = Analysis([log])
analysis = hwm()
gc.collect()
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS (Linux >= 4.0)
except OSError:
    print(json.dumps({"analysis_mb": analysis, "tables_mb": None}))
    sys.exit(0)
before = hwm()
write_tables(an, out, fmt)
print(json.dumps({"analysis_mb": analysis, "before_tables_mb": before, "tables_mb": hwm()}))
an.close()
"""


def log_path(out_dir: Path, profile: str, size: int, seed: int) -> Path:
    # The mixed log has analyze_vs_grep.py's name, so either script reuses the other's.
    middle = "" if profile == "mixed" else f"{profile}-"
    return out_dir / f"ollama-synthetic-{middle}{size_label(size)}-seed{seed}.log"


def ensure_log(path: Path, size: int, seed: int, profile: str, reuse: bool) -> dict[str, Any]:
    """The synthetic log, generated unless one made by the same generator code, seed, profile and size is there."""
    meta_path = Path(str(path) + ".meta.json")
    if reuse and path.exists() and meta_path.exists():
        meta: dict[str, Any] = json.loads(meta_path.read_text())
        if (meta.get("seed") == seed and meta.get("requested_size") == size
                and meta.get("profile", "mixed") == profile and meta.get("bytes") == path.stat().st_size
                and meta.get("generator_sha256") == source_digest()):
            print(f"reusing {path.name}", flush=True)
            return {**meta, "reused": True}
        print(f"not reusing {path.name}: generator, seed, profile or size changed", flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    print(f"generating {size_label(size)} {profile} synthetic log -> {path}", flush=True)
    argv = [sys.executable, str(GENERATOR), str(path), "--size", str(size), "--seed", str(seed),
            "--profile", profile]
    done = subprocess.run(argv, stderr=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise BenchError(f"generator failed (exit {done.returncode}): {tail(done.stderr)}")
    return {**json.loads(meta_path.read_text()), "reused": False}


def command(template: str | None, mode: str, log: Path, table_dir: Path, checkout: Path) -> list[str] | None:
    """The child's argv; None where a template side has no such mode (the tables-* child needs a checkout)."""
    if mode.startswith("tables-"):
        if template is not None:
            return None
        argv = [sys.executable, "-c", PHASE_CODE, str(log), mode.removeprefix("tables-"), str(table_dir)]
    else:
        # `--json DIR` means nothing: for the json row `{dir}` is dropped.
        values = {"{python}": sys.executable, "{file}": str(log), "{fmt}": mode,
                  "{dir}": "" if mode == "json" else str(table_dir)}
        argv = []
        for arg in shlex.split(template or DEFAULT_CMD):
            for key, value in values.items():
                arg = arg.replace(key, value)
            if arg:
                argv.append(arg)
    if checkout != REPO:  # measure() starts children in REPO: the other checkout must be the working directory
        argv = ["sh", "-c", 'cd "$0" && exec "$@"', str(checkout), *argv]
    return argv


def run_one(argv: list[str], mode: str, table_dir: Path, out_dir: Path, checkout: Path,
            timeout_s: float) -> tuple[Run, float | None, dict[str, Any]]:
    """One child: its run, the peak that mode reports (MB) and what else it said."""
    shutil.rmtree(table_dir, ignore_errors=True)
    env = dict(os.environ)
    # That checkout's ietop, not whatever may be installed (`python -m`/`-c` also put the working directory first)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(checkout), env.get("PYTHONPATH", "")) if p)
    stdout_path = out_dir / "tables_rss_stdout.txt"
    stderr_path = out_dir / "tables_rss_stderr.txt"
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        run = measure(argv, out, err, env, timeout_s)
    if run.rc != 0:
        why = "killed after --timeout" if run.rc == -9 else f"exit {run.rc}"
        raise BenchError(f"failed ({why}): {shlex.join(argv)}: {tail(stderr_path.read_text(errors='replace'))}")
    extra: dict[str, Any] = {}
    peak: float | None = run.maxrss_mb
    if mode == "json":
        extra["output_bytes"] = stdout_path.stat().st_size
    else:
        # A run that wrote nothing measured nothing: the requests table must be there.
        fmt = mode.removeprefix("tables-")
        if not (table_dir / f"requests.{fmt}").exists():
            raise BenchError(f"no requests.{fmt} in {table_dir} after {shlex.join(argv)}")
        extra["output_bytes"] = sum(p.stat().st_size for p in table_dir.iterdir())
        if mode.startswith("tables-"):
            extra.update(json.loads(stdout_path.read_text()))
            peak = extra["tables_mb"]
            if peak is not None:
                # What the step added to the RSS it started from (which grows with what the analysis kept)
                extra["step_mb"] = max(0.0, peak - extra["before_tables_mb"])
    shutil.rmtree(table_dir, ignore_errors=True)
    stdout_path.unlink()
    return run, peak, extra


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="peak RSS of ietop analyze --parquet/--csv at two log sizes")
    ap.add_argument("--sizes", type=parse_size, nargs=2, default=[parse_size("30M"), parse_size("100M")],
                    metavar=("SMALL", "LARGE"), help="log sizes (default 30M 100M)")
    ap.add_argument("--profiles", nargs="+", choices=PROFILES, default=list(PROFILES))
    ap.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES), help="what to run (module doc)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1, help="runs per command and log; median reported")
    ap.add_argument("--cmd", help=f"command template for parquet/csv/json (default {DEFAULT_CMD!r}): "
                    "{python} {file} {fmt} {dir} replaced, no shell")
    side = ap.add_mutually_exclusive_group()
    side.add_argument("--compare-cmd", help="a second template run in the same session")
    side.add_argument("--compare-checkout", type=Path, help="run every mode with this checkout's ietop too")
    ap.add_argument("--regenerate", action="store_true", help="generate the logs even when reusable ones exist")
    ap.add_argument("--out-dir", type=Path, default=BENCH_DIR / "out")
    ap.add_argument("--timeout", type=float, default=1800.0, help="kill one run after this many s")
    ap.add_argument("--rss-flat-max", type=float, default=1.5, help="max RSS(large)/RSS(small) counted as flat")
    ap.add_argument("--check", action="store_true", help="exit 1 when a table mode of this checkout is not flat")
    args = ap.parse_args(argv)
    small, large = sorted(args.sizes)
    if small == large or args.repeat < 1:
        ap.error("two different sizes and --repeat >= 1")
    out_dir: Path = args.out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    # label -> (template or None for this script's own commands, checkout it runs in)
    sides: dict[str, tuple[str | None, Path]] = {"this": (args.cmd, REPO)}
    if args.compare_cmd:
        sides["compare"] = (args.compare_cmd, REPO)
    elif args.compare_checkout:
        sides["compare"] = (None, args.compare_checkout.resolve())
    table_dir = out_dir / "tables_rss_tables"

    results: dict[str, Any] = {}
    logs: dict[str, Any] = {}
    try:
        for profile in args.profiles:
            for key, size in (("small", small), ("large", large)):
                path = log_path(out_dir, profile, size, args.seed)
                logs[f"{profile}/{key}"] = {"path": str(path), **ensure_log(path, size, args.seed, profile,
                                                                             not args.regenerate)}
                subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=False)  # into the page cache
                for label, (template, checkout) in sides.items():
                    for mode in args.modes:
                        cmd = command(template, mode, path, table_dir, checkout)
                        if cmd is None:
                            continue
                        runs: list[Run] = []
                        peaks: list[float | None] = []
                        extra: dict[str, Any] = {}
                        for _ in range(args.repeat):
                            run, peak, extra = run_one(cmd, mode, table_dir, out_dir, checkout, args.timeout)
                            runs.append(run)
                            peaks.append(peak)
                        rss = None if None in peaks else statistics.median(p for p in peaks if p is not None)
                        wall = statistics.median(r.wall_s for r in runs)
                        shown = "n/a" if rss is None else f"{rss:.1f} MB"
                        print(f"  {profile:5} {size_label(size):>5} {label:7} {mode:14} {shown:>10} {wall:7.1f} s",
                              flush=True)
                        results.setdefault(label, {}).setdefault(profile, {}).setdefault(mode, {})[key] = {
                            "log_bytes": path.stat().st_size, "maxrss_mb": rss, "wall_s": wall, **extra,
                            "command": shlex.join(cmd), "runs": [asdict(r) for r in runs]}
    except BenchError as e:
        print(f"tables_rss: {e}", file=sys.stderr)
        return 2

    flat_ok = True
    print()
    print(f"SYNTHETIC Ollama logs, seed {args.seed}; peak RSS (MB), median of {args.repeat}")
    print(f"{'side':8} {'profile':7} {'mode':14} {size_label(small):>8} {size_label(large):>8} {'large/small':>12}")
    for label, by_profile in results.items():
        for profile, by_mode in by_profile.items():
            for mode, sizes in by_mode.items():
                rows = [(mode, "maxrss_mb")]
                if mode.startswith("tables-"):
                    rows.append((f"  {mode[7:]} step", "step_mb"))
                for name, field in rows:
                    a, b = sizes["small"].get(field), sizes["large"].get(field)
                    # (a step of under 1 MB has no meaningful ratio)
                    ratio = None if a is None or b is None or a < 1.0 else b / a
                    sizes[f"{field}_large_over_small"] = ratio
                    # A step's few MB make a noisy ratio: it is shown, the peaks are what is judged.
                    flat = ratio is None or field == "step_mb" or ratio <= args.rss_flat_max
                    if label == "this" and mode != "json":
                        flat_ok &= flat
                    cells = ["n/a" if v is None else f"{v:.1f}" for v in (a, b)]
                    print(f"{label:8} {profile:7} {name:14} {cells[0]:>8} {cells[1]:>8} "
                          f"{'n/a' if ratio is None else f'{ratio:.2f}x':>12}{'' if flat else '  NOT FLAT'}")
    if not GNU_TIME:
        print(f"note: no GNU time; RSS from wait4, which cannot go below this harness's {rss_floor_mb():.1f} MB")

    report = {
        "synthetic_log": True,
        "generated_by": "bench/gen_ollama_log.py",
        "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "rss_method": {"parquet/csv/json": "GNU time %M (child forked by time)" if GNU_TIME else "os.wait4 ru_maxrss",
                       "tables-*": "the child's VmHWM after `5 > /proc/self/clear_refs` (Linux)"},
        "sizes": {"small": small, "large": large},
        "seed": args.seed,
        "repeat": args.repeat,
        "sides": {k: {"template": t, "checkout": str(c)} for k, (t, c) in sides.items()},
        "rss_flat_max": args.rss_flat_max,
        "flat_ok": flat_ok,
        "logs": logs,
        "results": results,
    }
    report_path = out_dir / "tables_rss.json"
    report_path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {report_path}")
    return 1 if args.check and not flat_ok else 0


if __name__ == "__main__":
    raise SystemExit(main())
