"""The hint table: for every id in `HINT_IDS` a case that fires it and a near miss that must not.

A firing case checks the id, the severity, the numbers in `detail` and the evidence lines (path and line
number, as `ietop analyze --json` writes them). A near miss is a case just below a threshold or lacking one
ingredient of the rule; where the input could fail to parse into that ingredient, the case also checks
that it did (so the miss is the rule's doing, not the parser's).

Sources, in order of preference:
- real fixtures (fixtures/ollama, fixtures/vllm, fixtures/vllm/metrics, fixtures/mlx), analyzed as saved;
- SYNTHETIC logs written into tmp_path from the literal strings below, built from real line shapes with the
  numbers changed (Ollama logs carry a first slog line `msg="SYNTHETIC ietop test log: …"`; the vLLM logs
  and the `/metrics` scrapes, whose formats have no room for such a line, are labelled by the comment above
  each string);
- records and a `HintContext` built directly, for the inputs a log cannot give (`gpu_util`, exact
  p50/p99), fed to `HintEngine.observe` / `evaluate` as the store would.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ietop.analyze.report import Analysis
from ietop.model.hints import HINT_IDS, RULES, HintContext, HintEngine
from ietop.model.records import Load, Ref, Unload

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"
DESIGN = ROOT.parent / "shared" / "DESIGN.md"
RECORDS_PATH = "<synthetic records>"  # evidence path of the record-built cases (source index 0)


@dataclass(frozen=True)
class Outcome:
    hints: list[dict[str, Any]]  # the `hints` list of the --json document (or Hint.as_dict for records)
    paths: list[str]  # evidence path of source i, as the report writes it
    doc: dict[str, Any]  # the whole --json document ({} for record-built cases)


Source = Callable[[Path], Outcome]


def _analyze(paths: Sequence[Path]) -> Outcome:
    an = Analysis([str(p) for p in paths])
    try:
        out = io.StringIO()
        an.write_json(out)
    finally:
        an.close()
    doc: dict[str, Any] = json.loads(out.getvalue())
    return Outcome(doc["hints"], [str(p) for p in paths], doc)


def fixture(*rels: str) -> Source:
    """Real fixture files, relative to fixtures/."""
    return lambda tmp_path: _analyze([FIX / rel for rel in rels])


def synthetic(*files: tuple[str, str]) -> Source:
    """SYNTHETIC files (name, text) written into tmp_path, analyzed together in the order given."""

    def run(tmp_path: Path) -> Outcome:
        paths = []
        for name, text in files:
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            paths.append(path)
        return _analyze(paths)

    return run


def records(feed: Sequence[tuple[str, Any]] = (), **ctx: Any) -> Source:
    """Records fed to a fresh HintEngine as the spool would, then one evaluate() with this context."""

    def run(tmp_path: Path) -> Outcome:
        engine = HintEngine()
        for kind, record in feed:
            engine.observe(kind, record)
        hints = engine.evaluate(HintContext({}, {}, {}, {}, **ctx))
        return Outcome([h.as_dict([RECORDS_PATH]) for h in hints], [RECORDS_PATH], {})

    return run


@dataclass(frozen=True)
class Case:
    hint: str
    fires: bool
    source: Source
    label: str  # where the input comes from (the parametrize id)
    severity: str | None = None
    detail: tuple[str, ...] = ()  # substrings of `detail` (the key numbers)
    detail_re: str | None = None  # or a pattern it must match, where a number is an estimate
    evidence: tuple[tuple[int, int], ...] | None = None  # (source index, line), in order
    evidence_any_order: bool = False  # compare the distinct (source, line) pairs only
    check: Callable[[Outcome], None] | None = None  # the near miss's ingredient did parse


def fires(hint: str, label: str, source: Source, severity: str, detail: tuple[str, ...] = (),
          evidence: tuple[tuple[int, int], ...] = (), **kw: Any) -> Any:
    case = Case(hint, True, source, label, severity, detail, evidence=evidence, **kw)
    return pytest.param(case, id=f"{hint}-fires-{label}")


def misses(hint: str, label: str, source: Source, check: Callable[[Outcome], None] | None = None) -> Any:
    return pytest.param(Case(hint, False, source, label, check=check), id=f"{hint}-misses-{label}")


def lines(*numbers: int, src: int = 0) -> tuple[tuple[int, int], ...]:
    return tuple((src, n) for n in numbers)


# -- SYNTHETIC inputs ----------------------------------------------------------------------------
BLOB = "/root/.ollama/models/blobs/sha256-1fb99eda86dc48a736567406253769fdc75f01e65cde7c65fa5563e4bdf156e0"
BLOB_GEMMA = "/usr/share/ollama/.ollama/models/blobs/sha256-7cd4618c1faf8b7233c6c906dac1694b6a47684b37b8895d470ac688520b9c01"


def load_015(label: str, load_s: float, latency_s: float) -> str:
    """015's load lines (plain slog + GIN): the request arrives, its load starts 50 ms later and takes
    `load_s`, the request ends (its GIN line) at 01:28:28."""
    begin = 28.0 - latency_s + 0.05
    return (
        f'time=2025-09-11T01:27:00.000Z level=INFO source=bench msg="SYNTHETIC ietop test log: {label}"\n'
        f'time=2025-09-11T01:28:{begin:06.3f}Z level=INFO source=sched.go:473 msg="loaded runners" count=1\n'
        f'time=2025-09-11T01:28:{begin:06.3f}Z level=INFO source=server.go:1250 msg="waiting for llama runner to start responding"\n'
        f'time=2025-09-11T01:28:{begin + load_s:06.3f}Z level=INFO source=server.go:1288 msg="llama runner started in {load_s:.2f} seconds"\n'
        f'[GIN] 2025/09/11 - 01:28:28 | 200 | {latency_s:12.9f}s |      172.18.0.6 | POST     "/v1/chat/completions"\n'
    )


# cold-load-latency: a 12.50 s load behind a 13.09 s request (median load ≥ 10 s: crit).
COLD_CRIT = load_015("015 shapes, a 12.50 s load behind a 13.09 s request", 12.50, 13.089501463)
# … a 2.50 s load behind a 9.09 s request: 27 % of the latency, under COLD_SHARE (30 %).
COLD_SHARE_MISS = load_015("015 shapes, a 2.50 s load is 27% of a 9.09 s request", 2.50, 9.089501463)
# … a 3.00 s load behind a 9.09 s request: 33 %, just over COLD_SHARE (fires).
COLD_SHARE_FIRE = load_015("015 shapes, a 3.00 s load is 33% of a 9.09 s request", 3.00, 9.089501463)
# … a 4.50 s load behind a 4.95 s request: the request is not slow (SLOW_S is 5 s).
COLD_FAST_MISS = load_015("015 shapes, a 4.50 s load behind a 4.95 s request", 4.50, 4.95)

# eviction-thrash near miss: the same model unloaded by its keep-alive timer, not evicted, then reloaded.
EXPIRE_MISS = f"""\
time=2025-09-01T10:00:00.000Z level=INFO source=bench msg="SYNTHETIC ietop test log: keep-alive expiry then a reload of the same model (no eviction)"
time=2025-09-01T10:00:01.000Z level=INFO source=server.go:398 msg="starting runner" cmd="/usr/bin/ollama runner --ollama-engine --model {BLOB_GEMMA} --port 35901"
time=2025-09-01T10:00:03.000Z level=INFO source=server.go:1288 msg="llama runner started in 2.00 seconds"
[GIN] 2025/09/01 - 10:00:04 | 200 |   3.100000s |       127.0.0.1 | POST     "/api/chat"
time=2025-09-01T10:05:04.000Z level=DEBUG source=sched.go:100 msg="timer expired, expiring to unload" runner.name=registry.ollama.ai/library/gemma3:1b runner.model={BLOB_GEMMA} runner.num_ctx=4096
time=2025-09-01T10:05:34.000Z level=INFO source=server.go:398 msg="starting runner" cmd="/usr/bin/ollama runner --ollama-engine --model {BLOB_GEMMA} --port 35902"
time=2025-09-01T10:05:36.000Z level=INFO source=server.go:1288 msg="llama runner started in 2.00 seconds"
[GIN] 2025/09/01 - 10:05:37 | 200 |   3.000000s |       127.0.0.1 | POST     "/api/chat"
"""


def server_config(label: str, ctx_env: str, ctx_size: int, parallel: int) -> str:
    """022's golog `server config` line, then 009's `starting llama server` launch line."""
    return (
        f'time=2025-05-23T17:16:00.000Z level=INFO source=bench msg="SYNTHETIC ietop test log: {label}"\n'
        f'2025/05/23 17:16:01 routes.go:1187: INFO server config env="map[CUDA_VISIBLE_DEVICES: OLLAMA_CONTEXT_LENGTH:{ctx_env} OLLAMA_DEBUG:false OLLAMA_HOST:http://127.0.0.1:11434 OLLAMA_KEEP_ALIVE:5m0s OLLAMA_MAX_LOADED_MODELS:0 OLLAMA_NUM_PARALLEL:{parallel}]"\n'
        f'time=2025-05-23T17:16:43.431Z level=INFO source=server.go:431 msg="starting llama server" cmd="/usr/bin/ollama runner --ollama-engine --model {BLOB} --ctx-size {ctx_size} --batch-size 512 --n-gpu-layers 49 --threads 6 --parallel {parallel} --port 42751"\n'
    )


# context-not-in-effect: OLLAMA_CONTEXT_LENGTH 8192 claimed, 4096 per slot launched (warn).
CTX_WARN = server_config("OLLAMA_CONTEXT_LENGTH=8192 but the runner gets 4096", "8192", 4096, 1)
# … 8192 claimed, 16384 over 2 slots launched: 8192 per slot, the claim holds.
CTX_SLOTS_MISS = server_config("OLLAMA_CONTEXT_LENGTH=8192 over 2 slots = 16384 total", "8192", 16384, 2)

# context-not-in-effect: 055's llama.cpp context lines, with a truncation at that context (info → warn).
CTX_TRAIN_TRUNC = """\
time=2025-04-22T11:21:40.000Z level=INFO source=bench msg="SYNTHETIC ietop test log: 055's context lines, then a prompt truncated at that context"
print_info: n_ctx_train      = 8192
llama_context: n_ctx         = 4096
llama_context: n_ctx_seq     = 4096
time=2025-04-22T11:21:47.546Z level=WARN source=runner.go:131 msg="truncating input prompt" limit=4096 prompt=5065 keep=5 new=4096
"""
# … the model's full trained context in effect: nothing below what it supports.
CTX_TRAIN_MISS = """\
time=2025-04-22T11:21:40.000Z level=INFO source=bench msg="SYNTHETIC ietop test log: 055's context lines, the full trained context in effect"
print_info: n_ctx_train      = 8192
llama_context: n_ctx         = 8192
llama_context: n_ctx_seq     = 8192
"""

# prompt-truncated near miss: a 2047-token prompt in a 2048 context (045's cache-slot line), no truncation.
TRUNC_FITS_MISS = f"""\
time=2025-06-10T21:00:00.000+02:00 level=INFO source=bench msg="SYNTHETIC ietop test log: a 2047-token prompt that fits a 2048 context"
time=2025-06-10T21:00:00.500+02:00 level=INFO source=server.go:431 msg="starting llama server" cmd="/usr/bin/ollama runner --ollama-engine --model {BLOB} --ctx-size 2048 --batch-size 512 --n-gpu-layers 49 --threads 6 --parallel 1 --port 42751"
time=2025-06-10T21:00:01.100+02:00 level=DEBUG source=cache.go:104 msg="loading cache slot" id=0 cache=0 prompt=2047 used=0 remaining=2047
[GIN] 2025/06/10 - 21:00:09 | 200 |  8.500000s |       127.0.0.1 | POST     "/api/chat"
"""


def llama_server_request(n: int, start: str, end: str, latency: float, out_tokens: int, ms_per_token: float) -> str:
    """One request in llama-server's per-request slot lines (019 shapes), 7 lines ending in its GIN line."""
    eval_ms = out_tokens * ms_per_token
    return (
        f'time={start} level=DEBUG source=sched.go:600 msg="evaluating already loaded" model={BLOB}\n'
        f"slot launch_slot_: id  0 | task {n} | processing task, is_child = 0\n"
        f"slot update_slots: id  0 | task {n} | new prompt, n_ctx_slot = 8192, n_keep = 4, task.n_tokens = 120\n"
        f"slot print_timing: id  0 | task {n} | prompt eval time =      80.00 ms /   120 tokens (    0.67 ms per token,  1500.00 tokens per second)\n"
        f"slot print_timing: id  0 | task {n} |        eval time = {eval_ms:10.2f} ms / {out_tokens:5d} tokens ({ms_per_token:8.2f} ms per token, {1000 / ms_per_token:8.2f} tokens per second)\n"
        f"slot      release: id  0 | task {n} | stop processing: n_tokens = {120 + out_tokens}, truncated = 0\n"
        f'[GIN] {end} | 200 | {latency:10.6f}s |       127.0.0.1 | POST     "/api/chat"\n'
    )


