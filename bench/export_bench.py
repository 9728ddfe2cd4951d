"""`ietop export` benchmarks (issue 24): what a scrape costs, and what the exporter costs while nothing happens.

    .venv/bin/python bench/export_bench.py [--models 100] [--repeat 20] [--idle-s 30]

1. **Scrape**: a store holding a SYNTHETIC log of `--models` models (each loaded twice, evicted, asked six times,
   some prompts truncated: loads, unloads, evictions with their cause, requests, cold loads, load and request
   duration histograms per model; the log gives no token counts or TTFT) is exposed as a scrape does it (the families
   built, then prometheus-client's text encoding), against a baseline measured in the same run: a bare
   prometheus-client registry holding the same number of series (Counter/Gauge/Histogram objects), encoded
   the same way. Median of `--repeat`; target: <= 50 ms per scrape.
2. **Idle**: `ietop export` in a child process on a finished log (nothing new arrives), and again polling three
   engines that refuse (closed loopback ports) with host and GPU sampling; CPU% of one core over `--idle-s`
   seconds (psutil: user+system over wall), after a warm-up. Target: <= 1 % of a core (the polling loop's own
   target, 0.5 %, is bench/polling_idle.py's). A bare `python -c "import time; time.sleep(N)"` child is the
   same-run floor.

Writes bench/out/export_bench.json. The log is synthetic and says so in its first line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fixtures.synthetic.make_seed_budget import MODELS, Writer  # noqa: E402


def synthetic_log(models: int) -> str:
    """One Ollama E4 server, `models` models of the seed's four shapes in turn, each loaded twice, asked three
    times, evicted once for the next; every fifth one with a truncation (SYNTHETIC)."""
    w = Writer()
    w.lines[0] = w.lines[0].replace("the seeds' budget example", f"bench/export_bench.py, {models} models")
    shapes = list(MODELS.values())
    w.slog(0.0, "INFO", "routes.go:1304", "server config",
           'env="map[OLLAMA_MAX_LOADED_MODELS:2 OLLAMA_NUM_PARALLEL:1]"')
    w.slog(0.01, "INFO", "routes.go:1357", "Listening on 127.0.0.1:11434 (version 0.12.3)")
    s = 10.0
    prev: str | None = None
    for i in range(models):
        name = f"model{i:03d}:7b"
        MODELS[name] = shapes[i % len(shapes)]
        for k in range(2):
            if prev is not None:
                w.evict(s, prev)
            ready = w.load(s + 0.5, name, 2.0 + (i % 7))
            w.request(s, ready + 1.0, name)
            if i % 5 == 0:
                w.slog(ready + 1.2, "WARN", "runner.go:130", "truncating input prompt",
                       f"limit=2048 prompt={3000 + i} keep=4 new=2048")
            w.request(ready + 2.0, ready + 4.0, name)
            w.request(ready + 5.0, ready + 9.0, name)
            s = ready + 12.0 + k
            prev = name
    return "\n".join(w.lines) + "\n"


def scrape_bench(models: int, repeat: int) -> dict[str, Any]:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
    from prometheus_client.exposition import generate_latest

    from ietop.export.families import families
    from ietop.export.view import ExportView
    from ietop.model.store import Store
    from ietop.pipeline.ingest import file_events, merged_events, open_inputs

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        log.write_text(synthetic_log(models), encoding="utf-8")
        view = ExportView()
        store = Store(view)
        view.attach(store)
        for t, src, _seq, event in merged_events(open_inputs(store, [str(log)], "ollama"), file_events):
            view.saw(src, t, event, "ollama")
            store.apply(src, t, event)

    class Ours:
        def collect(self) -> Any:
            return iter(families(store, view, None))

    ours = CollectorRegistry(auto_describe=False)
    ours.register(Ours())  # type: ignore[arg-type]
    text = generate_latest(ours).decode()
    series = [line for line in text.splitlines() if line and not line.startswith("#")]
    hints = sum(line.startswith("ietop_hint_active") for line in series)
    # The baseline: the same number of series in prometheus-client's own metric objects.
    bare = CollectorRegistry()
    n_counter = sum(1 for line in series if "_total{" in line)
    n_hist_series = sum(1 for line in series if "_bucket{" in line and 'le="+Inf"' in line)
    n_gauge = len(series) - n_counter - sum(1 for line in series if "_bucket{" in line or "_sum{" in line
                                            or "_count{" in line) - sum(1 for line in series if "_created{" in line)
    c = Counter("bare_c", "c", ["i"], registry=bare)
    g = Gauge("bare_g", "g", ["i"], registry=bare)
    h = Histogram("bare_h", "h", ["i"], registry=bare, buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300))
    for i in range(n_counter):
        c.labels(str(i)).inc(i)
    for i in range(max(0, n_gauge)):
        g.labels(str(i)).set(i)
    for i in range(n_hist_series):
        h.labels(str(i)).observe(i % 50)
    bare_lines = [line for line in generate_latest(bare).decode().splitlines() if line and not line.startswith("#")]

    def timed(fn: Any) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    from prometheus_client.exposition import choose_encoder

    openmetrics, _type = choose_encoder("application/openmetrics-text; version=1.0.0")
    out: dict[str, Any] = {"models": models, "series": len(series), "bare_series": len(bare_lines),
                           "hints_active": hints, "target_ms": 50}
    for fmt, encode in (("text", generate_latest), ("openmetrics", openmetrics)):
        ours_s, bare_s = [], []
        for _ in range(repeat):  # alternating, so that a busy moment hits both
            ours_s.append(timed(lambda encode=encode: encode(ours)))  # type: ignore[misc]
            bare_s.append(timed(lambda encode=encode: encode(bare)))  # type: ignore[misc]
        o, b = statistics.median(ours_s), statistics.median(bare_s)
        # What a scrape costs after the store changed: the families built and encoded. Between changes the
        # exporter serves the bytes it encoded last (ietop.export.serve), a dictionary lookup.
        out[fmt] = {"scrape_ms": round(o * 1000, 2), "bare_ms": round(b * 1000, 2), "ratio": round(o / b, 2),
                    "spread_ms": [round(min(ours_s) * 1000, 2), round(max(ours_s) * 1000, 2)]}
    return out


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_percent(argv: list[str], seconds: float, warmup: float) -> float:
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(warmup)
        p = psutil.Process(proc.pid)
        before, t0 = p.cpu_times(), time.monotonic()
        time.sleep(seconds)
        after, t1 = p.cpu_times(), time.monotonic()
        used = (after.user - before.user) + (after.system - before.system)
        return round(100.0 * used / (t1 - t0), 3)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def idle_bench(seconds: float) -> dict[str, Any]:
    py = sys.executable
    log = str(ROOT / "ietop" / "demo" / "incident.log")
    listen = ["--listen", f"127.0.0.1:{_closed_port()}"]
    floor = cpu_percent([py, "-c", f"import time; time.sleep({seconds + 30})"], seconds, 2.0)
    finished = cpu_percent([py, "-m", "ietop", "export", "--log", f"ollama:{log}", *listen], seconds, 8.0)
    listen = ["--listen", f"127.0.0.1:{_closed_port()}"]
    polled = cpu_percent([py, "-m", "ietop", "export", "--ollama", f"http://127.0.0.1:{_closed_port()}",
                          "--vllm", f"http://127.0.0.1:{_closed_port()}", "--mlx", f"http://127.0.0.1:{_closed_port()}",
                          "--interval", "2", *listen], seconds, 8.0)
    return {"seconds": seconds, "floor_pct": floor, "finished_log_pct": finished, "three_refusing_engines_pct": polled,
            "target_pct": 1.0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--idle-s", type=float, default=30.0)
    ap.add_argument("--only", choices=("scrape", "idle"))
    args = ap.parse_args(argv)
    report: dict[str, Any] = {"synthetic_log": True, "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                              "host": {"platform": platform.platform(), "cpus": os.cpu_count()}}
    if args.only in (None, "scrape"):
        report["scrape"] = scrape_bench(args.models, args.repeat)
        print(json.dumps(report["scrape"]))
    if args.only in (None, "idle"):
        report["idle"] = idle_bench(args.idle_s)
        print(json.dumps(report["idle"]))
    out = ROOT / "bench" / "out" / "export_bench.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
