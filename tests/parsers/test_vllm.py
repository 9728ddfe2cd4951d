"""One literal case per vLLM log line shape, the multi-line state (tracebacks, loads, the clock), and
totality.

Lines marked (run) are from our own vLLM 0.32.0 run (fixtures/vllm/real-*), (NNN) from the public samples
(fixtures/vllm/SAMPLES-INDEX.md), (ref) were written from the message templates of
reference/vllm-formats.md and are synthetic.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import events as ev
from parsers.vllm.log import VllmParser

T0 = datetime(2026, 11, 29, 15, 51, 55)


def rec(msg: str, level: str = "INFO", stamp: str = "11-29 15:51:55", where: str = "[loggers.py:335]",
        proc: str = "(APIServer pid=21423) ") -> str:
    return f"{proc}{level} {stamp} {where} {msg}"


def feed(lines: list[str], parser: VllmParser | None = None, flush: bool = True,
         env_ts: datetime | None = None) -> list[ev.Event]:
    p = parser if parser is not None else VllmParser(year=2026)
    out: list[ev.Event] = []
    for n, text in enumerate(lines, 1):
        out.extend(p.parse(n, text, env_ts))
    if flush:
        out.extend(p.flush())
    return out


def only(events: list[ev.Event], kind: type[ev.Event]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


STATS_032 = ("Engine 000: Avg prompt throughput: 124.9 tokens/s, Avg generation throughput: 49.1 tokens/s, "
             "Running: 0 reqs, Waiting: 0 reqs, CPU KV cache usage: 0.0%, Prefix cache hit rate: 15.3%")
V0_STATS = ("Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 41.7 tokens/s, Running: 1 reqs, "
            "Swapped: 0 reqs, Pending: 4 reqs, GPU KV cache usage: 2.0%, CPU KV cache usage: 0.5%.")
SAMPLING = ("SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, temperature=0.0, "
            "top_p=1.0, top_k=0, min_p=0.0, seed=None, stop=[], stop_token_ids=[], max_tokens=16, min_tokens=0, "
            "logprobs=None)")

# (id, line, expected type or None for no event at all, expected attributes of the single event).
CASES: list[tuple[str, str, type[ev.Event] | None, dict[str, Any]]] = [
    ("stats 0.32 (run)", rec(STATS_032), ev.EngineStats,
     {"ts": datetime(2026, 11, 29, 15, 51, 55), "engine": "0", "prompt_tps": 124.9, "gen_tps": 49.1, "running": 0,
      "waiting": 0, "swapped": None, "kv_usage": 0.0, "prefix_hit_rate": 0.153, "extra": ()}),
    ("stats V1 no hit rate yet (ref)", rec("Engine 001: Avg prompt throughput: 0.0 tokens/s, Avg generation "
                                           "throughput: 4.2 tokens/s, Running: 0 reqs, Waiting: 0 reqs, "
                                           "XPU KV cache usage: 12.5%"), ev.EngineStats,
     {"engine": "1", "gen_tps": 4.2, "kv_usage": 0.125, "prefix_hit_rate": None}),
    ("stats V1 optional segments (ref)", rec(
        "Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 20.0 tokens/s, Running: 3 reqs, "
        "Waiting: 5 reqs, Deferred: 2 reqs, KV fetch: 1 waiting to start, 2 in progress, 0 completed waiting, "
        "Preemptions: 4, GPU KV cache usage: 91.5%, Prefix cache hit rate: 1.0%, Corrupted: 0 reqs, "
        "External prefix cache hit rate: 50.0%, MM cache hit rate: 25.5%, Widgets: 7 things"), ev.EngineStats,
     {"running": 3, "waiting": 5, "kv_usage": 0.915, "prefix_hit_rate": 0.01,
      "extra": (("deferred", 2.0), ("kv_fetch_waiting_to_start", 1.0), ("kv_fetch_in_progress", 2.0),
                ("kv_fetch_completed_waiting", 0.0), ("preemptions", 4.0), ("corrupted", 0.0),
                ("external_prefix_cache_hit_rate", 0.5), ("mm_cache_hit_rate", 0.255), ("widgets", 7.0))}),
    ("stats aggregated (ref)", rec("2 Engines Aggregated: Avg prompt throughput: 1.5 tokens/s, Avg generation "
                                   "throughput: 3.0 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: "
                                   "1.0%, Prefix cache hit rate: 0.0%"), ev.EngineStats,
     {"engine": "all", "running": 4, "extra": (("engines_aggregated", 2.0),)}),
    ("stats V0 with period (003)", f"INFO 01-22 18:27:20 metrics.py:449] {V0_STATS}", ev.EngineStats,
     {"ts": datetime(2026, 1, 22, 18, 27, 20), "engine": None, "gen_tps": 41.7, "running": 1, "swapped": 0,
      "waiting": 4, "kv_usage": 0.02, "extra": (("cpu_kv_usage", 0.005),)}),
    ("V0 prefix rate line (ref)", "INFO 01-22 18:27:20 metrics.py:467] Prefix cache hit rate: GPU: 12.34%, CPU: 0.00%",
     ev.EngineStats, {"prompt_tps": None, "running": None, "prefix_hit_rate": 0.1234,
                      "extra": (("cpu_prefix_hit_rate", 0.0),)}),
    ("iteration details (ref)", rec("Engine 000: Iteration(12): 1 context requests, 20 context tokens, 2 generation "
                                    "requests, 2 generation tokens, iteration elapsed time: 3.1 ms, GPU KV cache "
                                    "usage: 1.0%"), None, {}),
    ("config V1 (run)", rec("Initializing a V1 LLM engine (v0.32.0) with config: model='/tmp/tinyllm', "
                            "speculative_config=None, tokenizer='/tmp/tinyllm', dtype=torch.float32, max_seq_len=512, "
                            "download_dir=None, seed=0, served_model_name=tinyllm, enable_prefix_caching=True",
                            where="[core.py:133]", proc="(EngineCore pid=23262) "), ev.StartupFact, {}),
    ("weights (run)", rec("Loading weights took 0.02 seconds", where="[default_loader.py:501]"),
     ev.StartupFact, {"key": "weights_load_s", "value": 0.02}),
    ("weights V0 (006)", "INFO 01-13 11:35:21 model_runner.py:1099] Loading model weights took 14.9595 GB",
     ev.StartupFact, {"key": "model_memory_gib", "value": 14.9595}),
    ("checkpoint size 0.32 (run)", rec("Filesystem type for checkpoints: EXT4. Checkpoint size: 0.01 GiB. Available RAM: "
                                        "21.75 GiB.", where="[weight_utils.py:1108]", proc="(Worker pid=23993) "),
     ev.StartupFact, {"key": "checkpoint_gib", "value": 0.01}),
    ("available KV (009)", rec("Available KV cache memory: 112.61 GiB", where="[gpu_worker.py:277]"),
     ev.StartupFact, {"key": "kv_available_gib", "value": 112.61}),
    ("cpu KV space (run)", rec("Explicitly set (1.0/10.96) GiB for KV cache on node 0.", where="[cpu_worker.py:260]"),
     ev.StartupFact, {"key": "kv_available_gib", "value": 1.0}),
    ("kv size (009)", rec("GPU KV cache size: 922,496 tokens", where="[kv_cache_utils.py:849]"),
     ev.StartupFact, {"key": "kv_cache_tokens", "value": 922496}),
    ("override blocks (ref)", rec("Overriding num_gpu_blocks=16384 with num_gpu_blocks_override=20"),
     ev.StartupFact, {"key": "gpu_blocks", "value": 20}),
    ("V1 0.7 blocks (ref)", "INFO 02-01 10:00:00 [executor_base.py:110] # GPU blocks: 1381",
     ev.StartupFact, {"key": "gpu_blocks", "value": 1381}),
    ("max model len (run)", rec("Using max model len 512", where="[model.py:2152]"),
     ev.StartupFact, {"key": "max_model_len", "value": 512}),
    ("load start (run)", rec("Starting to load model /tmp/tinyllm...", where="[cpu_model_runner.py:68]",
                             proc="(Worker pid=23993) "), ev.LoadStart, {"model": "/tmp/tinyllm", "runner": "vllm"}),
    ("init engine 0.32 (run)", rec("init engine (profile, create kv cache, warmup model) took 2.17 s",
                                   where="[core.py:402]"), ev.StartupFact, {}),
    ("received 0.32 (run)", rec(f"Received request chatcmpl-b26cbefe6cf94c97: params: {SAMPLING}, lora_request: None.",
                                where="[request_logger.py:65]"), ev.RequestLogged,
     {"request_id": "chatcmpl-b26cbefe6cf94c97", "phase": "received", "prompt_tokens": None, "max_tokens": 16}),
    ("added 0.32 (run)", rec("Added request cmpl-b6fc32fa14b927a2-0-aa484f01.", where="[async_llm.py:578]"),
     ev.RequestLogged, {"request_id": "cmpl-b6fc32fa14b927a2-0", "phase": "added"}),
    ("added V0 (ref)", "INFO 10-01 18:43:27 async_llm_engine.py:208] Added request cmpl-c52dbd9a95114d1cbfa182e588138c86-0.",
     ev.RequestLogged, {"request_id": "cmpl-c52dbd9a95114d1cbfa182e588138c86-0", "phase": "added"}),
    ("aborted (ref)", rec("Aborted request chatcmpl-8e11f642dabec70a-92800f89.", where="[async_llm.py:600]"),
     ev.ErrorEvent, {"kind": "client_abort", "message": "aborted request chatcmpl-8e11f642dabec70a-92800f89"}),
    ("generated response (run)", rec("Generated response chatcmpl-b26cbefe6cf94c97: output: 'sionblockals**block', "
                                     "finish_reason: length", where="[request_logger.py:108]"),
     ev.RequestLogged, {"request_id": "chatcmpl-b26cbefe6cf94c97", "phase": "output", "stream": False}),
    ("generated delta (run)", rec("Generated response chatcmpl-8e11f642dabec70a (streaming delta): output: ' parts', "
                                  "finish_reason: None", where="[request_logger.py:108]"),
     ev.RequestLogged, {"request_id": "chatcmpl-8e11f642dabec70a", "phase": "output", "stream": True}),
    ("request aborted 0.32 (ref)", rec("Request chatcmpl-8e11f642dabec70a aborted.", where="[async_llm.py:783]"),
     ev.RequestLogged, {"request_id": "chatcmpl-8e11f642dabec70a", "phase": "aborted"}),
    ("request failed 0.32 (ref)", rec("Request cmpl-b6fc32fa14b927a2-0 failed (bad request): too long.",
                                      where="[async_llm.py:795]"),
     ev.RequestLogged, {"request_id": "cmpl-b6fc32fa14b927a2-0", "phase": "failed"}),
    ("finished V0 (ref)", "INFO 10-01 18:43:29 async_llm_engine.py:140] Finished request cmpl-c52dbd9a95114d1cbfa182e588138c86-0.",
     ev.RequestLogged, {"request_id": "cmpl-c52dbd9a95114d1cbfa182e588138c86-0", "phase": "finished"}),
    ("preemption V0 (ref)", "WARNING 05-02 10:11:12 scheduler.py:1089] Sequence group 7 is preempted by "
     "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end "
     "performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
     "total_num_cumulative_preemption=51", ev.Preemption, {"request_id": "7", "mode": "RECOMPUTE", "cumulative": 51}),
    ("preemption early V1 (ref)", "WARNING 02-01 10:00:00 [scheduler.py:300] request cmpl-1 is preempted by "
     "RECOMPUTE mode because there is not enough KV cache space. total_num_cumulative_preemption=1",
     ev.Preemption, {"request_id": "cmpl-1", "mode": "RECOMPUTE", "cumulative": 1}),
    ("access 0.32 no prefix (run)", 'INFO:     127.0.0.1:59092 - "POST /v1/completions HTTP/1.1" 400 Bad Request',
     ev.HttpAccess, {"status": 400, "latency_s": None, "latency_raw": "", "client": "127.0.0.1", "method": "POST",
                     "path": "/v1/completions"}),
    ("access prefixed (013)", '(APIServer pid=1) INFO:     127.0.0.1:39830 - "GET /health HTTP/1.1" 200 OK',
     ev.HttpAccess, {"status": 200, "client": "127.0.0.1", "method": "GET", "path": "/health"}),
    ("access ipv6 (ref)", 'INFO:     ::1:50000 - "GET /metrics?x=1 HTTP/1.1" 404 Not Found',
     ev.HttpAccess, {"status": 404, "client": "::1", "path": "/metrics?x=1"}),
    ("uvicorn startup (run)", "INFO:     Application startup complete.", None, {}),
    ("uvicorn server process (015)", "(APIServer pid=90458) INFO:     Started server process [90458]", None, {}),
    ("route (run)", rec("Route: /v1/chat/completions, Methods: POST", where="[launcher.py:195]"), None, {}),
    ("banner art (run)", rec("       █     █     █▄   ▄█", where="[api_utils.py:347]"), None, {}),
    ("banner blank (run)", "(APIServer pid=21423) INFO 11-29 15:50:34 [api_utils.py:347] ", None, {}),
    ("banner version (run)", rec(" ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.32.0", where="[api_utils.py:347]"),
     ev.StartupFact, {"key": "version", "value": "0.32.0"}),
    ("api server version (ref)", "INFO 05-01 10:00:00 api_server.py:149] vLLM API server version 0.4.2",
     ev.StartupFact, {"key": "version", "value": "0.4.2"}),
    ("tab-indented info (run)", rec("\tlocal_rank=0, core ids=[0]", where="[ompmultiprocessing.py:185]"), None, {}),
    ("bare prefix (028)", "(Worker_TP0 pid=34322)", None, {}),
    ("tqdm (run)", "Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:00<00:00, 59.25it/s]", None, {}),
    ("tqdm graphs (ref)", "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 67/67 "
     "[00:04<00:00, 14.07it/s]", None, {}),
    ("deprecation warning (run)", "/tmp/vllm-venv/lib/python3.11/site-packages/vllm/entrypoints/openai/api_server.py:24:"
     " DeprecationWarning: `vllm.entrypoints.openai.api_server` is deprecated", None, {}),
    ("resource tracker (run)", "/root/.pyenv/versions/3.11.7/lib/python3.11/multiprocessing/resource_tracker.py:254: "
     "UserWarning: resource_tracker: There appear to be 1 leaked semaphore objects to clean up at shutdown", None, {}),
    ("nanobind (run)", "nanobind: leaked 4 instances!", None, {}),
    ("triton print (run)", "Triton is installed, but doesn't include CPU backend. Disabling Triton.", None, {}),
    ("c10 warning (run)", "[W1129 15:51:48.807954586 utils.cpp:68] Warning: NUMA binding: Using MEMBIND policy",
     None, {}),
    ("c10 error (ref)", "[E1129 15:51:48.807954586 ProcessGroupNCCL.cpp:616] Watchdog caught collective operation "
     "timeout", ev.ErrorEvent, {"kind": "other"}),
    ("unknown warning record (013)", "(APIServer pid=1) WARNING 12-11 20:29:59 [protocol.py:112] The following fields "
     "were present in the request but ignored: {'strict'}", None, {}),
    ("unknown raw line (ref)", "hello from somewhere else", ev.Unparsed, {}),
    ("indented line without context (ref)", "    some indented text", ev.Unparsed, {}),
]


@pytest.mark.parametrize(("line", "kind", "attrs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_line_shapes(line: str, kind: type[ev.Event] | None, attrs: dict[str, Any]) -> None:
    events = feed([line])
    if kind is None:
        assert events == []
        return
    assert events, line
    assert isinstance(events[0], kind), events
    for key, want in attrs.items():
        assert getattr(events[0], key) == want, (key, events[0])


def test_config_line_facts() -> None:
    p = VllmParser(year=2026)
    events = feed([CASES[7][1]], p)
    facts = {e.key: e.value for e in only(events, ev.StartupFact)}
    assert facts == {"version": "0.32.0", "served_model": "tinyllm", "max_model_len": 512}
    assert p.version == "0.32.0"
    # V0 config line: no alias, so the model path is what clients call it.
    events = feed(["INFO 09-10 10:00:00 llm_engine.py:232] Initializing an LLM engine (v0.6.1.dev238+g2417798) with "
                   "config: model='meta-llama/Llama-3.1-8B', speculative_config=None, max_seq_len=131072, "
                   "served_model_name=None, use_v2_block_manager=True"])
    facts = {e.key: e.value for e in only(events, ev.StartupFact)}
    assert facts == {"version": "0.6.1.dev238+g2417798", "served_model": "meta-llama/Llama-3.1-8B",
                     "max_model_len": 131072}


def test_merged_kv_size_and_concurrency_line() -> None:
    events = feed([rec("CPU KV cache size: 262,144 tokens, Maximum concurrency for 512 tokens per request: 512.00x")])
    assert [(e.key, e.value) for e in only(events, ev.StartupFact)] == [
        ("kv_cache_tokens", 262144), ("max_concurrency", 512.0), ("max_concurrency_tokens", 512)]


def test_init_engine_both_forms_and_one_load_per_start() -> None:
    p = VllmParser(year=2026)
    events = feed([
        rec("Starting to load model /m...", stamp="11-29 15:51:48", proc="(Worker_TP0 pid=1) "),
        rec("Starting to load model /m...", stamp="11-29 15:51:48", proc="(Worker_TP1 pid=2) "),
        rec("init engine (profile, create kv cache, warmup model) took 2.17 s (compilation: 0.50 s)",
            stamp="11-29 15:51:49", proc="(EngineCore_DP0 pid=3) "),
        rec("init engine (profile, create kv cache, warmup model) took 2.20 seconds", stamp="11-29 15:51:49",
            proc="(EngineCore_DP1 pid=4) "),
        rec("Starting vLLM server on http://127.0.0.1:18000", stamp="11-29 15:51:54"),
        'INFO:     Uvicorn running on http://127.0.0.1:18000 (Press CTRL+C to quit)',
    ], p)
    assert len(only(events, ev.LoadStart)) == 1
    done = only(events, ev.LoadDone)
    # The load spans from `Starting to load model` (weights) to ready; init engine alone is 2.17 s.
    assert len(done) == 1 and done[0].duration_s == 2.17
    assert [e.value for e in only(events, ev.StartupFact) if e.key == "init_engine_s"] == [2.17, 2.2]
    starts = only(events, ev.ServerStart)
    assert [(s.listen, s.version) for s in starts] == [("http://127.0.0.1:18000", None)]

    # A restart in the same log (a new banner) is a new load.
    more = feed([rec(" ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.32.0", stamp="11-29 16:00:00"),
                 rec("Starting to load model /m...", stamp="11-29 16:00:10"),
                 rec("init engine (profile, create kv cache, warmup model) took 2.00 s", stamp="11-29 16:00:20"),
                 "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)"], p)
    assert len(only(more, ev.LoadStart)) == 1
    assert [d.duration_s for d in only(more, ev.LoadDone)] == [10.0]
    assert [(s.listen, s.version) for s in only(more, ev.ServerStart)] == [("http://0.0.0.0:8000", "0.32.0")]


def test_request_logging_with_prompt_and_token_ids() -> None:
    old = ("INFO 10-01 18:43:27 logger.py:36] Received request cmpl-c52d-0: prompt: 'How, params: to make pizza', "
           "params: SamplingParams(n=1, best_of=1, temperature=0.0, max_tokens=16, min_tokens=0), "
           "prompt_token_ids: [1, 1128, 304, 1207, 282, 24990], lora_request: None, prompt_adapter_request: None.")
    details = rec("Request cmpl-9-0 details: prompt: 'It\\'s \"quoted\"\\nline two', prompt_token_ids: [5, 6, 7], "
                  "prompt_embeds shape: None.", level="DEBUG", where="[entrypoints/.../utils/request_logger.py:65]")
    body = rec('Request 1234abcd JSON body: {"prompt": "secret words"}', level="DEBUG", where="[api_server.py:99]")
    events = feed([old, details, body])
    logged = only(events, ev.RequestLogged)
    assert [(r.request_id, r.phase, r.prompt_tokens, r.max_tokens) for r in logged] == [
        ("cmpl-c52d-0", "received", 6, 16), ("cmpl-9-0", "details", 3, None), ("1234abcd", "body", None, None)]
    assert logged[2].stream is False  # a whole body without `stream`: the default
    prompts = only(events, ev.PromptText)
    want = ["How, params: to make pizza", "It's \"quoted\"\nline two", '{"prompt": "secret words"}']
    assert [p.text for p in prompts] == want
    assert [p.chars for p in prompts] == [len(w) for w in want]
    # Prompt text lives only in PromptText.
    assert "pizza" not in repr([e for e in events if not isinstance(e, ev.PromptText)])
    assert "secret" not in repr([e for e in events if not isinstance(e, ev.PromptText)])
    assert "pizza" not in repr(prompts)  # and PromptText does not print it either


def test_empty_token_ids_and_cut_prompt() -> None:
    events = feed([rec("Request r1 details: prompt: '', prompt_token_ids: [], prompt_embeds shape: None."),
                   rec("Received request r2: prompt: 'cut here")])
    logged = only(events, ev.RequestLogged)
    assert [(r.request_id, r.prompt_tokens) for r in logged] == [("r1", 0), ("r2", None)]
    assert [p.text for p in only(events, ev.PromptText)] == ["", "cut here"]


def test_added_id_suffix_is_stripped_only_from_api_ids() -> None:
    cases = {"chatcmpl-a269fdcb7c6ce890-a8a65d16": "chatcmpl-a269fdcb7c6ce890",
             "cmpl-b6fc32fa14b927a2-0-aa484f01": "cmpl-b6fc32fa14b927a2-0",
             "chatcmpl-4e3c2a1b-1234-5678-9abc-def012345678": "chatcmpl-4e3c2a1b-1234-5678-9abc-def012345678",
             "my-request-id": "my-request-id"}
    for raw, want in cases.items():
        (event,) = feed([rec(f"Added request {raw}.")])
        assert isinstance(event, ev.RequestLogged) and event.request_id == want


def test_clock_year_rollover_and_envelope_year() -> None:
    p = VllmParser(year=2025)
    events = feed([rec(STATS_032, stamp="12-31 23:59:55"), rec(STATS_032, stamp="01-01 00:00:05"),
                   rec(STATS_032, stamp="01-01 00:00:04")], p)
    assert [e.ts for e in events] == [datetime(2025, 12, 31, 23, 59, 55), datetime(2026, 1, 1, 0, 0, 5),
                                      datetime(2026, 1, 1, 0, 0, 4)]
    # No year given: 2000, a leap year, so 02-29 is a date.
    (e,) = feed([rec(STATS_032, stamp="02-29 10:00:00")], VllmParser())
    assert e.ts == datetime(2000, 2, 29, 10, 0, 0)
    # An envelope's full time gives the year, across New Year too.
    env = datetime(2027, 1, 1, 0, 0, 1, tzinfo=timezone.utc)
    (e,) = feed([rec(STATS_032, stamp="12-31 23:59:59")], VllmParser(), env_ts=env)
    assert e.ts == datetime(2026, 12, 31, 23, 59, 59)
    # A custom format with a year and milliseconds (010); `.53` is logging's unpadded msecs.
    p = VllmParser()
    events = feed(["INFO 2025-11-07 17:18:28.53 backends.py:172] Compiling a graph for general shape takes 21.15 s",
                   rec(STATS_032, stamp="11-07 17:18:30")], p)
    assert [e.ts for e in events] == [datetime(2025, 11, 7, 17, 18, 30)]
    assert feed(["INFO 2025-11-07 17:18:28.53 core.py:1] Avg prompt throughput: 1.0 tokens/s"])[0].ts == datetime(
        2025, 11, 7, 17, 18, 28, 53000)


def test_lines_without_a_stamp_take_the_envelope_or_the_last_time() -> None:
    access = 'INFO:     127.0.0.1:1 - "GET /health HTTP/1.1" 200 OK'
    (e,) = feed([access])
    assert e.ts is None
    events = feed([rec("Using max model len 512"), access])
    assert events[-1].ts == T0
    env = datetime(2026, 11, 29, 16, 0, 0)
    assert feed([rec("Using max model len 512"), access], env_ts=env)[-1].ts == env


def test_glued_records_and_tui_borders() -> None:
    glued = (rec(STATS_032, proc="", stamp="07-28 06:41:09") + rec(STATS_032.replace("49.1", "50.0"), proc="",
                                                                   stamp="07-28 06:41:19"))
    events = feed([glued])
    assert [(e.line, e.gen_tps, e.ts.second) for e in only(events, ev.EngineStats)] == [(1, 49.1, 9), (1, 50.0, 19)]
    tui = "│ INFO 03-21 20:15:46 [executor_base.py:111] # cuda blocks: 7191, # CPU blocks: 512" + " " * 40 + "│"
    assert [(e.key, e.value) for e in only(feed([tui]), ev.StartupFact)] == [("gpu_blocks", 7191), ("cpu_blocks", 512)]


def test_record_traceback_is_one_error() -> None:
    """The kv-too-small shape (run): header record, framed traceback, exception; the child's raw copy of the
    same traceback is not a second error; the API server's final RuntimeError is."""
    e = "(EngineCore pid=563) ERROR 11-29 15:57:44 [core.py:1510] "
    value_error = ("ValueError: To serve at least one request with the model's max seq len (300000), (1.14 GiB KV cache "
                   "is needed, which is larger than the available KV cache memory (1.0 GiB). Based on the available "
                   "memory, the estimated maximum model length is 262016. Try increasing `gpu_memory_utilization`")
    lines = [e + "EngineCore failed to start.", e + "Traceback (most recent call last):",
             e + '  File "/x/core.py", line 1482, in run_engine_core', e + "    engine_core = EngineCoreProc(*args)",
             e + "                  ^^^^^^^^^^^^^^^^^^^^^^", e + value_error,
             "(EngineCore pid=563) INFO 11-29 15:57:48 [multiproc_executor.py:479] [shutdown] Executor: waiting",
             "Process EngineCore:", "Traceback (most recent call last):", '  File "/x/process.py", line 314, in _bootstrap',
             "    self.run()", value_error, "Traceback (most recent call last):", '  File "<frozen runpy>", line 198',
             "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore': 1}",
             "/root/x/resource_tracker.py:254: UserWarning: resource_tracker: There appear to be 1 leaked shared_memory",
             "  warnings.warn('resource_tracker: There appear to be %d '"]
    events = feed(lines)
    errors = only(events, ev.ErrorEvent)
    assert [(x.line, x.kind) for x in errors] == [(1, "load_failed"), (13, "load_failed")]
    assert errors[0].message == ("KV cache too small: max seq len 300000 needs 1.14 GiB of KV cache, 1.0 GiB "
                                 "available; estimated maximum model length 262016")
    assert errors[0].ts == datetime(2026, 11, 29, 15, 57, 44)
    assert "Engine core initialization failed" in errors[1].message
    assert only(events, ev.Unparsed) == []


