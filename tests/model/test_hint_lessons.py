"""The three field lessons of seeds/000 as scenarios. The logs are SYNTHETIC (labelled in their first
line), assembled from real Ollama line shapes (E4 runner lines as in samples 006/015, DEBUG scheduler
lines as in 012, E5 llama-server timing lines as in 019) with the numbers of each story."""

from __future__ import annotations

from pathlib import Path

from ietop.analyze.report import Analysis
from ietop.model.hints import Hint

BLOB_CHAT = "/usr/share/ollama/.ollama/models/blobs/sha256-6a0746a1ec1aef3e7ec53868f220ff6e389f6f8ef87a01d77c96807de94ca2aa"
BLOB_EMBED = "/usr/share/ollama/.ollama/models/blobs/sha256-970aa74c0a90ef7482477cf803618e776e173c007bf957f635f1015bfcfef0e6"


def run(tmp_path: Path, name: str, text: str) -> tuple[dict[str, Hint], list[str]]:
    path = tmp_path / name
    path.write_text(text)
    an = Analysis([str(path)])
    try:
        return {h.id: h for h in an.hints}, text.split("\n")
    finally:
        an.close()


def evidence_lines(hint: Hint, lines: list[str]) -> list[str]:
    return [lines[r.line - 1] for r in hint.evidence]


LESSON_CONTEXT = f"""\
time=2025-09-01T10:00:00.000Z level=INFO source=bench msg="SYNTHETIC ietop test log: lesson 1, a context setting present but not in effect"
time=2025-09-01T10:00:00.100Z level=INFO source=routes.go:1290 msg="server config" env="map[OLLAMA_CONTEXT_LENGTH:16384 OLLAMA_KEEP_ALIVE:5m0s OLLAMA_MAX_LOADED_MODELS:0 OLLAMA_NUM_PARALLEL:1]"
time=2025-09-01T10:01:00.000Z level=INFO source=server.go:398 msg="starting runner" cmd="/usr/bin/ollama runner --ollama-engine --model {BLOB_CHAT} --port 35901"
time=2025-09-01T10:01:00.500Z level=INFO source=runner.go:1250 msg=load request="{{Operation:commit LoraPath:[] Parallel:1 BatchSize:512 FlashAttention:Enabled KvSize:4096 KvCacheType: NumThreads:8 GPULayers:33[ID:0 Layers:33(0..32)] MultiUserCache:false}}"
time=2025-09-01T10:01:03.200Z level=INFO source=server.go:1288 msg="llama runner started in 3.20 seconds"
time=2025-09-01T10:01:03.300Z level=WARN source=runner.go:128 msg="truncating input prompt" limit=4096 prompt=9000 keep=4 new=4096
[GIN] 2025/09/01 - 10:01:15 | 200 |  15.012345s |       127.0.0.1 | POST     "/api/chat"
"""


def test_lesson_context_present_but_not_in_effect(tmp_path: Path) -> None:
    hints, lines = run(tmp_path, "ctx.log", LESSON_CONTEXT)
    hint = hints["context-not-in-effect"]
    assert hint.severity == "warn"
    assert "configured context 16384" in hint.detail and "4096 per slot" in hint.detail
    ev = evidence_lines(hint, lines)
    assert any("server config" in line for line in ev) and any("KvSize:4096" in line for line in ev)
    assert "prompt-truncated" in hints  # and the consequence: 9000 tokens cut to 4096


def _evict(ts: str, victim_name: str, victim_blob: str) -> str:
    return (f'time={ts} level=INFO source=sched.go:200 msg="model requires more gpu memory than is currently '
            f'available, evicting a model to make space" "loaded layers"=81\n'
            f'time={ts} level=DEBUG source=sched.go:339 msg="resetting model to expire immediately to make room" '
            f'runner.name=registry.ollama.ai/library/{victim_name} runner.model={victim_blob} runner.num_ctx=8192 '
            f"refCount=0\n")