def output_log(label: str, reqs: Sequence[tuple[float, int, float]]) -> str:
    text = f'time=2026-07-01T09:59:00.000Z level=INFO source=bench msg="SYNTHETIC ietop test log: {label}"\n'
    for i, (latency, out, ms) in enumerate(reqs):
        end = int(latency) + 1
        text += llama_server_request(i + 1, f"2026-07-01T10:0{i}:00.000Z", f"2026/07/01 - 10:0{i}:{end:02d}", latency,
                                     out, ms)
    return text


# output-dominates: 400 × 24 ms = 9.6 s of 12 s (80 %) and 520 × 24 ms = 12.48 s of 16 s (78 %), 42 tokens/s.
OUTPUT_FIRE = output_log("decode is most of the latency at a healthy 42 tokens/s", [(12.0, 400, 24.0), (16.0, 520, 24.0)])
# … 580 × 24 ms = 13.92 s of 20 s: 69.6 %, under OUTPUT_SHARE (70 %).
OUTPUT_SHARE_MISS = output_log("decode is 69.6% of the latency", [(20.0, 580, 24.0), (20.0, 580, 24.0)])
# … 160 × 120 ms = 19.2 s of 20 s, but 8.3 tokens/s is not a healthy rate (HEALTHY_ITL_S is 0.1 s).
OUTPUT_SLOW_MISS = output_log("decode is 96% of the latency at 8.3 tokens/s", [(20.0, 160, 120.0), (20.0, 160, 120.0)])