def test_shutdown_engine_dead_is_not_a_crash() -> None:
    a = "(APIServer pid=21423) ERROR 11-29 15:52:14 [async_llm.py:906] "
    tb = [a + "AsyncLLM output_handler failed.", a + "Traceback (most recent call last):",
          a + '  File "/x/async_llm.py", line 849, in output_handler',
          a + "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) "
              "for the root cause."]
    after = rec("[shutdown] API server: engine client stopped", stamp="11-29 15:52:14")
    shut = rec("[shutdown] API server: shutdown triggered", stamp="11-29 15:52:14", where="[launcher.py:254]")
    errors = only(feed([shut, *tb, after]), ev.ErrorEvent)
    assert [(x.kind, x.message) for x in errors] == [("other", "shutdown")]
    # Without the shutdown lines it is a dead engine, reported once.
    errors = only(feed([*tb, after]), ev.ErrorEvent)
    assert [x.kind for x in errors] == ["engine_dead"] and errors[0].line == 1
    assert errors[0].message.startswith("vllm.v1.engine.exceptions.EngineDeadError")


def test_oom_wins_over_the_engine_dead_it_caused_and_wrapped_lines_join() -> None:
    a = "(EngineCore_DP0 pid=7) ERROR 10-15 09:00:00 [core.py:710] "
    lines = [a + "EngineCore encountered a fatal error.", a + "Traceback (most recent call last):",
             a + "  File \"/x\", line 1, in f", a + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
             "232.00 MiB.", a + "", a + "The above exception was the direct cause of the following exception:",
             a + "Traceback (most recent call last):", a + "vllm.v1.engine.exceptions.EngineDeadError: EngineCore "
             "encountered an issue."]
    errors = only(feed(lines), ev.ErrorEvent)
    assert [x.kind for x in errors] == ["oom"] and "232.00 MiB" in errors[0].message
    # Sample 021: a bare exception line wrapped mid-word by a paste.
    errors = only(feed(["torch.OutOfMemoryError: CUDA out of memory. Including non-PyTorch memory, this proce",
                        "ss has 23.40 GiB memory in use."]), ev.ErrorEvent)
    assert [x.kind for x in errors] == ["oom"] and "23.40 GiB memory in use" in errors[0].message


