#!/usr/bin/env python3
"""Benchmark `ietop analyze --json` against `grep -c` on a SYNTHETIC engine log.

Acceptance this serves (issue 20): `ietop analyze --json` at most 10x the wall time of `grep -c -F` with
a pattern every request writes once, on the same file in the same run, on a busy Ollama log (`--profile
busy`, the default) and a vLLM log (`--profile vllm`); at most 30x on the multi-era DEBUG-heavy Ollama log
(`--profile mixed`); and peak RSS flat in the file size (checked against a 1/10th-size file).

    .venv/bin/python bench/analyze_vs_grep.py --size 300M --small-size 30M    # busy Ollama, 3 repeats
    .venv/bin/python bench/analyze_vs_grep.py --profile vllm --size 300M --reuse
    .venv/bin/python bench/analyze_vs_grep.py --reuse         # keep logs generated earlier
    .venv/bin/python bench/analyze_vs_grep.py --size 200M --analyze-cmd "wc -l"

Every child is started with Popen and reaped with os.wait4 on its pid, so wall time and rusage
are per child, not accumulated over the whole benchmark as RUSAGE_CHILDREN would be.  Peak RSS
needs one more step: Linux carries the pre-exec memory high-water mark of a forked child into
its ru_maxrss, so a child spawned from this Python process never reports less than this
process's own peak (~30 MB), which would hide grep's real ~2 MB.  When GNU time is present the
command therefore runs under `/usr/bin/time -f %M`, whose own tiny fork is what execs the
command; otherwise wait4's value is used and the inherited floor is reported next to it.
Results go to stdout as a small table and to OUT_DIR/analyze_vs_grep.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
MIB = 1024 * 1024


@dataclass(frozen=True)
class Profile:
    """A kind of synthetic log: its generator and arguments, grep's pattern, the wall-time target."""

    generator: str
    args: tuple[str, ...]
    grep: str
    """One fixed, literal pattern each HTTP request writes once, so `grep -c` scans the whole file and
    counts real matches, like the analyzer must."""
    target: float
    """analyze/grep wall time at most this (issue 20's acceptance)."""


PROFILES = {
    # ~90 % GIN lines, most of them health checks; llama-server slot lines per request (one busy E5 server).
    "busy": Profile("gen_ollama_log.py", ("--profile", "busy"), "[GIN]", 10.0),
    # every era, envelopes, DEBUG scheduler chains in ~30 % of sessions, junk.
    "mixed": Profile("gen_ollama_log.py", ("--profile", "mixed"), "[GIN]", 30.0),
    # uvicorn access lines (mostly probes), request logging, stats lines.
    "vllm": Profile("gen_vllm_log.py", (), " HTTP/1.1\" ", 10.0),
}

sys.path.insert(0, str(BENCH_DIR))
from gen_ollama_log import parse_size  # noqa: E402  (bench/ is not a package)


def source_digest(generator: str) -> str:
    """Hash of a generator's source: a reused log must come from the same code."""
    import hashlib

    return hashlib.sha256((BENCH_DIR / generator).read_bytes()).hexdigest()


class BenchError(Exception):
    """A failure that ends the benchmark with a one-line message."""


@dataclass
class Run:
    wall_s: float
    maxrss_mb: float
    user_s: float
    sys_s: float
    rc: int


def find_gnu_time() -> str | None:
    path = "/usr/bin/time"
    if not os.access(path, os.X_OK):
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return path if "GNU" in out.stdout + out.stderr else None


GNU_TIME = find_gnu_time()


def size_label(n: int) -> str:
    for unit, mult in (("G", 1024**3), ("M", MIB), ("K", 1024)):
        if n % mult == 0:
            return f"{n // mult}{unit}"
    return f"{n}B"