# queueing near miss: 037's shape, 4 requests in flight together at 10.05 s median against 8.0 s alone (1.26x).
QUEUE_MILD_MISS = """\
time=2024-05-24T11:03:00.000Z level=INFO source=bench msg="SYNTHETIC ietop test log: 037 shapes, concurrency costs 1.26x (under QUEUE_RATIO)"
[GIN] 2024/05/24 - 11:03:57 | 200 |    8.0000000s |  1x.2xx.1xx.1xx | POST     "/api/chat"
[GIN] 2024/05/24 - 11:04:40 | 200 |    9.9000000s |  1x.2xx.1xx.1xx | POST     "/api/chat"
[GIN] 2024/05/24 - 11:04:41 | 200 |   10.0000000s | 1x.2xx.1xx.1xx | POST     "/api/chat"
[GIN] 2024/05/24 - 11:04:41 | 200 |   10.1000000s | 1x.2xx.1xx.1xx | POST     "/api/chat"
[GIN] 2024/05/24 - 11:04:41 | 200 |   10.2000000s |  1x.2xx.1xx.1xx | POST     "/api/chat"
"""

# … two requests in flight together at 2.2x the lone one: fewer than OVERLAP_MIN (3) at once.
QUEUE_PAIR_MISS = """\
time=2024-05-24T11:03:00.000Z level=INFO source=bench msg="SYNTHETIC ietop test log: 037 shapes, only two requests in flight together (under OVERLAP_MIN)"
[GIN] 2024/05/24 - 11:03:57 | 200 |    5.0000000s |  1x.2xx.1xx.1xx | POST     "/api/chat"
[GIN] 2024/05/24 - 11:04:40 | 200 |   10.9000000s |  1x.2xx.1xx.1xx | POST     "/api/chat"
[GIN] 2024/05/24 - 11:04:41 | 200 |   11.1000000s | 1x.2xx.1xx.1xx | POST     "/api/chat"
"""