def test_other_errors() -> None:
    events = feed([rec("Worker proc VllmWorker-0 died unexpectedly (exit code: None), shutting down executor.",
                       level="ERROR"),
                   rec("No available memory for the cache blocks. Try increasing `gpu_memory_utilization`.",
                       level="ERROR", stamp="11-29 15:51:56"),
                   "ERROR:    Exception in ASGI application", "Traceback (most recent call last):",
                   '  File "/x/h11_impl.py", line 403, in run_asgi', "KeyError: 'model'",
                   rec("Engine 000: Avg prompt throughput: 1.0 tokens/s", stamp="11-29 15:51:57")])
    errors = only(events, ev.ErrorEvent)
    assert [(x.kind, x.line) for x in errors] == [("other", 1), ("load_failed", 2), ("other", 3)]
    assert errors[2].message == "Exception in ASGI application: KeyError: 'model'"
    assert only(events, ev.Unparsed) == []


def test_interleaved_records_do_not_split_a_traceback() -> None:
    events = feed(["Traceback (most recent call last):", '  File "/x", line 1, in f',
                   rec("Using max model len 512"), '  File "/y", line 2, in g', "    g()",
                   "RuntimeError: Engine core initialization failed. See root cause above.", rec("Using max model len 1")])
    assert [(e.kind, e.line) for e in only(events, ev.ErrorEvent)] == [("load_failed", 1)]
    assert only(events, ev.Unparsed) == []