def measure(
    argv: list[str],
    stdout: IO[Any] | int,
    stderr: IO[Any] | int,
    env: dict[str, str] | None = None,
    timeout_s: float | None = None,
) -> Run:
    """Run one child; wall time from spawn to reap, rusage from wait4 on that pid (see module doc)."""
    full = argv
    time_out = None
    if GNU_TIME:
        fd, time_out = tempfile.mkstemp(prefix="bench-rss-", suffix=".txt")
        os.close(fd)
        full = [GNU_TIME, "-f", "%M %U %S", "-o", time_out, *argv]
    t0 = time.perf_counter()
    try:
        # own session: a timeout kills the command too, not only the GNU time wrapper
        proc = subprocess.Popen(full, stdout=stdout, stderr=stderr, cwd=REPO, env=env, start_new_session=True)
    except OSError as e:
        raise BenchError(f"cannot run {shlex.join(argv)}: {e}") from None
    timer = None
    if timeout_s:
        timer = threading.Timer(timeout_s, os.killpg, (proc.pid, signal.SIGKILL))
        timer.start()
    try:
        _, status, ru = os.wait4(proc.pid, 0)
    finally:
        if timer:
            timer.cancel()
    wall = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status)
    proc.returncode = rc  # already reaped: stop Popen from waiting on the pid again
    # Linux reports ru_maxrss in KiB, macOS in bytes
    rss = ru.ru_maxrss / (MIB if sys.platform == "darwin" else 1024)
    user, system = ru.ru_utime, ru.ru_stime
    if time_out:
        try:
            with open(time_out) as f:
                # "Command exited with non-zero status N" may precede the format line
                fields = f.read().strip().splitlines()[-1].split()
            rss, user, system = int(fields[0]) / 1024, float(fields[1]), float(fields[2])
        except (OSError, IndexError, ValueError):
            pass  # killed before GNU time could write: keep wait4's numbers
        finally:
            os.unlink(time_out)
    return Run(wall_s=wall, maxrss_mb=rss, user_s=user, sys_s=system, rc=rc)


def rss_floor_mb() -> float:
    """Smallest peak RSS this harness can report for a child (what `true` reports)."""
    return measure(["true"], subprocess.DEVNULL, subprocess.DEVNULL).maxrss_mb


