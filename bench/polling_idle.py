#!/usr/bin/env python3
"""Idle CPU of the polling loop the dashboard and `ietop export` share (issue 24), next to a same-run baseline.

What runs, each in its own child process (``python -P`` with ``PYTHONPATH`` set to the checkout measured):

- ``poll``: ``poll_forever`` (on the child's asyncio loop) over three engines that refuse every connection
  (Ollama, vLLM and MLX at ports of 127.0.0.1 that the parent binds and never listens on, so nothing else can
  take them), plus ``sample_forever`` (a thread: host memory, GPUs through NVML, engine processes) posting
  each sample to the loop with ``call_soon_threadsafe``, as the exporter does; no Textual.
- ``floor``: the same shape doing nothing: an asyncio loop waking every 2 s and a thread waking every 2 s and
  posting to the loop. The least any design that samples every 2 s can cost.

After ``--settle`` seconds the parent reads the child's user+system CPU (psutil) and reads it again
``--seconds`` later; CPU% is of one core. The kinds alternate within each of ``--repeat`` rounds (drift in
the machine's load hits them alike) and medians are reported with the spread (min-max). ``--compare-checkout
DIR`` adds ``poll`` run from another checkout (e.g. a git worktree of the previous commit) to every round.

Each child counts its own connection attempts per port (an audit hook on ``socket.connect``) and its context
switches (``/proc/self/status``), and reports the engines' states in its store when it is stopped: a loop that
went quiet because it stopped polling would show there.

``--profile`` runs the ``poll`` child once under cProfile (both threads) for ``--seconds`` and prints the top
functions by cumulative and internal time. ``--dashboard`` measures the Textual app instead, with
bench/dashboard.py's pty harness (``idle_cpu``): ``python -m ietop --ollama … --vllm … --mlx … --interval 2``
on the same refusing ports, the app without polling (``--log ollama:EMPTY``), a finished replay and the
minimal Textual app.

Usage::

    .venv/bin/python bench/polling_idle.py                         # 3 rounds of 60 s windows (~7 min)
    .venv/bin/python bench/polling_idle.py --seconds 20 --repeat 2 # quicker
    .venv/bin/python bench/polling_idle.py --compare-checkout /tmp/base-poll
    .venv/bin/python bench/polling_idle.py --profile --seconds 120
    .venv/bin/python bench/polling_idle.py --dashboard --compare-checkout /tmp/base-poll

Results: a table on stdout and ``bench/out/polling_idle.json`` (``--out``). See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve()
TARGET_PCT = 0.5  # % of one core: 3 engines + host + GPU sampled every 2 s (issue 24)
INTERVAL_S = 2.0
PROFILE_WINDOW = threading.Event()
ENGINES = ("ollama", "vllm", "mlx")
REPLAY_LOG = REPO / "fixtures" / "ollama" / "007-v05-truncation-gin-api-ps-polling.log"
"""A real log for the "finished replay" row: the dashboard idle once a replay is over (no polling, no sampling)."""


# ------------------------------------------------------------------------------------------------ ports
def refusing_ports(n: int) -> list[socket.socket]:
    """Sockets bound to free loopback ports and never listened on: a connect to them is refused at once,
    and no other program can take the port while the parent holds them."""
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    return socks


def endpoints_for(ports: list[int]) -> list[tuple[str, str]]:
    return [(engine, f"http://127.0.0.1:{port}") for engine, port in zip(ENGINES, ports, strict=False)]


# ------------------------------------------------------------------------------------------------ the child
def _ctx_switches() -> int:
    total = 0
    with open("/proc/self/status") as f:
        for line in f:
            if "ctxt_switches" in line:
                total += int(line.split()[1])
    return total


def child_main(mode: str, ports: list[int], run_s: float, settle_s: float, profile_out: str | None) -> int:
    connects: Counter[int] = Counter()

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if event == "socket.connect":
            addr = args[1]
            if isinstance(addr, tuple) and len(addr) >= 2 and isinstance(addr[1], int):
                connects[addr[1]] += 1

    sys.addaudithook(audit)
    profilers: list[Any] = []
    if profile_out:
        import cProfile

        def thread_profile(frame: Any, event: str, arg: Any) -> None:
            # Each new thread's hook until the window opens (imports and start-up are not idle cost); then
            # one profiler per thread, merged at the end.
            if not PROFILE_WINDOW.is_set():
                return
            sys.setprofile(None)
            prof = cProfile.Profile()
            profilers.append(prof)
            prof.enable()

        threading.setprofile(thread_profile)
    report: dict[str, Any] = {}
    try:
        asyncio.run(_child_loop(mode, ports, run_s, settle_s, report, profilers if profile_out else None))
    finally:
        threading.setprofile(None)
    report["connects"] = {str(p): connects[p] for p in ports}
    if profile_out:
        import pstats

        stats: pstats.Stats | None = None
        for prof in profilers:
            prof.disable()
            stats = pstats.Stats(prof) if stats is None else stats.add(prof) or stats
        if stats is not None:
            stats.dump_stats(profile_out)
    print("REPORT " + json.dumps(report), flush=True)
    return 0


async def _child_loop(
    mode: str, ports: list[int], run_s: float, settle_s: float, report: dict[str, Any], profilers: list[Any] | None
) -> None:
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    marks: dict[str, float] = {}

    def on_term() -> None:
        # Read the clocks first: what stopping costs is not part of the window.
        marks["cpu1"], marks["wall1"] = time.process_time(), time.monotonic()
        marks["ctx1"] = _ctx_switches()
        done.set()

    loop.add_signal_handler(signal.SIGTERM, on_term)
    stop = threading.Event()
    samples = [0]

    def on_sample(*_: object) -> None:
        samples[0] += 1

    def post(*args: object) -> None:
        loop.call_soon_threadsafe(on_sample, *args)

    tasks: list[asyncio.Task[None]] = []
    store: Any = None
    if profilers is not None:
        import cProfile

        main_prof = cProfile.Profile()
        profilers.append(main_prof)
    if mode == "poll":
        from ietop.pipeline.polling import poll_forever, sample_forever
        from ietop.pipeline.setup import new_store

        store = new_store()[0]
        endpoints = endpoints_for(ports)
        thread = threading.Thread(target=sample_forever, args=(lambda: store, endpoints, stop, post), daemon=True)
        thread.start()
        tasks.append(asyncio.ensure_future(poll_forever(lambda: store, endpoints, INTERVAL_S)))
    elif mode == "floor":

        def sampler() -> None:
            while not stop.is_set():
                post()
                stop.wait(INTERVAL_S)

        def tick() -> None:  # a timer on the loop every 2 s, as a poller's
            timers[:] = [loop.call_later(INTERVAL_S, tick)]

        timers: list[asyncio.TimerHandle] = []
        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        tick()
    else:
        raise SystemExit(f"unknown child mode {mode!r}")
    await asyncio.sleep(settle_s)
    marks["ctx0"] = _ctx_switches()
    marks["cpu0"], marks["wall0"] = time.process_time(), time.monotonic()
    if profilers is not None:
        PROFILE_WINDOW.set()
        main_prof.enable()
    print("READY", flush=True)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(done.wait(), run_s if run_s > 0 else None)
    if profilers is not None:
        main_prof.disable()
    if "cpu1" not in marks:
        marks["cpu1"], marks["wall1"] = time.process_time(), time.monotonic()
        marks["ctx1"] = _ctx_switches()
    # CLOCK_PROCESS_CPUTIME_ID: every thread, in ns; psutil's cpu_times counts 10 ms ticks.
    report["self_cpu_s"] = marks["cpu1"] - marks["cpu0"]
    report["self_wall_s"] = marks["wall1"] - marks["wall0"]
    report["self_cpu_pct"] = 100.0 * report["self_cpu_s"] / report["self_wall_s"]
    report["ctx_switches_per_s"] = (marks["ctx1"] - marks["ctx0"]) / report["self_wall_s"]
    stop.set()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    thread.join(5.0)
    report["hardware_samples"] = samples[0]
    if store is not None:
        report["engines"] = {url: f"{st.state} ({st.detail})" for url, st in store.engines.items()}


# ------------------------------------------------------------------------------------------------ the parent
class Child:
    def __init__(
        self,
        mode: str,
        checkout: Path,
        ports: list[int],
        settle_s: float,
        run_s: float = 0.0,
        profile_out: str | None = None,
    ) -> None:
        argv = [
            sys.executable,
            "-P",
            str(HERE),
            "--child",
            mode,
            "--ports",
            ",".join(map(str, ports)),
            "--settle",
            str(settle_s),
            "--run-seconds",
            str(run_s),
        ]
        if profile_out:
            argv += ["--profile-out", profile_out]
        env = dict(os.environ, PYTHONPATH=str(checkout))
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=checkout
        )
        self.ps = psutil.Process(self.proc.pid)

    def wait_ready(self, timeout: float) -> None:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.strip() == "READY":
                return
        self.proc.kill()
        _, err = self.proc.communicate()
        raise RuntimeError(f"child never got ready: {err.strip()[-1500:]}")

    def cpu_s(self) -> float:
        t = self.ps.cpu_times()
        return float(t.user + t.system)

    def finish(self, timeout: float = 30.0) -> dict[str, Any]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        for line in out.splitlines():
            if line.startswith("REPORT "):
                rep: dict[str, Any] = json.loads(line[len("REPORT ") :])
                return rep
        raise RuntimeError(f"child exited {self.proc.returncode} without a report: {err.strip()[-1500:]}")


def measure(mode: str, checkout: Path, ports: list[int], seconds: float, settle_s: float) -> dict[str, Any]:
    child = Child(mode, checkout, ports, settle_s)
    try:
        child.wait_ready(60.0 + settle_s)
        c0, w0 = child.cpu_s(), time.perf_counter()
        time.sleep(seconds)
        c1, w1 = child.cpu_s(), time.perf_counter()
    finally:
        report = child.finish()
    wall = w1 - w0
    # The child's own clock (ns) is the figure; psutil's (10 ms ticks, the parent's view) is a cross-check.
    report.update(
        cpu_pct=report["self_cpu_pct"],
        psutil_cpu_s=c1 - c0,
        wall_s=wall,
        psutil_cpu_pct=100.0 * (c1 - c0) / wall,
        connects_per_s={p: n / (wall + settle_s) for p, n in report.get("connects", {}).items()},
    )
    return report


def summary(xs: list[float]) -> dict[str, float | None]:
    if not xs:
        return {"median": None, "min": None, "max": None}
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def run_headless(args: argparse.Namespace, ports: list[int]) -> dict[str, Any]:
    kinds: list[tuple[str, str, Path]] = [("floor", "floor", REPO), ("poll", "poll", REPO)]
    if args.compare_checkout:
        kinds.append(("poll (compare)", "poll", Path(args.compare_checkout).resolve()))
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in kinds}
    for r in range(args.repeat):
        order = kinds if r % 2 == 0 else list(reversed(kinds))
        for name, mode, checkout in order:
            res = measure(mode, checkout, ports, args.seconds, args.settle)
            runs[name].append(res)
            print(
                f"round {r + 1}/{args.repeat} {name:15} {res['cpu_pct']:.3f} % of a core  "
                f"(psutil {res['psutil_cpu_pct']:.2f})  ctx/s {res['ctx_switches_per_s']:.1f}  "
                f"connects {res.get('connects')}",
                flush=True,
            )
    table = {name: summary([x["cpu_pct"] for x in rs]) for name, rs in runs.items()}
    floor = table["floor"]["median"]
    for row in table.values():
        med = row["median"]
        row["ratio_to_floor"] = med / floor if med is not None and floor else None
        row["above_floor"] = med - floor if med is not None and floor is not None else None
    return {"table": table, "runs": runs}


def run_profile(args: argparse.Namespace, ports: list[int]) -> str:
    import pstats

    out = Path(args.out).with_suffix(".prof")
    child = Child("poll", REPO, ports, args.settle, run_s=args.seconds, profile_out=str(out))
    child.wait_ready(60.0 + args.settle)
    child.proc.wait(args.seconds + 60)
    report = child.finish()
    buf = [f"child report: {json.dumps(report)}", f"profile: {out}"]
    for key in ("cumulative", "tottime"):
        import io

        s = io.StringIO()
        pstats.Stats(str(out), stream=s).sort_stats(key).print_stats(args.top)
        buf.append(s.getvalue())
    return "\n".join(buf)


def run_dashboard(args: argparse.Namespace, ports: list[int]) -> dict[str, Any]:
    sys.path.insert(0, str(REPO / "bench"))
    import dashboard as dash  # bench/dashboard.py: its pty harness

    problems: list[str] = []
    dash.precompile(problems)
    py = sys.executable
    flags = []
    for engine, url in endpoints_for(ports):
        flags += [f"--{engine}", url]
    with tempfile.TemporaryDirectory(prefix="polling_idle-") as tmp:
        empty = Path(tmp) / "empty-ollama.log"
        empty.write_bytes(b"")
        hello = Path(tmp) / "hello_app.py"
        hello.write_text(dash.BASELINE_APP)

        def ietop(checkout: Path, *rest: str) -> list[str]:
            # `env` execs the interpreter: the pty's child is still the app itself.
            return ["env", f"PYTHONPATH={checkout}", py, "-P", "-m", "ietop", *rest]

        kinds: list[tuple[str, list[str], str]] = [
            ("3 refusing engines", ietop(REPO, *flags, "--interval", "2"), "Residency"),
            ("no polling (--log EMPTY)", ietop(REPO, "--log", f"ollama:{empty}", "--interval", "2"), "Residency"),
            ("finished replay", ietop(REPO, "replay", str(REPLAY_LOG), "--speed", "0"), "replay finished"),
            ("hello app", [py, str(hello)], "hello"),
        ]
        if args.compare_checkout:
            old = Path(args.compare_checkout).resolve()
            kinds.insert(1, ("3 refusing (compare)", ietop(old, *flags, "--interval", "2"), "Residency"))
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in kinds}
        for r in range(args.repeat):
            order = kinds if r % 2 == 0 else list(reversed(kinds))
            for name, argv, watch in order:
                res = dash.idle_cpu(argv, watch, args.seconds, args.settle, problems)
                runs[name].append(res)
                print(
                    f"round {r + 1}/{args.repeat} {name:26} {res.get('cpu_pct', float('nan')):.3f} % of a core",
                    flush=True,
                )
    table = {name: summary([x["cpu_pct"] for x in rs if "cpu_pct" in x]) for name, rs in runs.items()}
    return {"table": table, "runs": runs, "problems": problems}


def print_table(title: str, table: dict[str, dict[str, Any]]) -> None:
    print(f"\n{title}")
    print(f"{'kind':28} {'median %':>9} {'min':>7} {'max':>7} {'x floor':>8}")
    for name, row in table.items():
        med, lo, hi = row["median"], row["min"], row["max"]
        ratio = row.get("ratio_to_floor")
        print(
            f"{name:28} {med if med is not None else float('nan'):9.3f} {lo or 0:7.3f} {hi or 0:7.3f} "
            f"{'' if ratio is None else f'{ratio:.2f}':>8}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="idle CPU of the shared polling loop (see bench/README.md)")
    ap.add_argument("--seconds", type=float, default=60.0, help="measured window per run (60)")
    ap.add_argument("--settle", type=float, default=5.0, help="seconds after start before the window (5)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; medians reported (3)")
    ap.add_argument("--compare-checkout", metavar="DIR", help="also run the poll child from this checkout")
    ap.add_argument("--profile", action="store_true", help="cProfile the poll child for --seconds instead")
    ap.add_argument("--top", type=int, default=30, help="rows of the profile (30)")
    ap.add_argument("--dashboard", action="store_true", help="the Textual app on a pty instead (dashboard.py)")
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "polling_idle.json"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--ports", help=argparse.SUPPRESS)
    ap.add_argument("--run-seconds", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--profile-out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child_main(
            args.child, [int(p) for p in args.ports.split(",")], args.run_seconds, args.settle, args.profile_out
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    socks = refusing_ports(len(ENGINES))
    ports = [s.getsockname()[1] for s in socks]
    try:
        if args.profile:
            print(run_profile(args, ports))
            return 0
        started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        load0 = os.getloadavg()
        result = run_dashboard(args, ports) if args.dashboard else run_headless(args, ports)
        result.update(
            what="dashboard (pty)" if args.dashboard else "headless polling loop",
            started=started,
            load_before=load0,
            load_after=os.getloadavg(),
            cpus=os.cpu_count(),
            seconds=args.seconds,
            settle=args.settle,
            repeat=args.repeat,
            target_pct=TARGET_PCT,
            compare_checkout=args.compare_checkout,
            ports=ports,
            python=sys.version.split()[0],
        )
        out = Path(args.out) if not args.dashboard else Path(args.out).with_name("polling_idle_dashboard.json")
        out.write_text(json.dumps(result, indent=1) + "\n")
        print_table(
            f"{result['what']}: CPU % of one core, {args.repeat} x {args.seconds:g} s "
            f"(load {load0[0]:.2f} -> {result['load_after'][0]:.2f}); target <= {TARGET_PCT} %",
            result["table"],
        )
        for p in result.get("problems", []):
            print(f"problem: {p}", file=sys.stderr)
        print(f"\n{out}")
        return 0
    finally:
        for s in socks:
            s.close()


if __name__ == "__main__":
    sys.exit(main())
