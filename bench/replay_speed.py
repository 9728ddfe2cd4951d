#!/usr/bin/env python3
"""How long `ietop replay LOG --speed 0` takes to reach "replay finished" on a SYNTHETIC busy Ollama log: the
columnar reader (ietop.pipeline.bulk, the default) against the per-line one (TailParse) it replaced, in one run.

    .venv/bin/python bench/replay_speed.py                  # 100M busy log, 3 rounds
    .venv/bin/python bench/replay_speed.py --size 300M --reuse
    .venv/bin/python bench/replay_speed.py --no-pty         # the headless measure only

Two measures, each in a fresh child process per run, old and new interleaved round by round (medians):

* headless: a ReplayFeed at speed 0 on a thread, posting into a queue of INFLIGHT batches that this process's
  main thread applies to a dashboard store (LiveView sink), as the app's threads do; wall time from building the
  feed (the files sniffed) to the done batch applied. No Textual: the reading and the store alone.
* pty: the real command under a pseudo-terminal (120x40), wall time from spawn until "replay finished" is on the
  screen (the status bar, ietop/tui/app.py), Textual's start-up and redraws included.

The old path is chosen in the child, never through the product's options: `ReplayFeed(columnar=False)` for the
headless child, and for the pty run a launcher that sets `ReplayFeed.columnar = False` before calling the CLI's
main (the new path goes through the same launcher, so both pay the same start-up).

Results: a table on stdout and OUT_DIR/replay_speed.json. See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import fcntl
import json
import os
import platform
import queue
import signal
import statistics
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
# bench/ is not a package: the harness pieces the other benchmarks already have.
from analyze_vs_grep import PROFILES, BenchError, size_label
from analyze_vs_grep import ensure_log as shared_ensure_log
from dashboard import ESCAPES
from gen_ollama_log import parse_size

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
ROWS, COLS = 40, 120
MODES = ("old", "new")
TARGET = 10.0
"""The acceptance: new at least this many times faster than old, on a 300 MB busy log."""
WATCH = b"replay finished"
LAUNCH = (
    "import sys\n"
    "from ietop.pipeline.feeds import ReplayFeed\n"
    "ReplayFeed.columnar = sys.argv.pop(1) == 'new'\n"
    "from ietop.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def ensure_log(path: Path, size: int, seed: int, reuse: bool) -> dict[str, Any]:
    """The busy log, shared with `analyze_vs_grep.py --profile busy` (same name, same reuse rule)."""
    return shared_ensure_log(path, size, seed, reuse, PROFILES["busy"])


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEXTUAL")}
    env["TERM"] = "xterm-256color"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env["COLUMNS"], env["LINES"] = str(COLS), str(ROWS)
    return env


# ------------------------------------------------------------------------------------------------ headless
def headless_child(mode: str, log: str) -> dict[str, Any]:
    """In the child: one replay at speed 0, applied as the app applies it (feed thread -> main thread)."""
    from ietop.pipeline.clock import ReplayClock
    from ietop.pipeline.feeds import Batch, ReplayFeed
    from ietop.pipeline.setup import new_store
    from ietop.runtime import tune_gc
    from ietop.tui.app import INFLIGHT

    tune_gc(raise_threshold=False)  # what `ietop replay` sets (ietop/cli.py)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    store, _view, evidence = new_store()
    feed = ReplayFeed(store, [log], ReplayClock(0), evidence, columnar=mode == "new")
    batches: queue.Queue[Batch] = queue.Queue(maxsize=INFLIGHT)  # the app's bound on batches in flight
    stop = threading.Event()
    worker = threading.Thread(target=feed.run, args=(batches.put, stop), daemon=True)
    worker.start()
    items = posted = 0
    while True:
        batch = batches.get()
        posted += 1
        items += len(batch.items)
        store.apply_all(batch.items)
        for src, n in batch.lines.items():
            store.sources[src].lines = n
        if batch.done:
            break
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    if batch.error:
        raise BenchError(batch.error)
    worker.join(5)
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": peak_rss_mb(), "items": items, "batches": posted,
            "lines": store.sources[0].lines, "requests": store.counts.get("requests", 0),
            "events_total": store.events_total, "unparsed": store.sources[0].unparsed_lines}


def peak_rss_mb(pid: int | None = None) -> float | None:
    """A process's peak resident memory (VmHWM; Linux), in MB: the dashboard's budget is 150 MB
    (bench/dashboard.py), and a window of the columnar reader is 32 MiB of text plus its columns."""
    try:
        with open(f"/proc/{pid or 'self'}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return None


def run_headless(mode: str, log: Path, timeout_s: float) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", mode, str(log)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=child_env(), timeout=timeout_s,
                              check=False)
    except subprocess.TimeoutExpired:
        raise BenchError(f"headless {mode} replay did not finish within {timeout_s:.0f} s") from None
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])  # type: ignore[no-any-return]
    raise BenchError(f"headless {mode} child failed (exit {done.returncode}): {done.stderr.strip()[-800:]}")


# ------------------------------------------------------------------------------------------------ pty
def run_pty(mode: str, log: Path, timeout_s: float) -> dict[str, Any]:
    """`ietop replay LOG --speed 0` on a pty: seconds from spawn to WATCH on the screen, then `q`."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    argv = [sys.executable, "-c", LAUNCH, mode, "replay", str(log), "--speed", "0"]
    t0 = time.perf_counter()
    try:
        # own session: a kill reaches the app's children too
        proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=REPO, env=child_env(),
                                start_new_session=True)
    finally:
        os.close(slave)
    seen: float | None = None
    out_bytes = 0
    carry = b""  # the end of the previous read: an escape or the watched words may straddle two reads
    reader_done = threading.Event()
    found = threading.Event()

    def read() -> None:
        # Only the new bytes (and a little before them) are searched: scanning the whole output on each read
        # would cost this process CPU that the app, on the same cores, needs.
        nonlocal seen, out_bytes, carry
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the app exited
                break
            if not data:
                break
            out_bytes += len(data)
            if not found.is_set():
                window = carry + data
                if WATCH in ESCAPES.sub(b"", window):
                    seen = time.perf_counter() - t0
                    found.set()
                carry = window[-4096:]
            else:
                carry = (carry + data)[-65536:]
        reader_done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = t0 + timeout_s
    while not found.wait(0.05) and proc.poll() is None and time.perf_counter() < deadline:
        pass
    # The app's CPU and peak memory up to "replay finished" (its idle time and its exit after are not the replay).
    cpu_s, peak = None, None
    if found.is_set() and proc.poll() is None:
        with contextlib.suppress(psutil.Error):
            times = psutil.Process(proc.pid).cpu_times()
            cpu_s = times.user + times.system
        peak = peak_rss_mb(proc.pid)
    killed = False
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            os.write(master, b"q")
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            killed = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    reader_done.wait(2)
    os.close(master)
    if seen is None:
        screen = ESCAPES.sub(b"", carry).decode("utf-8", "replace")[-600:]
        raise BenchError(f"pty {mode}: no {WATCH.decode()!r} within {timeout_s:.0f} s (rc={proc.returncode}); "
                         f"screen tail: {screen!r}")
    return {"wall_s": seen, "cpu_s": cpu_s, "peak_rss_mb": peak, "output_bytes": out_bytes, "rc": proc.returncode,
            "killed_after_q": killed}