def test_flush_emits_a_cut_traceback() -> None:
    p = VllmParser()
    assert feed(["(EngineCore_DP0 pid=1094) ValueError: To serve at least one request with the models's max seq len "
                 "(262144), (24.0 GiB KV cache is needed, which is larger than the available KV cache memory (3.18 "
                 "GiB). Based on the available memory, the estimated maximum model length is 34736. See https://d"],
                p, flush=False) == []
    (e,) = p.flush()
    assert isinstance(e, ev.ErrorEvent) and e.kind == "load_failed" and "34736" in e.message
    assert p.flush() == []


def test_noise_blocks_and_their_indented_lines() -> None:
    events = feed(["/x/api_server.py:24: DeprecationWarning: deprecated", "  warnings.warn(",
                   "nanobind: leaked 64 types!", ' - leaked type "triton._C.libtriton.ir.location"',
                   " - ... skipped remainder",
                   "See https://nanobind.readthedocs.io/en/latest/refleaks.html/root/x/resource_tracker.py:254: "
                   "UserWarning: resource_tracker: There appear to be 1 leaked semaphore objects",
                   "  warnings.warn('resource_tracker: There appear to be %d '", "", "   "])
    assert events == []


def test_era() -> None:
    assert VllmParser().era is None
    p = VllmParser()
    feed([f"INFO 01-22 18:27:20 metrics.py:449] {V0_STATS}"], p)
    assert p.era == "vLLM V0"
    p = VllmParser()
    feed([rec(STATS_032.replace("CPU", "GPU"), where="[loggers.py:118]", proc="")], p)
    assert p.era == "vLLM V1"
    p = VllmParser()
    feed([rec("CPU KV cache size: 262,144 tokens, Maximum concurrency for 512 tokens per request: 512.00x")], p)
    assert p.era == "vLLM V1 0.32+"
    p = VllmParser()
    feed(["INFO 05-01 10:00:00 api_server.py:149] vLLM API server version 0.4.2"], p)
    assert p.era == "vLLM V0"
    p = VllmParser()
    feed([rec(" ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.32.1", where="[api_utils.py:347]")], p)
    assert (p.version, p.era) == ("0.32.1", "vLLM V1 0.32+")


