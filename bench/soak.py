#!/usr/bin/env python3
"""Soak: the dashboard's pipeline replaying a SYNTHETIC busy Ollama log at speed 0, memory sampled as virtual
time passes. The log covers weeks of virtual time (the generator's clock), so a run is many "days" of a
server in minutes; what must hold is that the dashboard's memory stays flat however long it runs.

    .venv/bin/python bench/soak.py                      # 300M busy log (generated or reused), 60 samples
    .venv/bin/python bench/soak.py --size 1G --reuse

The replay is the app's own path without Textual (as bench/replay_speed.py's headless child): a ReplayFeed on
a thread posting batches that this thread applies to a dashboard store (LiveView sink, bounded tables).
RSS (VmRSS) is sampled each time virtual time crosses the next sample mark. "Flat" compares the highest RSS of
the last quarter of the samples with the highest of the second quarter (the first is warm-up: tables filling
to their bounds): at most FLAT_GROWTH more.

Results: a table on stdout and OUT_DIR/soak.json. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import queue
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from analyze_vs_grep import PROFILES, BenchError, ensure_log, size_label
from gen_ollama_log import parse_size

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(REPO))
FLAT_GROWTH = 0.10
"""The last quarter's peak RSS may exceed the second quarter's by this share (allocator noise), no more."""


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024 / 1e6
    raise BenchError("no VmRSS in /proc/self/status (Linux only)")


def soak(log: Path, samples: int) -> dict[str, Any]:
    from ietop.pipeline.clock import ReplayClock
    from ietop.pipeline.feeds import Batch, ReplayFeed
    from ietop.pipeline.setup import new_store
    from ietop.runtime import tune_gc
    from ietop.tui.app import INFLIGHT

    tune_gc(raise_threshold=False)  # what `ietop replay` sets
    store, _view, evidence = new_store()
    feed = ReplayFeed(store, [str(log)], ReplayClock(0), evidence)
    batches: queue.Queue[Batch] = queue.Queue(maxsize=INFLIGHT)
    stop = threading.Event()
    worker = threading.Thread(target=feed.run, args=(batches.put, stop), daemon=True)
    wall0 = time.perf_counter()
    worker.start()
    points: list[dict[str, Any]] = []
    start: float | None = None
    step = next_mark = 0.0
    span = _span(log)
    items = 0
    while True:
        batch = batches.get()
        items += len(batch.items)
        store.apply_all(batch.items)
        for src, n in batch.lines.items():
            store.sources[src].lines = n
        now = store.now
        if start is None and now > 0:
            start = now
            step = span / samples
            next_mark = start
        if start is not None and now >= next_mark:
            points.append({"virtual_h": round((now - start) / 3600, 2), "rss_mb": round(rss_mb(), 1),
                           "items": items, "requests": store.counts.get("requests", 0),
                           "wall_s": round(time.perf_counter() - wall0, 2)})
            next_mark = now + step
        if batch.done:
            break
    if batch.error:
        raise BenchError(batch.error)
    worker.join(5)
    return {"points": points, "wall_s": time.perf_counter() - wall0, "lines": store.sources[0].lines,
            "requests": store.counts.get("requests", 0), "unparsed": store.sources[0].unparsed_lines}


def _span(log: Path) -> float:
    """Virtual seconds from the log's first to its last timestamp (read from its head and tail)."""
    from ietop.pipeline.ingest import make_parser

    def first_time(lines: list[str]) -> float | None:
        parser = make_parser("ollama")
        for n, line in enumerate(lines, 1):
            for event in parser.parse(n, line):
                if event.ts is not None:
                    return event.ts.timestamp()
        return None

    with open(log, "rb") as f:
        head = f.read(1 << 16).decode("utf-8", "replace").splitlines()[1:]  # line 1: the generator's banner
        f.seek(max(0, log.stat().st_size - (1 << 16)))
        tail = f.read().decode("utf-8", "replace").splitlines()[1:]
    begin, end = first_time(head), first_time(list(reversed(tail)))
    if begin is None or end is None or end <= begin:
        raise BenchError(f"{log}: no time span found")
    return end - begin


def verdict(points: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(points)
    if n < 8:
        raise BenchError(f"only {n} samples: the log is too short to judge")
    second = max(p["rss_mb"] for p in points[n // 4:n // 2])
    last = max(p["rss_mb"] for p in points[3 * n // 4:])
    growth = last / second - 1
    return {"second_quarter_peak_mb": second, "last_quarter_peak_mb": last, "growth": round(growth, 4),
            "flat": growth <= FLAT_GROWTH, "virtual_days": round(points[-1]["virtual_h"] / 24, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="300M", help="log size (default 300M)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--samples", type=int, default=60)
    ap.add_argument("--reuse", action="store_true", help="reuse a log made by the same generator, seed and size")
    ap.add_argument("--out-dir", default=str(BENCH_DIR / "out"))
    args = ap.parse_args(argv)
    size = parse_size(args.size)
    out = Path(args.out_dir)
    log = out / f"busy-synthetic-{size_label(size)}-seed{args.seed}.log"
    try:
        meta = ensure_log(log, size, args.seed, args.reuse, PROFILES["busy"])
        result = soak(log, args.samples)
        result["verdict"] = verdict(result["points"])
    except BenchError as exc:
        print(f"soak: {exc}", file=sys.stderr)
        return 1
    result.update({"synthetic_log": True, "log": str(log), "bytes": meta["bytes"], "host": platform.platform(),
                   "python": platform.python_version()})
    print(f"{'virtual h':>10} {'events':>11} {'requests':>11} {'RSS MB':>7}")
    for p in result["points"][:: max(1, len(result["points"]) // 12)]:
        print(f"{p['virtual_h']:>10} {p['items']:>11,} {p['requests']:>11,} {p['rss_mb']:>7}")
    v = result["verdict"]
    print(f"{v['virtual_days']} virtual days in {result['wall_s']:.0f} s; peak RSS second quarter "
          f"{v['second_quarter_peak_mb']} MB, last quarter {v['last_quarter_peak_mb']} MB "
          f"({v['growth']:+.1%}): {'flat' if v['flat'] else 'GROWING'}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "soak.json").write_text(json.dumps(result, indent=1))
    return 0 if v["flat"] else 2


if __name__ == "__main__":
    sys.exit(main())
