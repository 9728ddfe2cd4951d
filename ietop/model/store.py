"""The store: the single writer that turns events into requests, loads, unloads, truncations, errors,
settings and latency sketches.

Pure: it reads no clock and does no I/O. Events arrive with `t`, a sortable epoch-seconds key (the
event's own time, or for a line with no time the last time seen in that source). Records that can no
longer change are handed to a sink as soon as possible, so memory stays flat however long the log is:
`analyze` spools them to disk, the dashboard keeps the newest in bounded tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import overload

from ietop.model.config import Settings
from ietop.model.counters import ScrapeStore
from ietop.model.engines.mlx import MlxTracker
from ietop.model.engines.vllm import VllmTracker
from ietop.model.facts import RequestFacts
from ietop.model.load_lines import LOAD_LINES, apply_load_line
from ietop.model.loads import LoadTracker
from ietop.model.names import model_name
from ietop.model.proxied import proxied_request
from ietop.model.records import Ref, Request, Simple, is_inference
from ietop.model.sketch import Sketch
from ietop.model.store_records import EngineState, ListSink, Sink, SourceFailed, SourceInfo
from parsers import events as ev
from parsers.api.events import OllamaResidency
from parsers.events.sane import implausible

__all__ = ["EngineState", "ListSink", "Sink", "SourceFailed", "SourceInfo", "SourcePaths", "Store"]

_MLX_EVENTS = (ev.RequestBody, ev.Admission, ev.PrefillProgress, ev.TokenDelta, ev.Usage, ev.GenerationStart)
_TASK_EVENTS = frozenset({ev.PromptTask, ev.Timing, ev.SlotRelease, ev.CacheSlot})
"""Go to the request facts from any source. PrefillProgress is not here: from an MLX log it is MLX's."""