FRAGMENTS = [
    "(APIServer pid=1) ", "(EngineCore_DP0 pid=2) ", "INFO ", "ERROR ", "WARNING ", "DEBUG ", "11-29 15:51:55 ",
    "2025-11-07 17:18:00.203 ", "[loggers.py:335] ", "metrics.py:449] ", "Engine 000: ", "2 Engines Aggregated: ",
    "Avg prompt throughput: ", "1.5 tokens/s", ", ", "Running: ", "3 reqs", "GPU KV cache usage: ", "12.5%", ": ",
    "Prefix cache hit rate: GPU: ", "KV fetch: ", "Received request ", "Added request ", "Request ", " details: ",
    "prompt: '", "'", ", params: ", "prompt_token_ids: [", "]", "max_tokens=", "Traceback (most recent call last):",
    "  File ", "ValueError: ", "torch.OutOfMemoryError: ", "EngineDeadError", "[shutdown] ", "INFO:     ",
    '127.0.0.1:1 - "GET /health HTTP/1.1" 200 OK', "KV cache size: ", "1,024 tokens", "Maximum concurrency for ",
    "init engine (profile) took ", " s", " seconds", "Starting to load model ", "│", "version 0.32.0 █",
    "max seq len (", ") is larger than", "Process EngineCore:", "Sequence group ", " is preempted by ", "\x00", "\ufffd",
    "During handling of the above exception", "e+308", "99999999999999999999", "-", ".",
]
shaped = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=10)), max_size=16).map("".join)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(st.text(), shaped), max_size=6), st.integers(min_value=1, max_value=9999) | st.none())
def test_parser_is_total(lines: list[str], year: int | None) -> None:
    p = VllmParser(year=year)
    out: list[ev.Event] = []
    for n, line in enumerate(lines, 1):
        events = p.parse(n, line)
        assert isinstance(events, list)
        out.extend(events)
    out.extend(p.flush())
    for e in out:
        assert isinstance(e, ev.Event) and isinstance(e.line, int)
    assert p.era is None or p.era.startswith("vLLM V")


