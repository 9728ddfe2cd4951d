"""Load episodes, unloads and residency, and the join of loads with the requests that waited for them.

The joins follow reference/ollama-summary.md ("Load ↔ request"): a load episode runs from its first line
(a fit decision, an eviction, `updated VRAM…` or the runner launch) to its completion or failure. An
access line arrives only when its request finishes, so a request is matched against the loads that
completed (or failed) inside its lifetime [t_end − latency, t_end]: it waited for that load (`cold_load`).
The one that arrived closest to the start of the episode is the load's trigger; the others queued
behind it. Access lines have one-second resolution, hence the tolerance.

Unloads are assembled from several lines (an INFO eviction decision, DEBUG victim lines, the stop/
unloaded steps, the WARN that VRAM did not recover) that describe one unload; lines within a short
window are folded into one record.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from datetime import datetime

from ietop.model.load_index import RecentLoads
from ietop.model.records import Load, Ref, Request, Unload
from parsers.events import LoadMemory

TOL_S = 1.0
"""Access-line timestamps have one-second resolution."""
PRELUDE_S = 30.0
"""A decision or eviction line opens an episode only if a launch follows within this many seconds."""
MEMORY_AFTER_S = 5.0
"""A memory line this soon after a load of the same log finished still describes that load."""
UNLOAD_FOLD_S = 15.0
"""Lines of one unload (decision, victim, stop, VRAM wait ~5 s later) fall inside this window."""
ATTRIBUTION_HORIZON_S = 4 * 3600.0
"""How long a finished load waits for the access lines of the requests that waited for it."""
MAX_RECENT = 256
MAX_MADE_ROOM = 16
"""Evictions kept per log until a load completes (a log of evictions and no successful load stays bounded)."""

Emit = Callable[[str, object], None]


class LoadTracker:
    """Per-store tracker of load episodes, unloads and resident models."""

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self._open: dict[int, Load] = {}
        self._prelude: dict[int, tuple[float, datetime | None, Ref]] = {}
        self._recent = RecentLoads(TOL_S)
        """Finished loads still joinable, oldest first, indexed by end time for `attribute`."""
        self._unloads: deque[Unload] = deque()
        self._awaiting_for_model: dict[int, list[Unload]] = {}
        self.resident: dict[str, float] = {}
        self._resident_src: dict[str, int] = {}
        """Resident model → the log whose server loaded it (what goes when that server stops)."""
        self.aliases: dict[str, str] = {}
        """Short blob name → model name, learned from DEBUG lines that give both."""
        self.loads_total = 0
        self.unloads_total = 0
        self.runners: dict[str, tuple[int | None, int | None, float | None]] = {}
        """Model name → (size, vram, keep-alive expiry t) from the scheduler's DEBUG idle lines."""
        self._kv_caches: dict[int, int] = {}
        """Per log, the KV summaries llama.cpp printed since its last weights summary."""
        self.runner_sizes: dict[str, tuple[int, Ref]] = {}
        """Model name → its last `runner.size` and the line (kept after an unload: the budget cites it)."""
        self._made_room: dict[int, list[Unload]] = {}
        """Per log, the evictions since its last successful load: what the load that completes made room with."""
        self._attempt: dict[int, Load] = {}
        """Per log, the last load that failed or was abandoned since its last successful one (a retry repeats it)."""

    # -- load episodes -------------------------------------------------------------------------
    def prelude(self, src: int, t: float, ts: datetime | None, ref: Ref) -> None:
        """A line that usually precedes a launch (eviction, `updated VRAM…`)."""
        if src not in self._open and src not in self._prelude:
            self._prelude[src] = (t, ts, ref)

    def open(self, src: int, t: float, ts: datetime | None, ref: Ref, engine: str) -> Load:
        """The load in progress for this source, opened now if there is none."""
        load = self._open.get(src)
        if load is not None:
            return load
        begin = self._prelude.pop(src, None)
        if begin is not None and t - begin[0] <= PRELUDE_S:
            load = Load(begin[1], begin[0], engine, begin[2])
        else:
            load = Load(ts, t, engine, ref)
        self._open[src] = load
        return load

    def current(self, src: int) -> Load | None:
        return self._open.get(src)

    def started(self, src: int, t: float, ts: datetime | None, ref: Ref, engine: str) -> Load:
        """A runner launch line: a new episode unless the open one has not launched yet."""
        load = self._open.get(src)
        if load is not None and load.t_start is not None:
            self._close(src, "incomplete", t, None)
            load = None
        load = self.open(src, t, ts, ref, engine)
        load.t_start = t
        return load

    def done(self, src: int, t: float, ts: datetime | None, ref: Ref, engine: str, duration: float) -> None:
        load = self._open.get(src)
        if load is None:
            load = Load(ts, t - duration, engine, ref)
            self._open[src] = load
        load.duration_s = duration
        load.done_ref = ref
        self._close(src, "ok", t, ref)

    def failed(self, src: int, t: float, ts: datetime | None, ref: Ref, engine: str, certain: bool) -> bool:
        """A load error: closes the open episode as failed. When the log holds no start of that load
        (an excerpt, or a line that only says the load failed) and `certain`, record a failed load whose
        beginning is unknown. False when no load was in progress."""
        if src not in self._open:
            if not certain:
                return False
            last = self._recent[-1] if self._recent else None
            if last is not None and last.status == "failed" and last.t_end is not None and t - last.t_end <= 2.0:
                return True  # the WARN and the ERROR of one failed load
            load = Load(ts, t, engine, ref, begin_known=False)
            self._open[src] = load
        self._close(src, "failed", t, None)
        return True

    def _close(self, src: int, status: str, t: float, ref: Ref | None) -> None:
        load = self._open.pop(src)
        load.status = status
        load.t_end = t
        if load.duration_s is None and status != "incomplete" and load.begin_known:
            load.duration_s = round(t - (load.t_start if load.t_start is not None else load.t_begin), 3)
        self.loads_total += 1
        if status == "ok" and load.model is not None:
            self.resident[load.model] = t
            self._resident_src[load.model] = load.ref.src
        for unload in self._awaiting_for_model.pop(src, []):
            unload.for_model = load.model
        self._link(src, load)
        self._recent.append(load)
        while len(self._recent) > MAX_RECENT:
            self._emit("load", self._recent.popleft())

    def _link(self, src: int, load: Load) -> None:
        """Tie a finished load to the evictions made for its model and to the failed attempt it repeated: a
        request's cold-start story reads them (ietop.model.breakdown). Only a successful load ends the run of
        evictions: an aborted load's evictions are also its retry's."""
        ok = load.status == "ok"
        made = self._made_room.pop(src, []) if ok else self._made_room.get(src, [])
        name = self.name(load.model) if load.model is not None else None
        if name is not None:
            load.evicted = [u for u in made if u.for_model is not None and self.name(u.for_model) == name]
        prior = self._attempt.pop(src, None) if ok else self._attempt.get(src)
        if prior is not None and prior is not load and name is not None and prior.model is not None \
                and self.name(prior.model) == name:
            load.retry_of = prior
        if not ok:
            self._attempt[src] = load

    def record(self, load: Load) -> None:
        """A load whose whole episode another tracker assembled (MLX switches): keep it for joins."""
        self.loads_total += 1
        if load.status == "ok" and load.model is not None and load.t_end is not None:
            self.resident[load.model] = load.t_end
            self._resident_src[load.model] = load.ref.src
        self._link(load.ref.src, load)
        self._recent.append(load)
        while len(self._recent) > MAX_RECENT:
            self._emit("load", self._recent.popleft())

    def last_load_of(self, src: int) -> Load | None:
        for load in reversed(self._recent):
            if load.ref.src == src:
                return load
        return None

    def set_for_model(self, src: int, model: str | None) -> None:
        """Name the model that the unloads awaiting one were made room for."""
        for unload in self._awaiting_for_model.pop(src, []):
            unload.for_model = model

    def set_model(self, src: int, load: Load, model: str | None) -> None:
        if model is None:
            return
        if _short(model) in self.aliases:
            model = self.aliases[_short(model)]
        load.model = model
        for unload in self._awaiting_for_model.get(src, []):
            unload.for_model = model

    # -- the request join ----------------------------------------------------------------------
    def attribute(self, req: Request) -> None:
        """Mark a finished request that waited for a load, and offer it as that load's trigger."""
        if not req.inference:
            return
        # The index yields the loads of this engine that ended within the request's lifetime (or all the recent
        # loads, when they are few), in the order they were recorded: the trigger/waiters updates and the last
        # load's load_s depend on it. The condition below is what decides, so a superset is harmless.
        engine, t_start, t_end = req.engine, req.t_start, req.t_end
        for load in self._recent.ending_within(engine, t_start, t_end):
            end = load.t_end
            if end is None or load.engine != engine or not (t_start <= end + TOL_S and t_end + TOL_S >= end):
                continue
            begin = load.t_begin if load.begin_known else t_start
            if t_start < begin - 2 * TOL_S:
                continue  # was running before the episode began: another model's request
            gap = abs(t_start - begin)
            waited = max(0.0, end - max(t_start, begin))
            if load.status == "ok":
                req.cold_load = True
                req.load_s = round(waited, 3)
                req.cite("load_s", load.done_ref or load.ref)
                req.waited_for = load
                if req.model is None:
                    req.model = load.model
            elif req.status >= 400 and (req.waited_for is None or not req.waited_for.ok):
                self._gave_up(req, load)
            if gap < load.trigger_gap and t_start <= begin + TOL_S:
                if load.trigger is not None:
                    load.waiters += 1
                load.trigger = req
                load.trigger_gap = gap
                if load.status == "ok":
                    req.load_s = load.duration_s if load.duration_s is not None else req.load_s
            else:
                load.waiters += 1
        for load in self._open.values():
            # Ended while its load was still running: an abort (499) or a failure during the load.
            aborted = load.engine == req.engine and req.t_start <= load.t_begin + TOL_S and req.status >= 400
            if aborted and load.trigger is None:
                load.trigger = req
                load.trigger_gap = abs(req.t_start - load.t_begin)
            if aborted and req.waited_for is None:
                self._gave_up(req, load)

    @staticmethod
    def _gave_up(req: Request, load: Load) -> None:
        """A request that ended in an error while a load ran (a client that gave up: 499) waited for that load
        and learns its model; it stays no `cold_load` (it never got the loaded model)."""
        req.waited_for = load
        if req.model is None:
            req.model = load.model

    # -- unloads -------------------------------------------------------------------------------
    def unload(
        self,
        src: int,
        t: float,
        ts: datetime | None,
        ref: Ref,
        engine: str,
        reason: str,
        model: str | None = None,
        num_ctx: int | None = None,
        attach_only: bool = False,
        fold: bool = True,
    ) -> Unload | None:
        """Fold a line into the unload it belongs to, or start a new unload record (`fold=False`: the
        caller knows this line is a whole unload of its own)."""
        for u in reversed(self._unloads if fold else ()):
            if t - u.t > UNLOAD_FOLD_S:
                break
            if u.engine != engine or (model and u.model and self.name(model) != self.name(u.model)):
                continue
            if reason in (u.reason, "unknown") or u.reason == "unknown":
                if u.reason == "unknown":
                    u.reason = reason
                u.model = u.model or model
                u.num_ctx = u.num_ctx or num_ctx
                u.evidence.append(ref)
                if model is not None:
                    # The decision line names no model (`max runners achieved…`, `…evicting`); the victim line
                    # folded into it does. With several resident, only now is it known which one went.
                    self._drop_resident(model, t)
                return u
        if attach_only:
            reason = "unknown"
        u = Unload(ts, t, engine, reason, ref, model, None, num_ctx, [], [ref])
        self._unloads.append(u)
        self.unloads_total += 1
        if reason in ("evicted", "switched"):
            made = self._made_room.setdefault(src, [])
            made.append(u)
            del made[:-MAX_MADE_ROOM]
            load = self._open.get(src)
            if load is not None and load.model is not None:
                u.for_model = load.model
            else:
                self._awaiting_for_model.setdefault(src, []).append(u)
        self._drop_resident(model, t)
        return u

    def _drop_resident(self, model: str | None, t: float) -> None:
        if model is not None:
            self.runners.pop(self.name(model), None)
            for key in list(self.resident):
                if self.name(key) == self.name(model):
                    del self.resident[key]
                    self._resident_src.pop(key, None)
        elif len(self.resident) == 1:
            self.resident.clear()
            self._resident_src.clear()

    def server_gone(self, src: int, t: float, ts: datetime | None, ref: Ref, engine: str) -> None:
        """The server of log `src` stopped (or another one started in its place): each model it had loaded
        is unloaded there, by a record of its own (`unknown` reason: the contract has no word for it)."""
        for model in [m for m, s in self._resident_src.items() if s == src and m in self.resident]:
            u = self.unload(src, t, ts, ref, engine, "unknown", model, fold=False)
            if u is not None:
                u.server_stopped = True

    def advance(self, t: float) -> None:
        """Finalize what can no longer change: old unloads and loads past the attribution horizon."""
        while self._unloads and t - self._unloads[0].t > UNLOAD_FOLD_S * 4:
            self._emit("unload", self._unloads.popleft())
        while self._recent and self._recent[0].t_end is not None and t - self._recent[0].t_end > ATTRIBUTION_HORIZON_S:
            self._emit("load", self._recent.popleft())

    def name(self, model: str) -> str:
        """The model's name: a blob (`sha256-…`) is named once a DEBUG line has given both."""
        short = _short(model)
        return self.aliases.get(short, short)

    def learn_alias(self, blob: str, name: str) -> None:
        """A line named the model behind a blob: rename what is still open or resident under the blob."""
        if not blob or not name or self.aliases.get(blob) == name:
            return
        self.aliases[blob] = name
        for key in [k for k in self.resident if _short(k) == blob]:
            self.resident[name] = self.resident.pop(key)
            if key in self._resident_src:
                self._resident_src[name] = self._resident_src.pop(key)
        for load in [*self._open.values(), *self._recent]:
            if load.model is not None and _short(load.model) == blob:
                load.model = name
        for u in self._unloads:
            if u.model is not None and _short(u.model) == blob:
                u.model = name
            if u.for_model is not None and _short(u.for_model) == blob:
                u.for_model = name

    def idle(self, model: str, t: float, duration_s: float | None, size: int | None, vram: int | None,
             ref: Ref | None = None) -> None:
        """A runner went idle and its keep-alive timer was armed: it expires `duration_s` from now."""
        expires = t + duration_s if duration_s is not None and duration_s > 0 else None
        name = self.name(model)
        self.runners[name] = (size, vram, expires)
        if size is not None and ref is not None:
            self.runner_sizes[name] = (size, ref)

    def memory(self, src: int, t: float, ts: datetime | None, ref: Ref, engine: str, event: LoadMemory) -> None:
        """A line of what a load takes in memory: the load in progress, else the one this log finished moments
        ago (a runner may print its buffers as the load completes), else the start of a new episode."""
        load = self._open.get(src)
        if load is None:
            last = next((ld for ld in reversed(self._recent) if ld.ref.src == src), None)
            if last is not None and last.t_end is not None and 0 <= t - last.t_end <= MEMORY_AFTER_S:
                load = last
        if load is None:
            load = self.open(src, t, ts, ref, engine)
        if load.memory is None:
            load.memory = {}
        device = event.device or ""
        if not event.device and not event.planned:
            # llama.cpp prints one KV summary per cache (two for an iswa or hybrid model: they add up) after the
            # weights summary; a `--fit` probe prints the same set before the real load, which replaces it.
            if event.part == "weights":
                self._kv_caches[src] = 0
            elif event.part == "kv":
                self._kv_caches[src] = self._kv_caches.get(src, 0) + 1
                device = f"cache {self._kv_caches[src]}"
        load.memory[(event.part, device)] = (event.size_bytes, ref, event.planned)

    def pending(self) -> tuple[list[Load], list[Unload]]:
        """Loads and unloads not yet handed to the sink (still joinable): the dashboard shows them live."""
        return [*self._recent, *self._open.values()], list(self._unloads)

    def flush(self) -> None:
        for src in list(self._open):
            load = self._open[src]
            self._close(src, "incomplete", load.t_start if load.t_start is not None else load.t_begin, None)
        while self._recent:
            self._emit("load", self._recent.popleft())
        while self._unloads:
            self._emit("unload", self._unloads.popleft())


def _short(model: str) -> str:
    """Blob paths and names compare by their last path element (`sha256-…`, `gemma3:1b`)."""
    return model.replace("\\", "/").rsplit("/", 1)[-1]
