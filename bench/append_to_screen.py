#!/usr/bin/env python3
"""How long a line appended to a followed log takes to reach the dashboard (DESIGN.md: within 250 ms).

The live app (``live_app`` with ``--log ollama:PATH``, hardware sampling off) runs headless in this
process (``App.run_test``, 120x40). One at a time, at a random moment (so the phase against the app's
timers varies), a GIN access line of an inference request is appended to the log; the time from the
write to the moment the screen has been refreshed after the Requests table took that request is one
sample (the app's redraw pacer hears of that refresh from Textual: `RenderWatch`). Only writing the
frame to a terminal is not counted (headless, there is none).

Baseline, in the same run and the same way: ``FileTailer.follow`` alone on another file, from the write
to the tailer yielding the line (what following a file costs before any parsing or drawing).

    .venv/bin/python bench/append_to_screen.py            # 60 lines each
    .venv/bin/python bench/append_to_screen.py -n 10      # quicker

Results: a table on stdout and ``bench/out/append_to_screen.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TARGET_S = 0.25
SIZE = (120, 40)


def gin_line(i: int) -> str:
    stamp = datetime.now().strftime("%Y/%m/%d - %H:%M:%S")  # GIN prints the local clock, no zone
    return f'[GIN] {stamp} | 200 |  1.{i:06d}s |       127.0.0.1 | POST     "/api/chat"\n'


def append(path: Path, text: str) -> float:
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
    return time.perf_counter()  # after close: the bytes are in the file


@asynccontextmanager
async def followed_dashboard() -> AsyncIterator[tuple[Any, Any, Path]]:
    """(app, pilot, log): the live app headless, following an empty log in a temporary directory (hardware
    sampling off), once its tailer is following. bench/dashboard_loaded.py uses it too."""
    from ietop.pipeline.discover import Plan
    from ietop.tui.run import live_app

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "ollama.log"
        log.write_text("")
        app = live_app(Plan(logs=[("ollama", str(log))]))
        app.setup.hardware = False
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause(1.0)  # the tailer is following by now
            yield app, pilot, log


class RenderWatch:
    """What the app's redraw pacer hears from Textual once the screen has been refreshed after a redraw: the
    redraw's token and its whole cost (main-thread CPU)."""

    def __init__(self, app: Any) -> None:
        self.tokens: list[int] = []
        self.costs: list[float] = []
        pacer, rendered = app.pacer, app.pacer.rendered
        self.pacer = pacer

        def record(token: int) -> None:
            rendered(token)
            self.tokens.append(token)
            self.costs.append(pacer.cost)

        pacer.rendered = record

    async def on_screen(self, deadline: float) -> None:
        """Until the screen has been refreshed after the last redraw so far."""
        token = self.pacer.drawn
        while not self.tokens or self.tokens[-1] < token:
            if time.perf_counter() > deadline:
                raise RuntimeError("the screen was not refreshed after a redraw within 5 s")
            await asyncio.sleep(0.001)


async def dashboard(n: int, seed: int) -> list[float]:
    from ietop.tui.widgets.requests import RequestsTable

    rng = random.Random(seed)
    out: list[float] = []
    async with followed_dashboard() as (app, _pilot, log):
        table = app.query_one(RequestsTable)
        watch = RenderWatch(app)
        for i in range(n):
            await asyncio.sleep(rng.uniform(0.05, 0.6))
            t0 = append(log, gin_line(i))
            deadline = t0 + 5.0
            while len(table.records) <= i:
                if time.perf_counter() > deadline:
                    raise RuntimeError(f"line {i} did not reach the Requests table within 5 s")
                await asyncio.sleep(0.001)
            await watch.on_screen(deadline)
            out.append(time.perf_counter() - t0)
    return out


def tailer_alone(n: int, seed: int) -> list[float]:
    from ietop.sources.tailer import FileTailer

    rng = random.Random(seed)
    out: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "ollama.log"
        log.write_text("")
        tailer = FileTailer(str(log))
        stop = threading.Event()
        got = threading.Event()
        seen: list[float] = []

        def follow() -> None:
            for batch in tailer.follow(stop):
                if batch:
                    seen.append(time.perf_counter())
                    got.set()

        worker = threading.Thread(target=follow, daemon=True)
        worker.start()
        time.sleep(1.0)
        try:
            for i in range(n):
                time.sleep(rng.uniform(0.05, 0.6))
                got.clear()
                t0 = append(log, gin_line(i))
                if not got.wait(5.0):
                    raise RuntimeError(f"the tailer did not yield line {i} within 5 s")
                out.append(seen[-1] - t0)
        finally:
            stop.set()
            worker.join(5.0)
            tailer.close()
    return out


def summary(xs: list[float]) -> dict[str, float]:
    qs = statistics.quantiles(xs, n=20, method="inclusive")
    return {"p50_s": statistics.median(xs), "p95_s": qs[18], "max_s": max(xs), "mean_s": statistics.fmean(xs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=60, help="lines appended per measurement (default 60)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "append_to_screen.json")
    args = ap.parse_args(argv)
    if args.n < 2:
        ap.error("-n must be at least 2")

    from ietop.runtime import tune_gc

    tune_gc()  # as the live dashboard does at start (ietop/cli.py)
    base = tailer_alone(args.n, args.seed)
    mine = asyncio.run(dashboard(args.n, args.seed))
    b, m = summary(base), summary(mine)
    ok = m["max_s"] <= TARGET_S
    result: dict[str, Any] = {
        "when": datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": {"platform": platform.platform(), "python": platform.python_version()},
        "n": args.n,
        "target_s": TARGET_S,
        "baseline": "FileTailer.follow alone: write to the line yielded",
        "tailer": b,
        "dashboard": m,
        "ratio_p50": m["p50_s"] / b["p50_s"] if b["p50_s"] else None,
        "ok": ok,
        "samples": {"tailer": base, "dashboard": mine},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(f"{'append -> ':<24}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}")
    for name, s in (("tailer yields the line", b), ("on screen after it", m)):
        print(f"{name:<24}{s['p50_s'] * 1e3:9.1f}{s['p95_s'] * 1e3:9.1f}{s['max_s'] * 1e3:9.1f}")
    verdict = "ok" if ok else "MISSED"
    print(f"dashboard/tailer at p50: {result['ratio_p50']:.2f}x; target: every line within {TARGET_S * 1e3:.0f} ms "
          f"-> {verdict}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