def test_access_and_warning_lines_inside_a_raw_traceback() -> None:
    events = feed(["Process EngineCore_DP0:", "Traceback (most recent call last):", '  File "/x", line 1, in f',
                   'INFO:     127.0.0.1:5 - "GET /health HTTP/1.1" 200 OK', "/x/y.py:3: UserWarning: careful",
                   "  warnings.warn(", '  File "/y", line 2, in g',
                   "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
                   'INFO:     127.0.0.1:6 - "GET /health HTTP/1.1" 200 OK'])
    assert [type(e).__name__ for e in events] == ["HttpAccess", "ErrorEvent", "HttpAccess"]
    err = only(events, ev.ErrorEvent)[0]
    assert (err.kind, err.line) == ("engine_dead", 1)
    assert err.message.startswith("vllm.v1.engine.exceptions.EngineDeadError")


def test_request_lines_that_tell_whose_access_line_it_is() -> None:
    # DEBUG `JSON body` (only the keys the client set: a stream says so), the engine's own `Received request`
    # wording of old vLLM (written when generation starts: after a stream's access line), and a cut body.
    events = feed([
        rec('Request 80d7a84f7fa9cf59 JSON body: {"messages":[{"content":"a \\"stream\\":false"}],"stream":true,'
            '"max_tokens":8}', level="DEBUG", where="[entrypoints/.../utils/request_logger.py:74]"),
        rec('Request 1234abcd JSON body: {"prompt":"cut', level="DEBUG", where="[api_server.py:99]"),
        "INFO 02-01 10:00:00 async_llm_engine.py:470] Received request cmpl-5-0: prompt: 'Hi', sampling_params: "
        "SamplingParams(n=1, max_tokens=7), prompt_token_ids: [1, 2, 3], lora_request: None.",
    ])
    logged = only(events, ev.RequestLogged)
    assert [(r.request_id, r.phase, r.stream, r.late) for r in logged] == [
        ("80d7a84f7fa9cf59", "body", True, False), ("1234abcd", "body", None, False),
        ("cmpl-5-0", "received", None, True)]
    assert (logged[2].prompt_tokens, logged[2].max_tokens) == (3, 7)
    assert [p.text for p in only(events, ev.PromptText)][2] == "Hi"