# SYNTHETIC (vLLM has no room for a label line): 012's V1 stats lines with the KV cache at 89.9 % / 89.4 %,
# just under KV_HIGH (90 %), and nothing waiting.
VLLM_KV_MISS = """\
INFO 07-28 06:40:59 [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 239.2 tokens/s, Running: 8 reqs, Waiting: 0 reqs, GPU KV cache usage: 89.9%, Prefix cache hit rate: 0.0%
INFO 07-28 06:41:09 [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 239.2 tokens/s, Running: 8 reqs, Waiting: 0 reqs, GPU KV cache usage: 89.4%, Prefix cache hit rate: 0.0%
"""

# partial-offload near miss: 009's offload line with every layer on the GPU (49 of 49).
OFFLOAD_FULL_MISS = """\
time=2025-05-23T17:16:40.000Z level=INFO source=bench msg="SYNTHETIC ietop test log: 009's offload line, all 49 layers on the GPU"
time=2025-05-23T17:16:43.377Z level=INFO source=server.go:168 msg=offload library=cuda layers.requested=49 layers.model=49 layers.offload=49 layers.split=37,12 memory.available="[11.5 GiB 4.6 GiB]" memory.gpu_overhead="0 B" memory.required.full="14.9 GiB" memory.required.partial="14.9 GiB" memory.required.kv="2.0 GiB" memory.required.allocations="[11.4 GiB 3.5 GiB]" memory.weights.total="7.5 GiB"
"""


def gin_series(label: str, latencies: Sequence[float]) -> str:
    """One GIN line a minute, none overlapping (so only the latency spread matters)."""
    text = f'time=2025-09-01T09:59:00.000Z level=INFO source=bench msg="SYNTHETIC ietop test log: {label}"\n'
    for i, lat in enumerate(latencies):
        text += f'[GIN] 2025/09/01 - {10 + i // 60:02d}:{i % 60:02d}:45 | 200 | {lat:10.6f}s |       127.0.0.1 | POST     "/api/chat"\n'
    return text


TAIL_20 = [1.0 + 0.01 * i for i in range(19)]
TAIL_20.insert(10, 30.0)  # line 12: the 30 s request among twenty
TAIL_FIRE = gin_series("twenty requests, one of them 30 s among 1.0-1.18 s", TAIL_20)
TAIL_19_MISS = gin_series("nineteen requests, one of them 30 s (under TAIL_MIN_REQUESTS)", TAIL_20[:-1])

# client-timeout-during-load near miss: 016's load completes, the client goes away later, mid-generation.
ABORT_WARM_MISS = """\
time=2026-05-13T15:18:00.000-04:00 level=INFO source=bench msg="SYNTHETIC ietop test log: 016's load, then a client abort after the load finished"
time=2026-05-13T15:18:12.947-04:00 level=INFO source=server.go:1385 msg="waiting for llama runner to start responding"
time=2026-05-13T15:18:20.975-04:00 level=INFO source=server.go:1432 msg="llama runner started in 8.03 seconds"
[GIN] 2026/05/13 - 15:18:21 | 200 |  9.100000000s |       127.0.0.1 | POST     "/api/generate"
time=2026-05-13T15:19:05.000-04:00 level=INFO source=runner.go:638 msg="aborting completion request due to client closing the connection"
[GIN] 2026/05/13 - 15:19:05 | 499 | 30.000000000s |       127.0.0.1 | POST     "/api/generate"
"""

# SYNTHETIC: real-basic-server.log's start-up line (vLLM 0.32.0) with the server bound to all interfaces.
VLLM_EXPOSED = """\
(APIServer pid=21423) INFO 11-29 15:51:54 [hf.py:648] Detected the chat template content format to be 'string'. You can set `--chat-template-content-format` to override this.
(APIServer pid=21423) INFO 11-29 15:51:54 [entry.py:140] Starting vLLM server on http://0.0.0.0:18000
(APIServer pid=21423) INFO 11-29 15:51:54 [launcher.py:186] Available routes are:
"""


def scrape(queries: float, hits: float, prompt: float, requests: float, kv: float = 0.0, preempt: float = 0.0) -> str:
    """SYNTHETIC `/metrics` scrape: the real-basic scrapes' (vLLM 0.32.0) families the hints read, numbers set."""
    labels = 'engine="0",model_name="tinyllm"'
    return f"""\
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{{labels}}} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{{labels}}} {kv}
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{{{labels}}} {queries}
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{{{labels}}} {hits}
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{{{labels}}} {preempt}
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{{labels}}} {prompt}
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{{engine="0",finished_reason="stop",model_name="tinyllm"}} 0.0
vllm:request_success_total{{engine="0",finished_reason="length",model_name="tinyllm"}} {requests}
"""


def scrapes(label: str, second: str) -> Source:
    """An idle scrape and `second` 19 s later, saved side by side (one endpoint's window)."""
    return synthetic((f"{label}/metrics-1795967515.txt", scrape(0.0, 0.0, 0.0, 0.0)),
                     (f"{label}/metrics-1795967534.txt", second))


# low-prefix-cache-hits: 12 requests of 600 prompt tokens, 504 of 7200 queried tokens hit (7 %).
PREFIX_FIRE = scrape(7200.0, 504.0, 7200.0, 12.0)
# … the same hit rate, but 500 prompt tokens per request (under LONG_PROMPT_TOKENS = 512).
PREFIX_SHORT_MISS = scrape(6000.0, 420.0, 6000.0, 12.0)
# … 600 prompt tokens per request, but 10.0 % hit (not under LOW_HIT_RATE).
PREFIX_HITS_MISS = scrape(7200.0, 720.0, 7200.0, 12.0)
# kv-pressure from /metrics alone: the KV cache 95 % full and 4 preemptions in the window.
KV_METRICS_FIRE = scrape(7200.0, 5000.0, 7200.0, 12.0, kv=0.95, preempt=4.0)


