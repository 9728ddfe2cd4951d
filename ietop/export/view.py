"""The exporter's sink: what the store finalizes, counted per log source since its engine's current run began.

A Prometheus counter must never count the same thing twice, across exporter restarts too. So a counter here is
not "since the exporter started" but "since the engine's current run began": the exporter reads each log back
from the run's first line (ietop.pipeline.feeds.TailFeed), counts what it finalizes, and states the run's start
as the counter's `_created`. Restarting the exporter rebuilds the same totals; a new run of the engine (its
start line, or any line after it stopped) is a reset, which Prometheus's `rate()`/`increase()` expect.

A record counts for its source's current run only if it happened after that run began: the store finalizes some
records late (a load waits for the requests that waited for it), and one of an earlier run must not land in the
new run's totals.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ietop.model.hints import HintEngine
from ietop.model.records import Load, Request, Simple, Unload
from ietop.model.store import Store
from parsers import events as ev

RUN_OPENS = frozenset({"ollama", "mlx"})
"""Engines whose server start line comes before anything of that run (vLLM listens only after loading: a vLLM run
begins at the first line after the previous one stopped)."""

KEEP = 2000
STARTUP = (ev.ServerStart, ev.ServerConfig, ev.StartupFact, ev.LoadStart, ev.LoadDecision)
"""The lines a server's run begins with (a banner, its configuration, a first load, listening)."""
# Ten buckets or fewer each: a fleet multiplies every bucket by models × hosts (a scrape of 100 models is mostly
# histogram lines), and these bounds still split each quantity where tuning decisions fall.
TOKENS = (128.0, 512.0, 2048.0, 4096.0, 8192.0, 16384.0, 32768.0, 131072.0)
SECONDS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
ITL = (0.01, 0.02, 0.04, 0.06, 0.1, 0.2, 0.5)
LOAD_SECONDS = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
BUCKETS: dict[str, tuple[float, ...]] = {
    "prompt_tokens": TOKENS, "output_tokens": TOKENS, "duration": SECONDS, "ttft": SECONDS, "itl": ITL,
    "load_seconds": LOAD_SECONDS,
}


@dataclass(slots=True)
class Hist:
    """One histogram series: cumulative bucket counts are made at exposition time."""

    bounds: tuple[float, ...]
    counts: list[int]
    total: float = 0.0
    n: int = 0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[i] += 1
                break
        self.total += value
        self.n += 1


@dataclass(slots=True)
class RunCounts:
    """One source's totals since its run began. Keys are label tuples without `engine`/`instance` (added at
    exposition, from the source); models as the records named them (resolved to names at exposition)."""

    start: float
    bounded: bool = False
    """The run began at a line that says so (a server start, or the first line after the server stopped): what
    happened before it is another run's. Otherwise `start` is only the first line read (an excerpt, or a run
    longer than the read-back), and a load that began before it (its end is in the log) is this run's."""
    loads: dict[tuple[str, str], int] = field(default_factory=dict)  # (model, outcome)
    unloads: dict[tuple[str, str], int] = field(default_factory=dict)  # (model, reason)
    evictions: dict[tuple[str, str], int] = field(default_factory=dict)  # (model, for_model)
    requests: dict[tuple[str, str], int] = field(default_factory=dict)  # (model, status)
    cold: dict[str, int] = field(default_factory=dict)
    truncations: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    hists: dict[tuple[str, str], Hist] = field(default_factory=dict)  # (metric, model)

    def observe(self, metric: str, model: str, value: float | int | None) -> None:
        if value is None:
            return  # only requests whose value is known
        key = (metric, model)
        hist = self.hists.get(key)
        if hist is None:
            bounds = BUCKETS[metric]
            hist = self.hists[key] = Hist(bounds, [0] * len(bounds))
        hist.observe(float(value))


def _add(d: dict[Any, int], key: Any) -> None:
    d[key] = d.get(key, 0) + 1


def _load_t(ld: Load) -> float:
    """When a load belongs to a run: where it ended (or failed); one still in progress, where it began."""
    return ld.t_end if ld.t_end is not None else ld.t_begin


def _unload_t(u: Unload) -> float:
    """When an unload belongs to a run. What a restarting Ollama held is unloaded at its new start line: that
    ends the old run (it must not open the new one's totals)."""
    return u.t - 1e-3 if u.server_stopped else u.t


def count_load(c: RunCounts, ld: Load) -> None:
    model = ld.model or ""
    _add(c.loads, (model, "ok" if ld.ok else ld.status))
    if ld.ok and ld.duration_s is not None and ld.begin_known:
        c.observe("load_seconds", model, ld.duration_s)


