"""The lines of a load episode that say how it is laid out (the scheduler's decision, the runner's launch and
load request, the layers offloaded, the memory it takes): applied to the load in progress and to the settings
in effect. Split from the store's dispatch, which stays one screen long."""

from __future__ import annotations

from ietop.model.config import Settings
from ietop.model.loads import LoadTracker
from ietop.model.names import model_name
from ietop.model.records import Ref
from parsers import events as ev
from parsers.ollama.messages import human_bytes

LOAD_LINES = (ev.LoadDecision, ev.LoadStart, ev.LoadRequest, ev.Offload, ev.LoadMemory)


def apply_load_line(loads: LoadTracker, s: Settings, src: int, t: float, ref: Ref, engine: str,
                    event: ev.LoadDecision | ev.LoadStart | ev.LoadRequest | ev.Offload | ev.LoadMemory) -> None:
    ts = event.ts
    if isinstance(event, ev.LoadDecision):
        if event.co_resident:
            loads.prelude(src, t, ts, ref)
        else:
            load = loads.open(src, t, ts, ref, engine)
            loads.set_model(src, load, model_name(event.model))
            load.parallel = event.parallel or load.parallel
            load.required = event.required
            if (required := human_bytes(event.required)) is not None:
                # The scheduler's `required=` is the load's whole footprint as it planned it.
                loads.memory(src, t, ts, ref, engine, ev.LoadMemory(event.line, ts, "total", required, None, True))
            load.available = event.available
            s.observe("parallel", event.parallel, ref)
    elif isinstance(event, ev.LoadStart):
        load = loads.started(src, t, ts, ref, engine)
        load.runner = event.runner
        loads.set_model(src, load, model_name(event.model))
        load.ctx = event.ctx_total
        load.parallel = event.parallel or load.parallel
        load.gpu_layers = event.gpu_layers
        s.observe("ctx_total", event.ctx_total, ref)
        s.observe("parallel", event.parallel, ref)
        if event.ctx_total and event.parallel:
            s.observe("ctx_per_slot", event.ctx_total // event.parallel, ref)
    elif isinstance(event, ev.LoadRequest):
        load = loads.open(src, t, ts, ref, engine)
        load.parallel = event.parallel
        load.kv_size = event.kv_size
        load.ctx = event.kv_size
        s.observe("parallel", event.parallel, ref)
        s.observe("ctx_total", event.kv_size, ref)
        s.observe("kv_cache_type", event.kv_cache_type, ref)
        s.observe("batch_size", event.batch_size, ref)
        s.observe("load_request_op", event.op, ref)
        if event.kv_size and event.parallel:
            s.observe("ctx_per_slot", event.kv_size // event.parallel, ref)
    elif isinstance(event, ev.Offload):
        # The estimate line comes before the launch (E2/E3), llama.cpp's own line during the load.
        loads.open(src, t, ts, ref, engine).offload = (event.offloaded, event.total)
        s.observe("gpu_layers", f"{event.offloaded}/{event.total}" if event.total else event.offloaded, ref)
    elif isinstance(event, ev.LoadMemory):
        loads.memory(src, t, ts, ref, engine, event)