# -- record-built inputs ---------------------------------------------------------------------------
def unload(t: float, line: int, model: str = "llama3:70b", for_model: str = "nomic-embed-text:latest") -> Unload:
    return Unload(None, t, "ollama", "evicted", Ref(0, line), model=model, for_model=for_model)


def reload(t: float, line: int, duration: float, model: str = "llama3:70b") -> Load:
    return Load(None, t, "ollama", Ref(0, line), model=model, status="ok", duration_s=duration,
                done_ref=Ref(0, line + 1))


# Three evictions of the chat model, each followed by its reload within the window (crit at three).
PINGPONG_3 = [
    ("unload", unload(1000.0, 10)), ("load", reload(1060.0, 20, 38.0)),
    ("unload", unload(2000.0, 30)), ("load", reload(2050.0, 40, 38.2)),
    ("unload", unload(3000.0, 50)), ("load", reload(3100.0, 60, 38.4)),
]
# One eviction, the reload 601 s later: one second past THRASH_WINDOW_S, so no ping-pong (info only).
PINGPONG_LATE = [("unload", unload(1000.0, 10)), ("load", reload(1601.0, 20, 38.0))]


# -- checks that a near miss's ingredient parsed ---------------------------------------------------
def _one_request(out: Outcome, **want: Any) -> None:
    inference = [r for r in out.doc["requests"] if r["inference"]]
    assert inference, "no inference request parsed"
    for r in inference:
        for key, value in want.items():
            assert r[key] == pytest.approx(value), (key, r)


def _cold(load_s: float, latency_s: float) -> Callable[[Outcome], None]:
    return lambda out: _one_request(out, cold_load=True, load_s=load_s, latency_s=latency_s)


def _effective(**want: Any) -> Callable[[Outcome], None]:
    def check(out: Outcome) -> None:
        effective = out.doc["config"]["effective"]
        for key, value in want.items():
            assert effective.get(key) == value, (key, effective)

    return check


def _expired(out: Outcome) -> None:
    assert [u["reason"] for u in out.doc["unloads"]] == ["expired"]
    assert [ld["status"] for ld in out.doc["loads"]] == ["ok", "ok"]


def _stats(peak_kv: float) -> Callable[[Outcome], None]:
    """Stats lines parsed, none with a request waiting, the KV cache at most `peak_kv`."""

    def check(out: Outcome) -> None:
        stats = out.doc["engine_stats"]
        assert stats and all(s["waiting"] == 0 for s in stats), stats
        assert max(s["kv_usage"] for s in stats) == pytest.approx(peak_kv)

    return check


def _offload(done: int, total: int) -> Callable[[Outcome], None]:
    return lambda out: _assert(any(ld["offload"] == [done, total] for ld in out.doc["loads"]), out.doc["loads"])


def _assert(ok: bool, context: Any) -> None:
    assert ok, context


def _latency_count(n: int) -> Callable[[Outcome], None]:
    return lambda out: _assert(out.doc["latency"]["e2e_s"]["count"] == n, out.doc["latency"])


def _window(prompt_per_request: float, hit_rate: float) -> Callable[[Outcome], None]:
    def check(out: Outcome) -> None:
        (window,) = out.doc["metrics"]
        assert window["total"]["prompt_tokens_per_request"] == pytest.approx(prompt_per_request)
        assert window["total"]["prefix_cache_hit_rate"] == pytest.approx(hit_rate)

    return check


def _errors(*kinds: str) -> Callable[[Outcome], None]:
    return lambda out: _assert(sorted({e["kind"] for e in out.doc["errors"]}) == sorted(kinds), out.doc["errors"])


def _listen(value: str) -> Callable[[Outcome], None]:
    return lambda out: _assert(out.doc["config"]["effective"].get("listen") == value, out.doc["config"])


# -- the table -------------------------------------------------------------------------------------
OL = "ollama/"
VL = "vllm/"
MX = "mlx/"
REAL_SCRAPES = tuple(f"vllm/metrics/real-basic-metrics-{n}.txt"
                     for n in ("1-idle-1795967515", "2-after-load-1795967518", "3-after-errors-1795967534"))
TAIL_WORST = tuple(2 + i for i in sorted(range(20), key=lambda i: -TAIL_20[i])[:8])  # GIN lines, worst first