def count_unload(c: RunCounts, u: Unload) -> None:
    model = u.model or ""
    _add(c.unloads, (model, u.reason))
    if u.is_eviction:
        _add(c.evictions, (model, u.for_model or ""))


class ExportView:
    """Create with the store: `view = ExportView(); store = Store(view); view.attach(store)`. The exporter's
    loop calls `saw(src, t, event)` for every event before the store applies it (run boundaries)."""

    keeps_ok_probes = False

    def __init__(self) -> None:
        self.store: Store | None = None
        self.hints = HintEngine()
        self.runs: dict[int, RunCounts] = {}
        self.listen: dict[int, str] = {}
        """The address each log's server said it listens on (its `instance`)."""
        self._stopped: set[int] = set()
        self.loads: deque[Load] = deque(maxlen=KEEP)
        self.unloads: deque[Unload] = deque(maxlen=KEEP)
        """The newest finalized loads and unloads: what Residency's history (load counts, last load) reads."""
        self.version = 0
        """Bumped by every record counted and every run begun: an exposition can be reused while it holds."""

    def attach(self, store: Store) -> None:
        self.store = store

    # -- run boundaries ------------------------------------------------------------------------
    def saw(self, src: int, t: float, event: ev.Event, engine: str) -> None:
        if isinstance(event, ev.ServerStop):
            self._stopped.add(src)
            return
        if isinstance(event, ev.ServerStart) and event.listen:
            self.listen[src] = event.listen
        opens = isinstance(event, ev.ServerStart) and engine in RUN_OPENS
        # After a stop, the next server's start-up lines open its run (not the stopped one's last shutdown lines).
        if src not in self.runs or opens or (src in self._stopped and isinstance(event, STARTUP)):
            # A log read back from inside a run (longer than the read-back) begins where the reading did.
            self.runs[src] = RunCounts(t, bounded=opens or src in self._stopped)
            self._stopped.discard(src)
            self.version += 1

    def _run(self, src: int, t: float) -> RunCounts | None:
        run = self.runs.get(src)
        if run is None:
            run = self.runs[src] = RunCounts(t)  # a record before any event of its source (a proxy measurement)
        return run if t >= run.start or not run.bounded else None

    # -- the store's sink ----------------------------------------------------------------------
    def __call__(self, kind: str, record: Any) -> None:
        self.hints.observe(kind, record)
        if kind == "request":
            self._request(record)
        elif kind == "load":
            self.loads.append(record)
            if (c := self._run(record.ref.src, _load_t(record))) is not None:
                count_load(c, record)
        elif kind == "unload":
            self.unloads.append(record)
            if (c := self._run(record.ref.src, _unload_t(record))) is not None:
                count_unload(c, record)
        elif kind in ("truncation", "error"):
            self._simple(kind, record)
        else:
            return
        self.version += 1

    def _request(self, req: Request) -> None:
        if not req.inference or (c := self._run(req.ref.src, req.t_end)) is None:
            return
        model = req.model or ""
        _add(c.requests, (model, str(req.status)))
        if req.cold_load:
            _add(c.cold, model)
        c.observe("prompt_tokens", model, req.prompt_tokens)
        c.observe("output_tokens", model, req.output_tokens)
        if req.status < 400:
            c.observe("duration", model, req.latency_s)
        c.observe("ttft", model, req.ttft_s)
        c.observe("itl", model, req.itl_s)

    def _simple(self, kind: str, s: Simple) -> None:
        if s.t is None or (c := self._run(s.ref.src, s.t)) is None:
            return
        if kind == "truncation":
            _add(c.truncations, str(s.data.get("model") or ""))
        else:
            _add(c.errors, str(s.data.get("kind") or "other"))

    def pending(self) -> tuple[dict[int, RunCounts], Iterable[Load]]:
        """Loads and unloads the store still holds (joinable), counted into copies of the runs: a scrape sees
        them now, and they are counted for good when the store finalizes them."""
        assert self.store is not None
        loads, unloads = self.store.loads.pending()
        extra: dict[int, RunCounts] = {}

        def run_of(src: int, when: float) -> RunCounts | None:
            run = self.runs.get(src)
            if run is None or (run.bounded and when < run.start):
                return None
            c = extra.get(src)
            if c is None:
                c = extra[src] = RunCounts(run.start, run.bounded)
            return c

        for ld in loads:
            if (c := run_of(ld.ref.src, _load_t(ld))) is not None:
                count_load(c, ld)
        for u in unloads:
            if (c := run_of(u.ref.src, _unload_t(u))) is not None:
                count_unload(c, u)
        return extra, loads