LESSON_EVICT = (
    'time=2025-09-01T09:00:00.000Z level=INFO source=bench msg="SYNTHETIC ietop test log: lesson 2, '
    'the embedder evicts the chat model and the chat model pays a reload"\n'
    f'time=2025-09-01T09:00:01.000Z level=INFO source=server.go:398 msg="starting runner" cmd="/usr/bin/ollama runner --model {BLOB_CHAT} --port 40001"\n'
    'time=2025-09-01T09:00:39.000Z level=INFO source=server.go:1288 msg="llama runner started in 38.00 seconds"\n'
    '[GIN] 2025/09/01 - 09:00:45 | 200 |  44.500000s |       127.0.0.1 | POST     "/api/chat"\n'
    + _evict("2025-09-01T09:02:00.000Z", "llama3:70b", BLOB_CHAT)
    + f'time=2025-09-01T09:02:00.100Z level=INFO source=server.go:398 msg="starting runner" cmd="/usr/bin/ollama runner --model {BLOB_EMBED} --port 40002"\n'
    'time=2025-09-01T09:02:01.600Z level=INFO source=server.go:1288 msg="llama runner started in 1.50 seconds"\n'
    '[GIN] 2025/09/01 - 09:02:02 | 200 |   1.900000s |       127.0.0.1 | POST     "/api/embed"\n'
    + _evict("2025-09-01T09:03:00.000Z", "nomic-embed-text:latest", BLOB_EMBED)
    + f'time=2025-09-01T09:03:00.100Z level=INFO source=server.go:398 msg="starting runner" cmd="/usr/bin/ollama runner --model {BLOB_CHAT} --port 40003"\n'
    'time=2025-09-01T09:03:38.300Z level=INFO source=server.go:1288 msg="llama runner started in 38.20 seconds"\n'
    '[GIN] 2025/09/01 - 09:03:44 | 200 |  44.100000s |       127.0.0.1 | POST     "/api/chat"\n'
)


def test_lesson_embedder_evicts_the_chat_model(tmp_path: Path) -> None:
    hints, lines = run(tmp_path, "evict.log", LESSON_EVICT)
    hint = hints["eviction-thrash"]
    assert hint.severity == "warn"
    # Both models named, and what the reload cost.
    assert "llama3:70b was evicted to load nomic-embed-text:latest" in hint.detail
    assert "(38.2 s)" in hint.detail
    ev = evidence_lines(hint, lines)
    assert any("resetting model to expire immediately" in line and "llama3:70b" in line for line in ev)
    assert any("started in 38.20 seconds" in line for line in ev)
    cold = hints["cold-load-latency"]  # and the requests that paid for it
    assert "2 of 2 slow requests waited for a load" in cold.detail


def _request(n: int, start: str, end: str, latency: str, out_tokens: int, eval_ms: float) -> str:
    return (f'time={start} level=DEBUG source=sched.go:600 msg="evaluating already loaded" model={BLOB_CHAT}\n'
            f"slot launch_slot_: id  0 | task {n} | processing task, is_child = 0\n"
            f"slot update_slots: id  0 | task {n} | new prompt, n_ctx_slot = 8192, n_keep = 4, task.n_tokens = 120\n"
            f"slot print_timing: id  0 | task {n} | prompt eval time =      80.00 ms /   120 tokens (    0.67 ms per token,  1500.00 tokens per second)\n"
            f"slot print_timing: id  0 | task {n} |        eval time = {eval_ms:10.2f} ms / {out_tokens:5d} tokens (   24.00 ms per token,    41.67 tokens per second)\n"
            f"slot      release: id  0 | task {n} | stop processing: n_tokens = {120 + out_tokens}, truncated = 0\n"
            f'[GIN] {end} | 200 | {latency} |       127.0.0.1 | POST     "/api/chat"\n')


LESSON_OUTPUT = (
    'time=2026-07-01T10:00:00.000Z level=INFO source=bench msg="SYNTHETIC ietop test log: lesson 3, '
    'latency blamed on model speed is output length"\n'
    + _request(1, "2026-07-01T10:00:00.000Z", "2026/07/01 - 10:00:19", "19.500000s", 800, 19200.0)
    + _request(2, "2026-07-01T10:01:00.000Z", "2026/07/01 - 10:01:29", "29.300000s", 1200, 28800.0)
    + _request(3, "2026-07-01T10:02:00.000Z", "2026/07/01 - 10:02:24", "24.400000s", 1000, 24000.0)
)


def test_lesson_latency_is_output_length(tmp_path: Path) -> None:
    hints, lines = run(tmp_path, "output.log", LESSON_OUTPUT)
    hint = hints["output-dominates"]
    assert "3 of 3 slow requests" in hint.detail
    assert "median 1000 output tokens at 42 tokens/s = 24.4 s" in hint.detail
    assert all("[GIN]" in line for line in evidence_lines(hint, lines))
    assert "cold-load-latency" not in hints and "tail-latency" not in hints


def test_hints_clear_when_the_symptom_leaves_the_window(tmp_path: Path) -> None:
    """The dashboard evaluates hints over a recent window: a truncation an hour ago no longer fires."""
    log = tmp_path / "window.log"
    log.write_text(LESSON_CONTEXT)
    an = Analysis([str(log)])
    try:
        ctx = an.hint_context()
        hour_later = _last_t(an) + 3600
        assert "prompt-truncated" in {h.id for h in an.hint_engine.evaluate(ctx)}
        assert "prompt-truncated" not in {h.id for h in an.hint_engine.evaluate(ctx, since=hour_later)}
    finally:
        an.close()


def _last_t(an: Analysis) -> float:
    return max(r.t_end for r in an.hint_engine.seen.requests)
