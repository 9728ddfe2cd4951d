"""The dashboard's side of the store: a sink that keeps the newest records, and `snapshot(now)`.

The store finalizes loads hours after they complete (a long request can still claim one), so the view
reads the load tracker's pending records too; a record is in exactly one of the two places.
Everything is bounded: `keep` records per kind, `SAMPLES` latency samples.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from typing import Any

from ietop.model.budget import build
from ietop.model.budget_inputs import gather
from ietop.model.hints import HintContext, HintEngine
from ietop.model.records import Load, Request, Simple, Unload
from ietop.model.snapshot import EngineRow, LogGpu, Snapshot, SourceRow
from ietop.model.store import Store
from ietop.model.timeline import Sample, build_timeline, event_rows, latency_rows, resident_rows, sample_time
from parsers.ollama.messages import human_bytes

SAMPLES = 50_000
"""Latency samples kept for the windows: 15 minutes at ~55 requests/s; older ones fall off."""


@dataclass(frozen=True, slots=True)
class _RecordParts:
    """A snapshot's parts that only the store's records decide, for one store version."""

    version: int
    pending_loads: list[Load]
    pending_unloads: list[Unload]
    samples: list[Sample]
    """By time."""
    base: Snapshot
    """Everything but the window's fields."""


class LiveView:
    """Create with the store: `view = LiveView(); store = Store(view); view.attach(store)`."""

    keeps_ok_probes = False
    """Successful probes (`HEAD /`, `GET /api/tags`…) are not kept here: the store only counts them."""

    def __init__(self, keep: int = 2000) -> None:
        self.store: Store | None = None
        self.requests: deque[Request] = deque(maxlen=keep)
        self.loads: deque[Load] = deque(maxlen=keep)
        self.unloads: deque[Unload] = deque(maxlen=keep)
        self.simple: deque[Simple] = deque(maxlen=keep)
        self.samples: deque[tuple[float, float | None, float | None, float | None]] = deque(maxlen=SAMPLES)
        """(t_end, ttft, itl, e2e) of inference requests."""
        self.hints = HintEngine()
        self.load_counts: dict[str, int] = {}
        self.evict_counts: dict[str, int] = {}
        self._built: tuple[int, float, float] | None = None
        self._last: Snapshot | None = None
        self._parts: _RecordParts | None = None

    def attach(self, store: Store) -> None:
        self.store = store

    def __call__(self, kind: str, record: Any) -> None:
        self.hints.observe(kind, record)
        if kind == "request":
            req: Request = record
            if req.inference or req.status >= 400:
                self.requests.append(req)
            if req.inference:
                e2e = req.latency_s if req.status < 400 else None
                self.samples.append((req.t_end, req.ttft_s, req.itl_s, e2e))
        elif kind == "load":
            self.loads.append(record)
        elif kind == "unload":
            self.unloads.append(record)
        elif kind in ("truncation", "error"):
            self.simple.append(record)

    def snapshot(self, now: float, window_s: float) -> Snapshot:
        """The view at `now`; the same object again when nothing changed (the screen skips the redraw)."""
        store = self.store
        assert store is not None, "attach() the store first"
        key = (store.version, round(now), window_s)
        if self._last is not None and self._built == key:
            return self._last
        parts = self._parts if self._parts is not None and self._parts.version == store.version else None
        if parts is None:
            # What only the store's records decide: kept while its version holds, so a second that only moves
            # the clock recomputes the windows (latency, hints) and nothing else.
            parts = self._parts = self._record_parts(store)
        cfg = store.settings
        ctx = HintContext(cfg.configured, cfg.configured_ref, cfg.effective, cfg.effective_ref,
                          aliases=dict(store.loads.aliases))
        hints = self.hints.evaluate(ctx, now - window_s, extra_loads=parts.pending_loads,
                                    extra_unloads=parts.pending_unloads)
        snap = replace(parts.base, now=now, window_s=window_s, hints=tuple(hints),
                       latency=latency_rows(parts.samples, store, now, window_s))
        self._built, self._last = key, snap
        return snap

    def _record_parts(self, store: Store) -> _RecordParts:
        pending_loads, pending_unloads = store.loads.pending()
        loads = _unique([*self.loads, *pending_loads], lambda ld: ld.t_end if ld.t_end is not None else ld.t_begin)
        unloads = _unique([*self.unloads, *pending_unloads], lambda u: u.t)

        def names(model: str | None) -> str | None:
            return store.loads.name(model) if model else None

        engines = [source.engine for source in store.sources]

        def engine_of(src: int) -> str:
            return engines[src] if 0 <= src < len(engines) else ""

        cfg = store.settings
        timeline = build_timeline(loads, unloads, names)
        # The same inputs as `ietop budget`, over the loads the view holds (at most `keep`): no I/O, no host.
        budget_inputs = gather(store, loads, unloads, intervals=timeline)
        base = Snapshot(
            version=store.version,
            now=0.0,  # the window's fields (now, window_s, latency, hints) are filled per call
            window_s=0.0,
            engines=self._engines(store),
            resident=resident_rows(store, loads, unloads),
            latency=(),
            requests=tuple(reversed(self.requests)),
            events=event_rows(loads, unloads, self.simple, names, engine_of=engine_of),
            hints=(),
            timeline=timeline,
            sources=tuple(SourceRow(s.path, s.engine, s.lines, s.unparsed_lines, s.version, s.failed)
                          for s in store.sources),
            configured=dict(cfg.configured),
            effective=dict(cfg.effective),
            counts=dict(store.counts),
            aliases=dict(store.loads.aliases),
            log_gpus=log_gpus(store),
            budget=build(budget_inputs),
            budget_inputs=budget_inputs,
        )
        # By time, for the windows' bisection (samples arrive in apply order, nearly sorted: a cheap sort).
        return _RecordParts(store.version, pending_loads, pending_unloads, sorted(self.samples, key=sample_time), base)

    @staticmethod
    def _engines(store: Store) -> tuple[EngineRow, ...]:
        rows: list[EngineRow] = []
        polled = {st.engine for st in store.engines.values()}
        for st in store.engines.values():
            rows.append(EngineRow(st.engine, st.endpoint, st.state, st.detail,
                                  st.version or _log_version(store, st.engine), st.since if st.state == "up" else None))
        for info in store.sources:
            if info.engine in polled or info.engine == "proxy" or info.failed:
                continue  # a failed source has its own segment in the header (Snapshot.failed_sources)
            name = info.path.replace("\\", "/").rsplit("/", 1)[-1]
            rows.append(EngineRow(info.engine, f"log:{name}", "log", f"{info.lines} lines", info.version, None))
        return tuple(rows)