# ------------------------------------------------------------------------------------------------ report
def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    med = {mode: statistics.median(r["wall_s"] for r in runs[mode]) for mode in MODES if runs[mode]}
    speedup = med["old"] / med["new"] if len(med) == 2 and med["new"] > 0 else None
    out: dict[str, Any] = {"median_wall_s": med, "speedup": speedup}
    for key in ("cpu_s", "peak_rss_mb"):
        if all(r.get(key) is not None for mode in MODES for r in runs[mode]):
            out[f"median_{key}"] = {mode: statistics.median(r[key] for r in runs[mode]) for mode in MODES}
    return {**out, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=parse_size, default=parse_size("100M"), help="log size (default 100M)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3, help="rounds; each times old and new once (default 3)")
    ap.add_argument("--reuse", action="store_true", help="reuse a log in OUT_DIR made by the same generator")
    ap.add_argument("--out-dir", type=Path, default=BENCH_DIR / "out")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    ap.add_argument("--no-pty", action="store_true", help="skip the pty measure")
    ap.add_argument("--no-headless", action="store_true", help="skip the headless measure")
    ap.add_argument("--check", action="store_true", help=f"exit 1 when the pty speedup is under {TARGET:g}x")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "LOG"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(headless_child(args.child[0], args.child[1])), flush=True)
        return 0
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    out_dir: Path = args.out_dir.resolve()
    log = out_dir / f"busy-synthetic-{size_label(args.size)}-seed{args.seed}.log"
    try:
        meta = ensure_log(log, args.size, args.seed, args.reuse)
        log.read_bytes()  # into the page cache: neither path pays for the disk
        load_at_start = os.getloadavg()  # other jobs on the machine: these times are only comparable within a run
        measures = [name for name, skip in (("headless", args.no_headless), ("pty", args.no_pty)) if not skip]
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {m: {mode: [] for mode in MODES} for m in measures}
        for r in range(args.repeat):
            for measure in measures:
                for mode in MODES:
                    res = (run_headless if measure == "headless" else run_pty)(mode, log, args.timeout)
                    runs[measure][mode].append(res)
                    print(f"round {r + 1}: {measure:8} {mode}: {res['wall_s']:7.2f} s", flush=True)
    except BenchError as exc:
        print(f"replay_speed: {exc}", file=sys.stderr)
        return 2
    results = {measure: summarize(runs[measure]) for measure in measures}
    problems = []
    if "headless" in runs:
        # The two paths must end in the same store: lines read, requests counted, Events rows.
        keys = ("lines", "requests", "events_total", "unparsed")
        old, new = ({k: runs["headless"][mode][0][k] for k in keys} for mode in MODES)
        if old != new:
            problems.append(f"the paths' stores differ: old {old}, new {new}")
    verdict = results.get("pty", results.get("headless", {})).get("speedup")
    doc: dict[str, Any] = {
        "bench": "bench/replay_speed.py",
        "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "load_avg_at_start": load_at_start, "load_avg_at_end": os.getloadavg()},
        "log": {"path": str(log), "bytes": meta.get("bytes"), "generator_meta": meta},
        "target": {"speedup_min": TARGET, "measure": "pty" if "pty" in results else "headless",
                   "ok": None if verdict is None else verdict >= TARGET},
        "results": results,
        "problems": problems,
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / "replay_speed.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\n{log.name} ({meta.get('bytes', 0) / 1e6:.0f} MB), medians of {args.repeat}:")
    print(f"{'measure':10}{'old s':>10}{'new s':>10}{'speedup':>10}")
    for measure, res in results.items():
        med, sp = res["median_wall_s"], res["speedup"]
        print(f"{measure:10}{med['old']:10.2f}{med['new']:10.2f}{sp:9.2f}x")
        for key, unit in (("cpu_s", "CPU s"), ("peak_rss_mb", "peak MB")):
            if f"median_{key}" in res:
                m = res[f"median_{key}"]
                print(f"  {unit:8}{m['old']:10.1f}{m['new']:10.1f}")
    for p in problems:
        print(f"PROBLEM: {p}")
    print(f"target >= {TARGET:g}x: {'met' if doc['target']['ok'] else 'missed'}; wrote {out}")
    return 1 if problems or (args.check and not doc["target"]["ok"]) else 0


if __name__ == "__main__":
    sys.exit(main())
