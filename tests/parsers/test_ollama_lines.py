"""One literal line per Ollama line shape, including the shapes the sample corpus lacks.

Lines are in the exact forms of reference/ollama-formats.md (the version that wrote each is in the
test id); those not taken from a sample are marked (ref) and were written from the reference's format
strings, so they are synthetic.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import events as ev
from parsers.ollama.log import OllamaParser, era_of_version

CASES: list[tuple[str, str, type[ev.Event], dict[str, Any]]] = [
    ("gin-ns (ref)", '[GIN] 2024/10/08 - 20:16:09 | 200 |       812ns |             ::1 | GET      "/"',
     ev.HttpAccess, {"status": 200, "latency_s": 812e-9, "client": "::1", "method": "GET", "path": "/"}),
    ("gin-us-ascii (ref)", '[GIN] 2024/10/08 - 20:16:09 | 200 |      16.7us |       127.0.0.1 | GET      "/api/ps"',
     ev.HttpAccess, {"latency_s": pytest.approx(16.7e-6)}),
    ("gin-hms 066", '[GIN] 2025/06/10 - 22:46:49 | 200 |      1h24m39s |    10.99.99.105 | POST     "/api/chat"',
     ev.HttpAccess, {"latency_s": 5079.0}),
    ("gin-query (ref)", '[GIN] 2025/06/10 - 22:46:49 | 404 |   1.5ms |    10.0.0.1 | GET      "/api/x?a=1|b=\\"2\\""',
     ev.HttpAccess, {"status": 404, "path": '/api/x?a=1|b="2"'}),
    ("gin-ansi-stripped (ref)", '[GIN] 2024/12/09 - 03:41:20 |  499 |         1m30s |      10.1.1.116 |  POST    "/v1/chat/completions"',
     ev.HttpAccess, {"status": 499, "latency_s": 90.0, "method": "POST"}),
    ("listen v0.5.7 022", 'time=2025-02-02T09:23:09.657+08:00 level=INFO source=routes.go:1238 msg="Listening on 127.0.0.1:11434 (version 0.5.7)"',
     ev.ServerStart, {"version": "0.5.7", "listen": "127.0.0.1:11434"}),
    ("golog-config v0.3 (ref)", '2024/06/02 18:43:45 routes.go:1007: INFO server config env="map[OLLAMA_CONTEXT_LENGTH:8192 OLLAMA_ORIGINS:[http://localhost https://localhost] OLLAMA_NUM_PARALLEL:0]"',
     ev.ServerConfig, {"settings": (("OLLAMA_CONTEXT_LENGTH", "8192"), ("OLLAMA_ORIGINS", "[http://localhost https://localhost]"), ("OLLAMA_NUM_PARALLEL", "0"))}),
    ("golog-started E0 (ref)", "2023/12/03 14:58:42 llama.go:492: llama runner started in 9.200880 seconds",
     ev.LoadDone, {"duration_s": 9.20088}),
    ("start E2 (ref)", 'time=2024-06-01T10:00:00.000Z level=INFO source=server.go:320 msg="starting llama server" cmd="/tmp/ollama1/runners/cuda_v11/ollama_llama_server --model /m/blobs/sha256-aaaa --ctx-size 8192 --batch-size 512 --n-gpu-layers 29 --parallel 4 --port 40797"',
     ev.LoadStart, {"ctx_total": 8192, "parallel": 4, "gpu_layers": 29, "runner": "llama server"}),
    ("start E5 018", 'time=2026-07-21T14:48:34.530+08:00 level=INFO source=llama_server.go:433 msg="starting llama-server" cmd="/usr/local/lib/ollama/llama-server --model /b/sha256-65 --port 1 -c 262144 -np 1 --log-verbosity 4"',
     ev.LoadStart, {"ctx_total": 262144, "parallel": 1, "runner": "llama-server"}),
    ("loadreq E4 006", 'time=2026-02-10T10:00:00.000+01:00 level=INFO source=runner.go:1250 msg=load request="{Operation:commit LoraPath:[] Parallel:2 BatchSize:512 FlashAttention:Enabled KvSize:16384 KvCacheType:q8_0 NumThreads:8 GPULayers:49[ID:0 Layers:49(0..48)] MultiUserCache:false}"',
     ev.LoadRequest, {"op": "commit", "parallel": 2, "kv_size": 16384, "kv_cache_type": "q8_0", "batch_size": 512}),
    ("evict E4 gpu (ref)", 'time=2025-09-01T10:00:00.000Z level=INFO source=sched.go:200 msg="model requires more gpu memory than is currently available, evicting a model to make space" "loaded layers"=12',
     ev.Eviction, {"reason": "evicted", "model": None}),
    ("timer expired DEBUG (ref)", 'time=2025-09-01T10:05:00.000Z level=DEBUG source=sched.go:100 msg="timer expired, expiring to unload" runner.name=registry.ollama.ai/library/gemma3:1b runner.num_ctx=4096',
     ev.UnloadStep, {"stage": "expire", "model": "registry.ollama.ai/library/gemma3:1b", "num_ctx": 4096}),
    ("trunc runner 004", 'time=2025-04-22T07:10:41.617Z level=WARN source=runner.go:131 msg="truncating input prompt" limit=2048 prompt=5065 keep=5 new=2048',
     ev.Truncation, {"limit": 2048, "prompt": 5065, "keep": 5, "new": 2048, "truncated": True}),
    ("trunc llama.cpp text E2 (ref)", 'INFO [update_slots] input truncated | n_ctx=2048 n_erase=1090 n_keep=4 n_left=2044 n_shift=1022 tid="130623106379776" timestamp=1721345155',
     ev.Truncation, {"limit": 2048, "prompt": None, "keep": 4, "form": "input_truncated"}),
    ("exceeds v0.4.2 045", 'time=2024-11-20T11:56:14.287-06:00 level=WARN source=runner.go:122 msg="input exceeds context length" prompt=2458413 limit=20408',
     ev.Truncation, {"limit": 20408, "prompt": 2458413, "truncated": False}),
    ("new prompt E5 019", "slot   operator(): id  0 | task 0 | new prompt, n_ctx_slot = 131072, n_keep = 4, task.n_tokens = 14892",
     ev.PromptTask, {"slot": 0, "task": 0, "n_ctx_slot": 131072, "n_keep": 4, "n_tokens": 14892}),
    ("print_timing E5 (ref)", "slot print_timing: id  0 | task 7 | prompt eval time =    1234.50 ms /  2048 tokens (    0.60 ms per token,  1659.1 tokens per second)",
     ev.Timing, {"kind": "prompt", "ms": 1234.5, "tokens": 2048, "task": 7}),
    ("eval continuation E5 (ref)", "       eval time =     900.00 ms /    64 tokens (   14.06 ms per token,    71.11 tokens per second)",
     ev.Timing, {"kind": "eval", "ms": 900.0, "tokens": 64}),
    ("release E5 (ref)", "slot      release: id  0 | task 7 | stop processing: n_tokens = 2112, truncated = 1",
     ev.SlotRelease, {"task": 7, "n_tokens": 2112, "truncated": True}),
    ("print_timings E0 (ref)", "llama_print_timings: prompt eval time =   512.00 ms /    37 tokens (   13.84 ms per token,    72.27 tokens per second)",
     ev.Timing, {"kind": "prompt", "tokens": 37}),
    ("json slot E2 021", '{"function":"initialize","level":"INFO","line":457,"msg":"new slot","n_ctx_slot":2048,"slot_id":0,"tid":"1","timestamp":1717470350}',
     ev.ContextSize, {"ctx": 2048, "kind": "per_slot"}),
    ("llama_context 055", "llama_context: n_ctx_seq     = 4096", ev.ContextSize, {"ctx": 4096, "kind": "per_slot"}),
    ("n_ctx_train 055", "print_info: n_ctx_train      = 8192", ev.ContextSize, {"ctx": 8192, "kind": "train"}),
    ("offload slog (ref)", 'time=2025-01-01T00:00:00.000Z level=INFO source=memory.go:1 msg=offload library=cuda layers.requested=-1 layers.model=49 layers.offload=37 layers.split=37,0',
     ev.Offload, {"offloaded": 37, "total": 49}),
    ("oom raw (ref)", "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9216.00 MiB on device 0: cudaMalloc failed: out of memory",
     ev.ErrorEvent, {"kind": "oom"}),
    ("assert raw 052", r"C:\a\ollama\ggml-cuda\cpy.cu:325: GGML_ASSERT(ggml_nbytes(src0) <= INT_MAX) failed",
     ev.ErrorEvent, {"kind": "runner_crash"}),
    ("terminated (ref)", 'time=2025-01-01T00:00:00.000Z level=ERROR source=sched.go:1 msg="llama runner terminated" error="exit status 2"',
     ev.ErrorEvent, {"kind": "runner_crash"}),
    ("abort load 051", 'time=2025-02-28T01:25:01.793+01:00 level=WARN source=server.go:562 msg="client connection closed before server finished loading, aborting load"',
     ev.ErrorEvent, {"kind": "client_abort"}),
    ("idle timer 049", 'time=2024-11-21T06:14:48.644Z level=DEBUG source=sched.go:339 msg="runner with non-zero duration has gone idle, adding timer" modelPath=/b/sha256-dd duration=5m0s',
     ev.IdleTimer, {"duration": "5m0s", "duration_s": 300.0}),
    ("vram default ctx 001", 'time=2026-08-29T08:00:00.000Z level=INFO source=routes.go:2040 msg="vram-based default context" total_vram="32.3 GiB" default_num_ctx=32768',
     ev.DefaultContext, {"ctx": 32768}),
    ("glued stderr 027", 'cuda driver library failed to get device context 2time=2025-03-15T11:39:07.109+01:00 level=INFO source=sched.go:1 msg="loaded runners" count=2',
     ev.RunnersLoaded, {"count": 2}),
    ("gpu memory Metal 006", 'time=2026-02-13T00:02:07.793-05:00 level=INFO source=sched.go:470 msg="gpu memory" id=0 library=Metal available="11.3 GiB" free="11.8 GiB" minimum="512.0 MiB" overhead="0 B"',
     ev.GpuMemory, {"device_id": "0", "total": None, "free": "11.8 GiB", "available": "11.3 GiB"}),
    ("updated VRAM 027", 'time=2025-03-15T11:39:07.136+01:00 level=INFO source=sched.go:508 msg="updated VRAM based on existing loaded models" gpu=GPU-a1c88671-c53c-a240-0fe5-5e9bd6b67d6e library=cuda total="47.5 GiB" available="38.6 GiB"',
     ev.GpuMemory, {"device_id": "GPU-a1c88671-c53c-a240-0fe5-5e9bd6b67d6e", "total": "47.5 GiB", "free": None,
                    "available": "38.6 GiB"}),
    ("updated VRAM co-resident 027", 'time=2025-03-15T11:39:07.136+01:00 level=INFO source=sched.go:508 msg="updated VRAM based on existing loaded models" gpu=GPU-a1c88671-c53c-a240-0fe5-5e9bd6b67d6e library=cuda total="47.5 GiB" available="38.6 GiB"',
     ev.LoadDecision, {"co_resident": True, "available": "38.6 GiB"}),
    ("chat request prompt (ref)", 'time=2024-08-29T17:15:51.787Z level=DEBUG source=routes.go:208 msg="chat request" prompt="<|user|>hi" images=0',
     ev.PromptText, {"text": "<|user|>hi"}),
]


@pytest.mark.parametrize(("name", "line", "kind", "fields"), CASES, ids=[c[0] for c in CASES])
def test_line_shape(name: str, line: str, kind: type[ev.Event], fields: dict[str, Any]) -> None:
    parser = OllamaParser()
    if "continuation" in name:
        parser.parse(1, "slot print_timing: id  0 | task 7 | prompt eval time = 1.0 ms / 1 tokens")
    events = parser.parse(2, line)
    matching = [e for e in events if isinstance(e, kind)]
    assert matching, f"{name}: got {events}"
    for key, value in fields.items():
        assert getattr(matching[0], key) == value, key
    if "continuation" in name:
        timing = matching[0]
        assert isinstance(timing, ev.Timing)
        assert timing.task == 7


def test_gin_time_takes_the_offset_learned_from_slog() -> None:
    parser = OllamaParser()
    (first,) = parser.parse(1, '[GIN] 2025/02/20 - 16:34:14 | 200 | 1s | ::1 | GET "/"')
    assert first.ts is not None and first.ts.tzinfo is None  # no offset known yet: naive, not guessed
    parser.parse(2, 'time=2025-02-20T16:34:15.000+08:00 level=INFO source=x.go:1 msg="total blobs: 5"')
    (second,) = parser.parse(3, '[GIN] 2025/02/20 - 16:34:16 | 200 | 1s | ::1 | GET "/"')
    assert second.ts is not None and second.ts.isoformat() == "2025-02-20T16:34:16+08:00"


def test_unknown_lines_are_counted_not_raised() -> None:
    parser = OllamaParser()
    for text in ("%%% not a log line %%%", "12345", "[GIN] broken | line", "time=garbage"):
        assert [type(e) for e in parser.parse(1, text)] == [ev.Unparsed]


@pytest.mark.parametrize(("version", "era"), [("0.1.17", "E0"), ("0.1.28", "E1"), ("0.3.6", "E2"), ("0.5.7", "E3"),
                                              ("0.11.10", "E4"), ("0.24.1", "E4"), ("0.30.0", "E5"), ("v0.32.7", "E5")])
def test_era_of_version(version: str, era: str) -> None:
    assert era_of_version(version) == era


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from([*"ab-/ \t\r\n\x0b#=\\é9", "--ctx-size", "-np", "runner"]), max_size=30).map("".join))
def test_runner_command_without_quotes_splits_as_shlex_does(cmd: str) -> None:
    """Runner command lines without quotes skip shlex (slow, char by char in Python): same flags either way."""
    import shlex

    from parsers.ollama.messages import _SHELL_SPACE_RE

    stripped = cmd.strip(" \t\r\n")
    assert (_SHELL_SPACE_RE.split(stripped) if stripped else []) == shlex.split(cmd, posix=False)


_RAW_FRAGMENTS = ["out of memory", "Out Of Memory", "cudaMalloc failed", "hipMalloc failed", "ErrorOutOfDeviceMemory",
                  "vk_error_out_of_device_memory", "kIOGPUCommandBufferCallbackErrorOutOfMemory", "failed to allocate",
                  "unable to allocate CUDA0 buffer", "GGML_ASSERT(x) failed", "panic: ", "CUDA error", "SIGSEGV",
                  "fatal error: ", "Segmentation fault", "MALLOC", "ALLOC", "memory", "\n", " "]


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_RAW_FRAGMENTS), st.text(max_size=5)), max_size=6).map("".join))
def test_raw_line_prefilter_words_are_in_every_match(text: str) -> None:
    """parse_raw_line() runs the OOM and crash regexes only when their words are in the line."""
    from parsers.ollama.llamacpp import _CRASH_RE, _OOM_RE

    if _OOM_RE.search(text):
        assert "memory" in text.lower() or "alloc" in text.lower()
    if _CRASH_RE.search(text):
        assert any(w in text for w in ("GGML_ASSERT(", "panic: ", "CUDA error", "SIGSEGV", "fatal error: ",
                                       "Segmentation fault"))