CASES = [
    # cold-load-latency ------------------------------------------------------------------------
    fires("cold-load-latency", "real-016", fixture(OL + "016-v02x-journald-gemma4-vulkan-runner-start.log"),
          "warn", ("1 of 1 slow requests waited for a load", "median 9.0 s"), lines(4, 3)),
    fires("cold-load-latency", "real-015", fixture(OL + "015-v011-docker-embeddinggemma-second-load-v1-chat.log"),
          "warn", ("1 of 1 slow requests", "median 6.5 s"), lines(4, 3)),
    fires("cold-load-latency", "synthetic-12.5s-load", synthetic(("cold.log", COLD_CRIT)),
          "crit", ("1 of 1 slow requests waited for a load", "median 12.5 s"), lines(5, 4)),
    fires("cold-load-latency", "synthetic-load-33pct-of-latency", synthetic(("cold.log", COLD_SHARE_FIRE)),
          "warn", ("1 of 1 slow requests waited for a load", "median 3.0 s"), lines(5, 4)),
    misses("cold-load-latency", "synthetic-load-27pct-of-latency", synthetic(("cold.log", COLD_SHARE_MISS)),
           _cold(2.5, 9.089501463)),
    misses("cold-load-latency", "synthetic-request-4.95s", synthetic(("cold.log", COLD_FAST_MISS)), _cold(4.5, 4.95)),
    # eviction-thrash --------------------------------------------------------------------------
    fires("eviction-thrash", "real-012-info", fixture(OL + "012-v032-vulkan-evict-idle-runner-debug.log"),
          "info", ("1 eviction(s): embeddinggemma:latest", "nothing was loaded back within 600 s"), lines(2, 3, 4)),
    fires("eviction-thrash", "real-mlx-debug-server", fixture(MX + "debug-server.stderr"),
          "warn", ("default was evicted to load /tmp/tinymlx2", "(0.1 s)", "2 reload(s) cost 0.3 s"),
          lines(570, 630, 722, 812)),
    fires("eviction-thrash", "records-3-reloads", records(PINGPONG_3),
          "crit", ("llama3:70b was evicted to load nomic-embed-text:latest", "loaded again 60 s later (38.0 s)",
                   "3 reload(s) cost 114.6 s"), lines(10, 21, 30, 41, 50, 61)),
    fires("eviction-thrash", "records-reload-after-601s-info", records(PINGPONG_LATE),
          "info", ("1 eviction(s): llama3:70b to load nomic-embed-text:latest",), lines(10)),
    misses("eviction-thrash", "synthetic-keep-alive-expiry", synthetic(("expire.log", EXPIRE_MISS)), _expired),
    # context-not-in-effect --------------------------------------------------------------------
    fires("context-not-in-effect", "real-055", fixture(OL + "055-v02x-ctx-mismatch-user-annotated-llama-context.log"),
          "info", ("uses 4096 tokens per slot of the model's 8192",), lines(3, 1)),
    fires("context-not-in-effect", "synthetic-env-8192-runner-4096", synthetic(("ctx.log", CTX_WARN)),
          "warn", ("configured context 8192", "uses 4096 per slot"), lines(2, 3)),
    fires("context-not-in-effect", "synthetic-055-with-truncation", synthetic(("ctx.log", CTX_TRAIN_TRUNC)),
          "warn", ("4096 tokens per slot of the model's 8192", "1 prompt(s) were truncated"), lines(4, 2)),
    misses("context-not-in-effect", "synthetic-env-8192-over-2-slots", synthetic(("ctx.log", CTX_SLOTS_MISS)),
           _effective(ctx_total=16384, ctx_per_slot=8192)),
    misses("context-not-in-effect", "synthetic-full-trained-context", synthetic(("ctx.log", CTX_TRAIN_MISS)),
           _effective(ctx_per_slot=8192, n_ctx_train=8192)),
    # prompt-truncated -------------------------------------------------------------------------
    fires("prompt-truncated", "real-004", fixture(OL + "004-v06-embeddings-truncation.log"),
          "warn", ("1 prompt(s) were truncated", "5065 tokens", "limit of 2048"), lines(3)),
    fires("prompt-truncated", "real-066", fixture(OL + "066-supp-v07-journald-truncation-long-chat-latency.log"),
          "warn", ("4 prompt(s) were truncated", "617 tokens", "limit of 512",
                   "3 of the requests still returned success"), lines(1, 3, 5, 7)),
    fires("prompt-truncated", "real-045-shifted", fixture(OL + "045-v042-input-exceeds-context-shifting-debug.log"),
          "warn", ("exceeded the context and were shifted", "2458413 tokens", "limit of 20408"), lines(1)),
    misses("prompt-truncated", "synthetic-2047-of-2048", synthetic(("fits.log", TRUNC_FITS_MISS)),
           lambda out: _one_request(out, prompt_tokens=2047, truncated=False)),
    # output-dominates -------------------------------------------------------------------------
    fires("output-dominates", "synthetic-80pct-decode", synthetic(("out.log", OUTPUT_FIRE)),
          "info", ("2 of 2 slow requests", "median 460 output tokens at 42 tokens/s = 14.0 s"), lines(8, 15)),
    misses("output-dominates", "synthetic-69.6pct-decode", synthetic(("out.log", OUTPUT_SHARE_MISS)),
           lambda out: _one_request(out, output_tokens=580, itl_s=0.024, latency_s=20.0)),
    misses("output-dominates", "synthetic-8.3-tokens-per-s", synthetic(("out.log", OUTPUT_SLOW_MISS)),
           lambda out: _one_request(out, output_tokens=160, itl_s=0.12, latency_s=20.0)),
    # queueing ---------------------------------------------------------------------------------
    # The warn form cites the peak stats line and then every waiting line, so the peak appears twice
    # (001 gives [1, 1]): compared as distinct lines here; see the report on hints.py.
    fires("queueing", "real-vllm-001", fixture(VL + "001-v0-stats-line-2024-02.txt"),
          "warn", ("1 stats line(s) show waiting requests, up to 3",), lines(1), evidence_any_order=True),
    fires("queueing", "real-vllm-004", fixture(VL + "004-v0-0.6.3-stats-and-swap-preemption.txt"),
          "warn", ("2 stats line(s) show waiting requests, up to 98",), lines(1, 2), evidence_any_order=True),
    fires("queueing", "real-ollama-037", fixture(OL + "037-v0138-concurrency-gin-masked-client.log"),
          "info", ("4 requests in flight together took median 11.0 s against 7.6 s alone (1.4x)",),
          lines(2, 3, 4, 5), evidence_any_order=True),
    misses("queueing", "real-vllm-012-running-8-waiting-0", fixture(VL + "012-v1-0.10-stats-lines-glued.txt"),
           _stats(0.919)),
    misses("queueing", "synthetic-037-shape-1.26x", synthetic(("conc.log", QUEUE_MILD_MISS)),
           lambda out: _assert(len(out.doc["requests"]) == 5, out.doc["requests"])),
    misses("queueing", "synthetic-037-shape-2-in-flight", synthetic(("pair.log", QUEUE_PAIR_MISS)),
           lambda out: _assert(len(out.doc["requests"]) == 3, out.doc["requests"])),
    # kv-pressure ------------------------------------------------------------------------------
    # 012's line 2 holds two stats records glued together: both are evidence.
    fires("kv-pressure", "real-vllm-012", fixture(VL + "012-v1-0.10-stats-lines-glued.txt"),
          "warn", ("KV cache at 92% in 3 stats line(s)",), lines(1, 2, 2)),
    fires("kv-pressure", "real-vllm-004-preemption", fixture(VL + "004-v0-0.6.3-stats-and-swap-preemption.txt"),
          "warn", ("1 preemption warning(s)",), lines(3)),
    # Evidence from /metrics: the two saved scrape files the window was computed from.
    fires("kv-pressure", "synthetic-metrics-kv-95pct", scrapes("kv", KV_METRICS_FIRE),
          "warn", ("/metrics: KV 95%, 4 preemptions",), ((0, 1), (1, 1))),
    misses("kv-pressure", "synthetic-vllm-012-shape-89.9pct", synthetic(("stats.txt", VLLM_KV_MISS)),
           _stats(0.899)),
    misses("kv-pressure", "real-vllm-metrics-scrapes",
           fixture(*REAL_SCRAPES),
           _window(139.25, 256 / 1671)),
    # partial-offload --------------------------------------------------------------------------
    fires("partial-offload", "real-009", fixture(OL + "009-v07-two-gpu-ollama-engine-tensor-split.log"),
          "warn", ("sha256-1fb99eda86dc put 37 of 49 layers on the GPU",), lines(2)),
    fires("partial-offload", "real-060-cpu-fallback", fixture(OL + "060-v0140-journald-offload-to-gpu-old-fields-cpu-fallback.log"),
          "warn", ("put no layer (a CPU fallback) on the GPU",), lines(2)),
    misses("partial-offload", "real-034-41-of-41", fixture(OL + "034-v011-dev-new-memory-two-gpu-ollama-engine.log"),
           _offload(41, 41)),
    misses("partial-offload", "synthetic-009-shape-49-of-49", synthetic(("offload.log", OFFLOAD_FULL_MISS)),
           _offload(49, 49)),
    # low-util-high-latency (gpu_util comes from the live GPU panel: a context, not a log) -------
    fires("low-util-high-latency", "context-25pct-6s", records(gpu_util=0.25, p50=6.0),
          "info", ("GPU busy 25% while median latency is 6.0 s",), ()),
    misses("low-util-high-latency", "context-30pct-6s", records(gpu_util=0.30, p50=6.0)),
    misses("low-util-high-latency", "context-25pct-4.9s", records(gpu_util=0.25, p50=4.9)),
    # A 9.4 s median and no GPU sample: `ietop analyze` has no gpu_util, so the rule cannot fire there.
    misses("low-util-high-latency", "real-016-no-gpu-util", fixture(OL + "016-v02x-journald-gemma4-vulkan-runner-start.log")),
    # tail-latency -----------------------------------------------------------------------------
    fires("tail-latency", "synthetic-20-requests", synthetic(("tail.log", TAIL_FIRE)),
          "warn", ("over 20 requests",), lines(*TAIL_WORST), detail_re=r"^p99 \d+\.\d s is \d+x the median 1\.\d s "),
    fires("tail-latency", "context-exactly-5x", records(p50=1.0, p99=5.0, latency_count=20),
          "warn", ("p99 5.0 s is 5x the median 1.0 s over 20 requests",), ()),
    misses("tail-latency", "synthetic-19-requests", synthetic(("tail.log", TAIL_19_MISS)), _latency_count(19)),
    misses("tail-latency", "real-mlx-debug-14-requests", fixture(MX + "debug-server.stderr"), _latency_count(14)),
    misses("tail-latency", "context-4.99x", records(p50=1.0, p99=4.99, latency_count=20)),
    # load-failure -----------------------------------------------------------------------------
    fires("load-failure", "real-052", fixture(OL + "052-v012-windows-load-failed-ggml-assert.log"),
          "crit", ("1 failure line(s) (runner_crash)", "GGML_ASSERT(ggml_nbytes(src0) <= INT_MAX)"), lines(8)),
    fires("load-failure", "real-061", fixture(OL + "061-v01x-2023-jetson-golog-gin-runner-cuda-error.log"),
          "crit", ("1 failure line(s) (runner_crash)", "CUDA error 801"), lines(10, 4)),
    fires("load-failure", "real-mlx-003", fixture(MX + "003-mlx-lm-831-generate-thread-exception-distributed.txt"),
          "crit", ("(engine_dead)", "generation thread died (Thread-2)"), lines(1)),
    fires("load-failure", "real-mlx-004", fixture(MX + "004-mlx-lm-1513-generate-thread-metal-malloc.txt"),
          "crit", ("(engine_dead)", "generation thread died (Thread-1)"), lines(1)),
    fires("load-failure", "real-vllm-021-oom", fixture(VL + "021-v1-0.11-cuda-oom.txt"),
          "crit", ("(oom)", "CUDA out of memory. Tried to allocate 232.00 MiB"), lines(1)),
    fires("load-failure", "real-vllm-kv-too-small", fixture(VL + "real-kv-too-small-server.log"),
          "crit", ("2 failure line(s) (load_failed)", "max seq len 300000 needs 1.14 GiB of KV cache"),
          lines(52, 109, 41)),
    misses("load-failure", "real-051-load-cancelled-by-client", fixture(OL + "051-v05-journald-nohost-markdown-bold-abort-499.log"),
           _errors("client_abort", "load_failed")),
    misses("load-failure", "real-vllm-basic-shutdown", fixture(VL + "real-basic-server.log"), _errors("other")),
    # client-timeout-during-load ---------------------------------------------------------------
    fires("client-timeout-during-load", "real-051", fixture(OL + "051-v05-journald-nohost-markdown-bold-abort-499.log"),
          "warn", ("1 client abort(s) during a load",), lines(1, 3)),
    misses("client-timeout-during-load", "real-mlx-debug-broken-pipe", fixture(MX + "debug-server.stderr"),
           lambda out: _assert(any(e["kind"] == "client_abort" for e in out.doc["errors"]), out.doc["errors"])),
    misses("client-timeout-during-load", "synthetic-abort-after-load", synthetic(("abort.log", ABORT_WARM_MISS)),
           lambda out: _assert([r["status"] for r in out.doc["requests"]] == [200, 499], out.doc["requests"])),
    # low-prefix-cache-hits --------------------------------------------------------------------
    fires("low-prefix-cache-hits", "synthetic-scrapes-7pct-600-tokens", scrapes("low", PREFIX_FIRE),
          "info", ("7% hit rate with 600 prompt tokens per request",), ((0, 1), (1, 1))),
    misses("low-prefix-cache-hits", "synthetic-scrapes-500-tokens", scrapes("short", PREFIX_SHORT_MISS),
           _window(500.0, 0.07)),
    misses("low-prefix-cache-hits", "synthetic-scrapes-10pct", scrapes("hits", PREFIX_HITS_MISS), _window(600.0, 0.1)),
    misses("low-prefix-cache-hits", "real-vllm-metrics-scrapes",
           fixture(*REAL_SCRAPES),
           _window(139.25, 256 / 1671)),
    # engine-exposed ---------------------------------------------------------------------------
    fires("engine-exposed", "real-010", fixture(OL + "010-v03-journald-startup-server-config.log"),
          "warn", ("listening on http://0.0.0.0:11434",), lines(2)),
    fires("engine-exposed", "real-058", fixture(OL + "058-v03-docker-compose-first-run-keygen-startup.log"),
          "warn", ("listening on http://0.0.0.0:11434",), lines(6)),
    fires("engine-exposed", "synthetic-vllm-0.0.0.0", synthetic(("vllm.log", VLLM_EXPOSED)),
          "warn", ("listening on http://0.0.0.0:18000",), lines(2)),
    misses("engine-exposed", "real-031-127.0.0.1", fixture(OL + "031-v0511-macos-startup-config.log"),
           _listen("127.0.0.1:11434")),
    misses("engine-exposed", "real-vllm-basic-127.0.0.1", fixture(VL + "real-basic-server.log"),
           _listen("http://127.0.0.1:18000")),
]