class SourcePaths(Sequence[str]):
    """The paths of a store's sources, by index, as records need them for their `source` field."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...
    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        if isinstance(i, slice):
            return [s.path for s in self._store.sources[i]]
        return self._store.sources[i].path

    def __len__(self) -> int:
        return len(self._store.sources)


class Store:
    """Consumes `(src, t, event)` in time order."""

    def __init__(self, sink: Sink | None = None, include_prompts: bool = False) -> None:
        self._count_ok_probes = False
        """True when the sink keeps no successful probe (`keeps_ok_probes = False`): those are then only counted."""
        self.sink = sink if sink is not None else ListSink()
        self.include_prompts = include_prompts
        self.sources: list[SourceInfo] = []
        self.settings = Settings()
        self.loads = LoadTracker(self.sink)
        self.e2e = Sketch()
        self.ttft = Sketch()
        self.itl = Sketch()
        self.counts: dict[str, int] = {}
        self.version = 0
        self.facts = RequestFacts(self.sink, self.settings)
        self._mlx: dict[int, MlxTracker] = {}
        self._vllm: dict[int, VllmTracker] = {}
        self.engines: dict[str, EngineState] = {}
        self.metrics = ScrapeStore()
        self.residency: dict[str, OllamaResidency] = {}
        """Endpoint → its newest `/api/ps` answer (parsers.api.events.OllamaResidency)."""
        self.gpus: dict[str, ev.GpuInfo] = {}
        self.gpu_refs: dict[str, Ref] = {}
        """Devices the engine's own log reports (replay has no NVML of that host)."""
        self.gpu_memory: dict[str, ev.GpuMemory] = {}
        """Device id → the newest memory figure the scheduler logged for it."""
        self._now = 0.0
        self._implausible_at: dict[int, int] = {}
        """Per source, the last line counted as implausible (a line can give several events)."""

    @property
    def sink(self) -> Sink:
        return self._sink

    @sink.setter
    def sink(self, sink: Sink) -> None:
        self._sink = sink
        # Health checks and management calls (`HEAD /`, `/api/tags`) are most lines of a busy Ollama log;
        # a sink that drops the successful ones (the dashboard's) spares the store building a record each.
        self._count_ok_probes = getattr(sink, "keeps_ok_probes", True) is False

    @property
    def counts_ok_probes(self) -> bool:
        """Whether successful non-inference requests are only counted (a feed may then send AccessCount)."""
        return self._count_ok_probes

    def set_sink(self, sink: Sink) -> None:
        """Route finalized records to `sink` (before any event is applied)."""
        self.sink = sink
        self.loads = LoadTracker(sink)
        self.facts = RequestFacts(sink, self.settings)

    def add_source(self, path: str, engine: str) -> int:
        self.sources.append(SourceInfo(path, engine))
        src = len(self.sources) - 1
        if engine == "mlx":
            self._mlx[src] = MlxTracker(src, self.loads, self._finish_request)
        elif engine == "vllm":
            self._vllm[src] = VllmTracker(src, self.sink, self.settings, self._finish_request)
        return src

    def _count(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def apply(self, src: int, t: float, event: ev.Event) -> None:
        """Apply one event. `t` must not go backwards by more than a few seconds within a source."""
        self.apply_all(((src, t, event),))

    def apply_all(self, items: Iterable[tuple[int, float, ev.Event]]) -> None:
        """Apply (source, time, event) items in order, as `apply` does one: the ingest path's loop, with the
        lookups made once per batch instead of once per event."""
        sources, counts, facts, mlx_trackers = self.sources, self.counts, self.facts, self._mlx
        advance = self.loads.advance
        for src, t, event in items:
            self.version += 1
            if implausible(event) is not None:
                # A number no engine writes (400 digits, an overflow to inf): the line is not believed; counted
                # once however many of its events carry such a number.
                if self._implausible_at.get(src) != event.line:
                    self._implausible_at[src] = event.line
                    sources[src].unparsed_lines += 1
                    counts["implausible_lines"] = counts.get("implausible_lines", 0) + 1
                continue
            if t > self._now:
                self._now = t
            # The commonest events first, by exact type (no event class is subclassed): a few identity tests
            # instead of twenty isinstance() calls down the chain of _apply_other.
            if type(event) is ev.HttpAccess:
                self._request(src, t, event, sources[src].engine)
            elif type(event) in _TASK_EVENTS:
                facts.task_event(src, t, event, Ref(src, event.line))
            elif type(event) is ev.AccessCount:
                counts["requests"] = counts.get("requests", 0) + event.count
            elif type(event) is ev.Unparsed:
                sources[src].unparsed_lines += 1
            else:
                self._apply_other(src, t, event)
            advance(t)
            if mlx_trackers:
                for mlx in mlx_trackers.values():
                    mlx.advance(t)

    def _apply_other(self, src: int, t: float, event: ev.Event) -> None:
        ref = Ref(src, event.line)
        engine = self.sources[src].engine
        ts = event.ts
        s = self.settings
        loads = self.loads
        # The per-request scheduler lines first (most of what reaches here); the event types are disjoint,
        # so the order of the branches is only a matter of speed.
        if isinstance(event, ev.RequestArrival):
            if event.model:
                self.facts.arrival(src, t, model_name(event.model) or event.model)
        elif isinstance(event, ev.IdleTimer):
            if event.blob and event.model:
                loads.learn_alias(model_name(event.blob) or "", model_name(event.model) or "")
            if event.model:
                loads.idle(model_name(event.model) or "", t, event.duration_s, event.size_bytes, event.vram_bytes,
                           ref)
            s.observe("keep_alive", event.duration, ref)
            s.observe("runner_num_ctx", event.num_ctx, ref)
        elif isinstance(event, ev.Truncation):
            self._count("truncations")
            self.facts.truncation(src, t, event, ref)
        elif isinstance(event, LOAD_LINES):
            apply_load_line(loads, s, src, t, ref, engine, event)
        elif isinstance(event, ev.LoadDone):
            loads.done(src, t, ts, ref, engine, event.duration_s)
            self._count("loads_ok")
        elif isinstance(event, ev.RunnersLoaded):
            s.observe("loaded_models", event.count, ref)
        elif isinstance(event, ev.ContextSize):
            self._context(src, event, ref)
        elif isinstance(event, ev.Eviction):
            loads.prelude(src, t, ts, ref)
            loads.unload(src, t, ts, ref, engine, event.reason, model_name(event.model), event.num_ctx)
            if event.model and event.blob:
                loads.learn_alias(model_name(event.blob) or "", model_name(event.model) or "")
            if event.model and event.size_bytes:
                loads.runner_sizes[loads.name(model_name(event.model) or "")] = (event.size_bytes, ref)
        elif isinstance(event, ev.UnloadStep):
            self._unload_step(src, t, event, ref, engine)
        elif src in self._mlx and isinstance(event, _MLX_EVENTS):
            self._mlx_event(src, t, event, ref)
        elif isinstance(event, ev.PrefillProgress):  # from a llama.cpp log; the other task events: apply()
            self.facts.task_event(src, t, event, ref)
        elif isinstance(event, ev.ErrorEvent):
            self._error(src, t, event, ref, engine)
        elif isinstance(event, ev.ServerStop):
            loads.server_gone(src, t, ts, ref, engine)
            if (tracker := self._vllm.get(src)) is not None:
                tracker.server(started=False)
        elif isinstance(event, ev.ServerStart):
            if engine == "ollama":
                # Ollama listens before it loads anything: what is resident came from a server before this one.
                loads.server_gone(src, t, ts, ref, engine)
            if (tracker := self._vllm.get(src)) is not None:
                tracker.server(started=True)  # every request from here on is in the log
            info = self.sources[src]
            info.version = event.version or info.version
            s.observe("listen", event.listen, ref)
            s.observe("version", event.version, ref)
        elif isinstance(event, ev.ServerConfig):
            s.claim_env(event.settings, ref)
        elif isinstance(event, ev.DefaultContext):
            s.claim("default_context_length", event.ctx, ref)
        elif isinstance(event, ev.GpuInfo):
            self._count("gpus")
            self.gpus[event.device_id] = event
            self.gpu_refs[event.device_id] = ref
        elif isinstance(event, ev.GpuMemory):
            self.gpu_memory[event.device_id] = event
        elif isinstance(event, ev.ProxyRequest):
            self._proxy_request(t, event, ref)
        elif isinstance(event, ev.Scrape):
            self.metrics.add(event)
        elif isinstance(event, ev.EngineStats) and src in self._vllm:
            self._vllm[src].stats(t, event, ref)
        elif isinstance(event, ev.StartupFact) and src in self._vllm:
            self._vllm[src].startup(event, ref)
        elif isinstance(event, ev.RequestLogged) and src in self._vllm:
            self._vllm[src].request_logged(t, event, ref)
        elif isinstance(event, ev.Preemption) and src in self._vllm:
            self._count("preemptions")
            self._vllm[src].preemption(t, event, ref)
        elif isinstance(event, ev.PromptText):
            # Prompt text is private: it leaves the store only when the user asked for it.
            self._count("prompt_text_lines")
            if self.include_prompts:
                self.sink("prompt", Simple("prompt", {"time": _iso(ts), "text": event.text}, ref))
        elif isinstance(event, SourceFailed):
            self._source_failed(src, t, event, ref)

    def _mlx_event(self, src: int, t: float, event: ev.Event, ref: Ref) -> None:
        mlx = self._mlx[src]
        if isinstance(event, ev.RequestBody):
            mlx.body(t, event, ref)
        elif isinstance(event, ev.Admission):
            mlx.admission(t, event, ref)
            self.settings.observe("prompt_cache_sequences", event.sequences, ref)
        elif isinstance(event, ev.PrefillProgress):
            mlx.progress(t, event, ref)
        elif isinstance(event, ev.TokenDelta):
            mlx.token(t, ref)
        elif isinstance(event, ev.Usage):
            mlx.usage(t, event, ref)

    def apply_poll(self, t: float, event: ev.EngineStatus | ev.ModelList | ev.Scrape | OllamaResidency) -> None:
        """An answer from polling an engine endpoint (not tied to a log source)."""
        self.version += 1
        if isinstance(event, OllamaResidency):
            self.residency[event.endpoint] = event
        elif isinstance(event, ev.Scrape):
            self.metrics.add(event)
        elif isinstance(event, ev.EngineStatus):
            self._engine_status(t, event)
        else:
            st = self.engines.setdefault(event.endpoint, EngineState(event.engine, event.endpoint))
            st.models = event.models
            st.context = event.max_model_len if implausible(event) is None else None

    def process_sample(self, src: int, t: float, rss_bytes: int | None, alive: bool) -> None:
        """A sample of the engine process behind a log source (live mode: ietop.sources.host)."""
        self.version += 1
        mlx = self._mlx.get(src)
        if mlx is not None and rss_bytes is not None and alive:
            mlx.rss(t, rss_bytes)

    def _engine_status(self, t: float, event: ev.EngineStatus) -> None:
        st = self.engines.setdefault(event.endpoint, EngineState(event.engine, event.endpoint))
        state, detail = event.state, event.detail
        if state == "up" and any(m.state == "dead" for m in self._mlx.values()):
            # The zombie: mlx_lm.server's generation thread died, /health still says ok (≤ 0.32.0).
            state, detail = "dead", "generation thread died (log); /health still answers"
        if state == "up" and detail.startswith("version "):
            st.version = detail[len("version "):]  # kept: the next poll of another path replaces the detail
        if state != st.state:
            st.since = t
            if event.engine == "mlx":
                self._mlx_reachable(t, event, state, detail)
        st.state, st.detail = state, detail

    def _mlx_reachable(self, t: float, event: ev.EngineStatus, state: str, detail: str) -> None:
        """A refused `/health` is a stopped server: what it held is gone (a timeout may be a busy one). Which log
        is that server's is known only while one MLX endpoint is watched."""
        if sum(1 for e in self.engines.values() if e.engine == "mlx") != 1:
            return
        for src, mlx in self._mlx.items():
            if state == "down" and detail == "refused" and mlx.state != "down":
                mlx.server_down(t)
                self.loads.server_gone(src, t, event.ts, Ref(src, 0), "mlx")
            elif state == "up" and mlx.state == "down":
                mlx.server_up()

    # -- requests ------------------------------------------------------------------------------
    def _request(self, src: int, t: float, event: ev.HttpAccess, engine: str) -> None:
        inference = is_inference(event.method, event.path)
        if self._count_ok_probes and not inference and event.status < 400 and src not in self._mlx:
            self._count("requests")
            return
        latency = event.latency_s
        req = Request(
            event.ts, t, t - (latency or 0.0), engine, event.method, event.path, event.status,
            event.client, latency, Ref(src, event.line), inference=inference,
        )
        mlx = self._mlx.get(src)
        if mlx is not None:
            mlx.access(req)  # finished later, when its facts are in (see ietop.model.engines.mlx)
            return
        vllm_tracker = self._vllm.get(src)
        if req.inference:
            if vllm_tracker is None:
                self.facts.enrich(src, req)
            arrived = self.facts.model_for(src, req)
            if arrived is not None and req.model is None:
                req.model = self.loads.name(arrived)
            elif req.model is None and req.status < 400 and (vllm := self._vllm.get(src)) is not None:
                # vLLM's access line names no model; a request it served went to the one model it serves
                # (an unknown name is answered 404), under the name clients use.
                served = vllm.startup_facts.get("served_model")
                req.model = str(served) if served is not None else None
            self.loads.attribute(req)
        if vllm_tracker is not None:
            vllm_tracker.access(req)  # finished in order, once the log shows whose logged request it answers
            return
        self._finish_request(req)

    def _proxy_request(self, t: float, e: ev.ProxyRequest, ref: Ref) -> None:
        req, error = proxied_request(t, e, ref)
        if error is not None:
            self.sink("error", error)
        self._finish_request(req)

    def _finish_request(self, req: Request) -> None:
        counts = self.counts  # _count() inline: once or twice per request
        if req.inference:
            counts["inference_requests"] = counts.get("inference_requests", 0) + 1
            if req.latency_s is not None and req.status < 400:
                self.e2e.add(req.latency_s)
            if req.ttft_s is not None:
                self.ttft.add(req.ttft_s)
            if req.itl_s is not None:
                self.itl.add(req.itl_s)
        counts["requests"] = counts.get("requests", 0) + 1
        self.sink("request", req)

    # -- the rest ------------------------------------------------------------------------------
    def _context(self, src: int, event: ev.ContextSize, ref: Ref) -> None:
        name = {"total": "ctx_total", "per_slot": "ctx_per_slot", "train": "n_ctx_train"}.get(event.kind)
        if name is None:
            return
        self.settings.observe(name, event.ctx, ref)
        load = self.loads.current(src)
        if load is not None and event.kind == "total" and load.ctx is None:
            load.ctx = event.ctx

    def _unload_step(self, src: int, t: float, event: ev.UnloadStep, ref: Ref, engine: str) -> None:
        model = model_name(event.model)
        if event.stage == "expire":
            self.loads.unload(src, t, event.ts, ref, engine, "expired", model, event.num_ctx)
        elif event.stage == "switch":
            self.loads.unload(src, t, event.ts, ref, engine, "switched", model)
        else:
            u = self.loads.unload(src, t, event.ts, ref, engine, "unknown", model, event.num_ctx, attach_only=True)
            if u is not None and event.seconds is not None:
                u.vram_wait_s.append(event.seconds)

    def _error(self, src: int, t: float, event: ev.ErrorEvent, ref: Ref, engine: str) -> None:
        self._count("errors")
        self.sink("error", Simple("error", {"time": _iso(event.ts), "kind": event.kind, "message": event.message},
                                  ref, t))
        mlx = self._mlx.get(src)
        if mlx is not None:
            if event.kind in ("engine_dead", "oom"):
                mlx.engine_dead(t)
                self.loads.unload(src, t, event.ts, ref, engine, "crashed", mlx.resident)
            return
        if event.kind in ("load_failed", "client_abort", "oom", "runner_crash"):
            # These lines say outright that a load failed; an OOM or a crash may happen at any time.
            certain = event.kind in ("load_failed", "client_abort") and "loading" in event.message
            was_loading = self.loads.failed(src, t, event.ts, ref, engine, certain)
            if event.kind == "runner_crash" and not was_loading and self.loads.resident:
                self.loads.unload(src, t, event.ts, ref, engine, "crashed")

    def _source_failed(self, src: int, t: float, event: SourceFailed, ref: Ref) -> None:
        info = self.sources[src]
        info.failed = event.reason
        self._count("errors")
        message = f"{info.path} failed ({event.reason})" + (f": {event.detail}" if event.detail else "")
        self.sink("error", Simple("error", {"time": _iso(event.ts), "kind": "source_failed", "message": message},
                                  ref, t))

    @property
    def events_total(self) -> int:
        """Loads ended, unloads begun, truncations and errors so far: grows by one when the Events panel gets
        a row (what a replay's jump runs to)."""
        c = self.counts
        return self.loads.loads_total + self.loads.unloads_total + c.get("truncations", 0) + c.get("errors", 0)

    def vllm_startup(self, src: int | None = None) -> dict[str, float | str]:
        """The start-up facts of vLLM log `src`; with None, those of the only vLLM log ({} with several)."""
        if src is None:
            return dict(next(iter(self._vllm.values())).startup_facts) if len(self._vllm) == 1 else {}
        tracker = self._vllm.get(src)
        return dict(tracker.startup_facts) if tracker is not None else {}

    def engine_trackers(self) -> tuple[dict[int, VllmTracker], dict[int, MlxTracker]]:
        """The vLLM and MLX logs' own state by source (the budget reads their memory figures)."""
        return self._vllm, self._mlx

    def mlx_processes(self) -> list[tuple[int, str, str | None]]:
        """(source, resident model, state) of each MLX log: one model per mlx_lm.server process."""
        return [(src, m.resident, m.state) for src, m in self._mlx.items()]

    @property
    def now(self) -> float:
        """The newest event time applied (the replay's clock)."""
        return self._now

    def flush(self) -> None:
        """End of input: finalize everything still open."""
        for mlx in self._mlx.values():
            mlx.flush()
        for vllm_tracker in self._vllm.values():
            vllm_tracker.flush()
        self.facts.flush()
        self.loads.flush()


def _iso(ts: datetime | None) -> str | None:
    return ts.isoformat() if ts is not None else None