def _log_version(store: Store, engine: str) -> str | None:
    return next((s.version for s in store.sources if s.engine == engine and s.version), None)


def _unique(items: list[Any], when: Any) -> list[Any]:
    """Records in time order, each once (a record moves from pending to finalized between snapshots)."""
    seen: set[int] = set()
    out = []
    for item in items:
        if id(item) not in seen:
            seen.add(id(item))
            out.append(item)
    out.sort(key=when)
    return out


def log_gpus(store: Store) -> tuple[LogGpu, ...]:
    """Each device the log named, with the newest memory figure it gave: what was free before the latest
    load (`gpu memory`), else what the scheduler left for another model (`updated VRAM…`), else what was
    available at start-up. A device first seen in a memory line (a log that begins after start-up) is
    named by its id."""
    out: list[LogGpu] = []
    seen = store.gpus
    for device in [*seen, *(d for d in store.gpu_memory if d not in seen)]:
        info, mem = seen.get(device), store.gpu_memory.get(device)
        total = human_bytes(info.total if info is not None else None) or human_bytes(mem.total if mem else None)
        left, at = (None, None) if info is None else (human_bytes(info.available), info.ts)
        if mem is not None:
            left, at = human_bytes(mem.free) or human_bytes(mem.available), mem.ts
        if info is None and total is None:
            continue  # `gpu memory` alone gives no size to draw against
        used = None if total is None or left is None else max(0, total - left)
        out.append(LogGpu((info.name if info is not None else None) or device, total, used, at))
    return tuple(out)