@pytest.mark.parametrize("case", CASES)
def test_hint_table(case: Case, tmp_path: Path) -> None:
    out = case.source(tmp_path)
    by_id = {h["id"]: h for h in out.hints}
    assert len(by_id) == len(out.hints), "a rule fired twice"
    if case.check is not None:
        case.check(out)
    if not case.fires:
        assert case.hint not in by_id, by_id.get(case.hint)
        return
    assert case.hint in by_id, f"fired: {sorted(by_id)}"
    hint = by_id[case.hint]
    assert hint["severity"] == case.severity
    for part in case.detail:
        assert part in hint["detail"]
    if case.detail_re is not None:
        assert re.search(case.detail_re, hint["detail"]), hint["detail"]
    assert hint["title"] and hint["causes"] and hint["next"]
    got = [(out.paths.index(ev["path"]), ev["line"]) for ev in hint["evidence"]]
    want = list(case.evidence or ())
    if case.evidence_any_order:
        assert sorted(set(got)) == sorted(set(want))
    else:
        assert got == want


def test_table_has_a_firing_case_and_a_near_miss_for_every_hint() -> None:
    table = [p.values[0] for p in CASES]
    assert {c.hint for c in table if c.fires} == set(HINT_IDS)
    assert {c.hint for c in table if not c.fires} == set(HINT_IDS)


def test_no_rule_fires_on_nothing() -> None:
    engine = HintEngine()
    ctx = HintContext({}, {}, {}, {})
    for rule in RULES:
        assert rule(engine.seen, ctx) is None, rule.__name__
    assert engine.evaluate(ctx) == []


def test_hint_ids_are_the_design_table() -> None:
    if not DESIGN.is_file():
        pytest.skip(f"{DESIGN} is not part of this checkout")
    text = DESIGN.read_text()
    section = text.split("## Diagnostic hints", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert rows[0].split("|")[1].strip() == "id" and set(rows[1]) <= set("|-: ")
    ids = [re.fullmatch(r"`([a-z-]+)`", row.split("|")[1].strip()) for row in rows[2:]]
    assert all(ids), rows
    assert tuple(m.group(1) for m in ids if m) == HINT_IDS


def test_hint_ids_are_the_readme_list() -> None:
    section = (ROOT / "README.md").read_text().split("## Diagnostic hints", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"`([a-z-]+)`", section.split("Stable ids:", 1)[1].split(". Each", 1)[0])
    assert tuple(listed) == HINT_IDS