def ensure_log(path: Path, size: int, seed: int, reuse: bool, profile: Profile) -> dict[str, Any]:
    """Generate the synthetic log unless --reuse finds one made by the same generator code."""
    meta_path = Path(str(path) + ".meta.json")
    if reuse and path.exists() and meta_path.exists():
        meta: dict[str, Any] = json.loads(meta_path.read_text())
        same = (
            meta.get("seed") == seed
            and meta.get("requested_size") == size
            and meta.get("bytes") == path.stat().st_size
            and meta.get("generator_sha256") == source_digest(profile.generator)
        )
        if same:
            print(f"reusing {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
            meta["reused"] = True
            return meta
        print(f"not reusing {path.name}: generator, seed or size changed")
    path.parent.mkdir(parents=True, exist_ok=True)
    print(f"generating {size_label(size)} synthetic log -> {path}", flush=True)
    argv = [sys.executable, str(BENCH_DIR / profile.generator), str(path), "--size", str(size), "--seed", str(seed),
            *profile.args]
    done = subprocess.run(argv, stderr=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise BenchError(f"generator failed (exit {done.returncode}): {tail(done.stderr)}")
    meta = json.loads(meta_path.read_text())
    meta["reused"] = False
    print(f"  {meta['bytes']:,} bytes in {meta['seconds']:.1f}s ({meta['mb_per_s']} MB/s)")
    return meta


def tail(text: str, limit: int = 400) -> str:
    """Last lines of a child's stderr, flattened so the failure stays a one-line message."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    flat = " | ".join(lines[-5:])
    return flat if len(flat) <= limit else "..." + flat[-limit:]


def analyze_argv(template: str | None, log: Path) -> list[str]:
    if template is None:
        # the repo checkout, not whatever ietop may be installed: PYTHONPATH is set in run_analyze
        return [sys.executable, "-m", "ietop", "analyze", str(log), "--json"]
    argv = shlex.split(template)
    if any("{file}" in a for a in argv):
        return [a.replace("{file}", str(log)) for a in argv]
    return [*argv, str(log)]


def run_grep(log: Path, pattern: str) -> tuple[Run, int]:
    # LC_ALL=C: byte-wise matching makes the baseline independent of the user's locale (the
    # pattern is ASCII, so the count is the same in any locale)
    env = dict(os.environ, LC_ALL="C")
    # the count is a few bytes, far below a pipe's buffer, so reading after the reap is safe
    out_r, out_w = os.pipe()
    try:
        run = measure(["grep", "-c", "-F", pattern, str(log)], out_w, subprocess.DEVNULL, env)
    finally:
        os.close(out_w)
    with os.fdopen(out_r) as reader:
        count_text = reader.read().strip()
    if run.rc not in (0, 1):  # 1 = no match, still a valid count
        raise BenchError(f"grep failed with exit {run.rc} on {log}")
    return run, int(count_text or 0)


def run_analyze(argv: list[str], out_dir: Path, timeout_s: float, stdout_path: Path | None = None) -> Run:
    """One analyze run; stdout goes to /dev/null unless a path is given (the validation run)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    stderr_path = out_dir / "analyze_stderr.txt"
    with open(stdout_path or os.devnull, "wb") as out, open(stderr_path, "wb") as err:
        run = measure(argv, out, err, env, timeout_s)
    if run.rc != 0:
        why = "killed after --timeout" if run.rc == -9 else f"exit {run.rc}"
        err_tail = tail(stderr_path.read_text(errors="replace")) or "(no stderr)"
        raise BenchError(f"analyze command failed ({why}): {shlex.join(argv)}: {err_tail}")
    return run


def validate_output(argv: list[str], out_dir: Path, timeout_s: float, expect_json: bool) -> dict[str, Any]:
    """Untimed run with stdout kept, on the small log: is it JSON, and how big is it?"""
    path = out_dir / "analyze_stdout_small.json"
    run_analyze(argv, out_dir, timeout_s, path)
    size = path.stat().st_size
    if expect_json:
        if size <= 256 * MIB:
            try:
                json.loads(path.read_bytes())
            except ValueError as e:
                raise BenchError(f"analyze --json did not print valid JSON ({path}): {e}") from None
        else:  # too big to parse here without becoming the memory hog ourselves
            with open(path, "rb") as f:
                head = f.read(1).strip()
                f.seek(max(0, size - 16))
                end = f.read().strip()[-1:]
            if head != b"{" or end != b"}":
                raise BenchError(f"analyze --json output does not look like one JSON object ({path})")
    return {"path": str(path), "bytes": size}


def median_run(runs: list[Run]) -> dict[str, float]:
    return {
        "wall_s": statistics.median(r.wall_s for r in runs),
        "maxrss_mb": statistics.median(r.maxrss_mb for r in runs),
        "user_s": statistics.median(r.user_s for r in runs),
        "sys_s": statistics.median(r.sys_s for r in runs),
    }


def bench_file(log: Path, argv: list[str], repeat: int, out_dir: Path, timeout_s: float,
               pattern: str) -> dict[str, Any]:
    run_grep(log, pattern)  # untimed: pulls the file into the page cache so neither side pays for disk
    greps: list[Run] = []
    analyzes: list[Run] = []
    count = 0
    for i in range(repeat):
        # interleaved, so drift in machine load hits both commands alike
        g, count = run_grep(log, pattern)
        a = run_analyze(argv, out_dir, timeout_s)
        greps.append(g)
        analyzes.append(a)
        print(
            f"  run {i + 1}/{repeat}: grep {g.wall_s:.3f}s {g.maxrss_mb:.1f} MB | "
            f"analyze {a.wall_s:.3f}s {a.maxrss_mb:.1f} MB",
            flush=True,
        )
    return {
        "path": str(log),
        "bytes": log.stat().st_size,
        "grep_count": count,
        "runs": {"grep": [asdict(r) for r in greps], "analyze": [asdict(r) for r in analyzes]},
        "median": {"grep": median_run(greps), "analyze": median_run(analyzes)},
    }


def check_grep_count(res: dict[str, Any], meta: dict[str, Any]) -> str | None:
    """GIN lines generated vs counted: a cheap guard against a broken or mismatched log."""
    if meta.get("generator") != "bench/gen_ollama_log.py":
        return None
    gen = meta.get("generated_line_kinds", {}).get("gin")
    if gen is None:
        return None
    cut = meta.get("tail_cut_lines", 0)
    if not gen - cut <= res["grep_count"] <= gen:
        return f"grep counted {res['grep_count']} GIN lines, generator wrote {gen - cut}..{gen}"
    return None


def grep_version() -> str:
    try:
        out = subprocess.run(["grep", "--version"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return "unknown"
    return out.splitlines()[0] if out else "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="ietop analyze --json vs grep -c on a synthetic Ollama log (see bench/README.md)"
    )
    ap.add_argument("--profile", choices=sorted(PROFILES), default="busy",
                    help="the synthetic log: busy (default) or mixed Ollama, or vllm (see PROFILES)")
    ap.add_argument("--size", type=parse_size, default=parse_size("1G"), help="large log size (default 1G)")
    ap.add_argument("--small-size", type=parse_size, help="small log size for the RSS check (default size/10)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per command and file; median reported")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--reuse", action="store_true", help="reuse logs in OUT_DIR made by the same generator")
    ap.add_argument(
        "--analyze-cmd",
        help="command to benchmark instead of `python -m ietop analyze FILE --json`; the log path "
        "replaces {file} or is appended (no shell: wrap in sh -c '...' if you need one)",
    )
    ap.add_argument("--out-dir", type=Path, default=BENCH_DIR / "out")
    ap.add_argument("--timeout", type=float, default=1800.0, help="kill one analyze run after this many s")
    ap.add_argument("--rss-flat-max", type=float, default=1.5, help="max RSS(large)/RSS(small) counted as flat")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    small = args.small_size or max(MIB, round(args.size / 10 / MIB) * MIB)
    out_dir: Path = args.out_dir.resolve()
    profile = PROFILES[args.profile]
    stem = "ollama-synthetic" if args.profile == "mixed" else f"{args.profile}-synthetic"

    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        logs = {}
        metas = {}
        for key, size in (("large", args.size), ("small", small)):
            logs[key] = out_dir / f"{stem}-{size_label(size)}-seed{args.seed}.log"
            metas[key] = ensure_log(logs[key], size, args.seed, args.reuse, profile)
        results = {}
        for key in ("large", "small"):
            cmd = analyze_argv(args.analyze_cmd, logs[key])
            print(f"{key}: {logs[key].name}: {shlex.join(cmd)}", flush=True)
            results[key] = bench_file(logs[key], cmd, args.repeat, out_dir, args.timeout, profile.grep)
        print("validating analyze output on the small log (untimed)", flush=True)
        output = validate_output(
            analyze_argv(args.analyze_cmd, logs["small"]), out_dir, args.timeout, args.analyze_cmd is None
        )
    except BenchError as e:
        print(f"analyze_vs_grep: {e}", file=sys.stderr)
        return 2

    floor = rss_floor_mb()
    large, small_res = results["large"]["median"], results["small"]["median"]
    wall_ratio = large["analyze"]["wall_s"] / max(large["grep"]["wall_s"], 1e-9)
    wall_ratio_small = small_res["analyze"]["wall_s"] / max(small_res["grep"]["wall_s"], 1e-9)
    rss_flat = large["analyze"]["maxrss_mb"] / max(small_res["analyze"]["maxrss_mb"], 1e-9)
    rss_vs_grep = large["analyze"]["maxrss_mb"] / max(large["grep"]["maxrss_mb"], 1e-9)
    warnings = [w for w in (check_grep_count(results[k], metas[k]) for k in results) if w]
    report = {
        "synthetic_log": True,
        "profile": args.profile,
        "generated_by": f"bench/{profile.generator} {' '.join(profile.args)}".strip(),
        "seed": args.seed,
        "repeat": args.repeat,
        "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "grep": grep_version(),
        },
        "rss_method": "GNU time %M (child forked by time)" if GNU_TIME else "os.wait4 ru_maxrss",
        "rss_floor_mb": floor,
        "commands": {
            "grep": shlex.join(["grep", "-c", "-F", profile.grep, "FILE"]),
            "analyze": shlex.join(analyze_argv(args.analyze_cmd, Path("FILE"))),
        },
        "files": {k: {**results[k], "generator_meta": metas[k]} for k in results},
        "ratios": {
            "wall_analyze_over_grep": wall_ratio,
            "wall_analyze_over_grep_small": wall_ratio_small,
            "rss_analyze_over_grep": rss_vs_grep,
            "rss_analyze_large_over_small": rss_flat,
        },
        "targets": {
            "wall_ratio_max": profile.target,
            "wall_ratio_ok": wall_ratio <= profile.target,
            "rss_flat_max": args.rss_flat_max,
            "rss_flat_ok": rss_flat <= args.rss_flat_max,
        },
        "analyze_output_small": {**output, "over_input": output["bytes"] / max(1, results["small"]["bytes"])},
        "warnings": warnings,
    }
    report_path = out_dir / f"analyze_vs_grep-{args.profile}.json"
    report_path.write_text(json.dumps(report, indent=2) + "\n")

    lg, sm = results["large"], results["small"]
    name = "ietop analyze --json" if args.analyze_cmd is None else args.analyze_cmd
    print()
    print(f"SYNTHETIC {args.profile} log, seed {args.seed}, median of {args.repeat} (page cache warm)")
    print(f"{'':24} {'large ' + size_label(args.size):>22} {'small ' + size_label(small):>22}")
    print(f"{'':24} {'wall s':>10} {'RSS MB':>11} {'wall s':>10} {'RSS MB':>11}")
    for label, key in ((f"grep -c -F '{profile.grep}'"[:24], "grep"), (name[:24], "analyze")):
        a, b = lg["median"][key], sm["median"][key]
        print(f"{label:24} {a['wall_s']:10.3f} {a['maxrss_mb']:11.1f} {b['wall_s']:10.3f} {b['maxrss_mb']:11.1f}")
    ok = {True: "ok", False: "MISSED"}
    print(
        f"wall analyze/grep: {wall_ratio:.2f}x on {size_label(args.size)} "
        f"(target <= {profile.target:g}x: {ok[wall_ratio <= profile.target]}), "
        f"{wall_ratio_small:.2f}x on {size_label(small)}"
    )
    print(
        f"RSS analyze: {lg['median']['analyze']['maxrss_mb']:.1f} MB on {size_label(args.size)} vs "
        f"{sm['median']['analyze']['maxrss_mb']:.1f} MB on {size_label(small)} -> {rss_flat:.2f}x "
        f"(flat if <= {args.rss_flat_max:g}x: {ok[rss_flat <= args.rss_flat_max]}); "
        f"{rss_vs_grep:.1f}x grep's RSS"
    )
    if not GNU_TIME:
        print(f"note: no GNU time; RSS from wait4, which cannot go below this harness's {floor:.1f} MB")
    print(
        f"analyze stdout on {size_label(small)}: {output['bytes'] / MIB:.1f} MiB "
        f"({report['analyze_output_small']['over_input']:.2f}x the input)"
    )
    for w in warnings:
        print(f"warning: {w}")
    print(f"wrote {report_path}")
    if args.check and not (report["targets"]["wall_ratio_ok"] and report["targets"]["rss_flat_ok"]):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
