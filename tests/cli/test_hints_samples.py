"""Every sample whose INDEX describes a symptom fires the matching hint, with evidence on the lines that
show it; clean logs fire none. Runs `ietop analyze --json` as a user would, on the real fixtures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ietop.cli import main

FIX = Path(__file__).resolve().parents[2] / "fixtures"

# sample → (hint id, substrings of which every evidence line must contain one)
SYMPTOMS: list[tuple[str, str, tuple[str, ...]]] = [
    ("ollama/004-v06-embeddings-truncation.log", "prompt-truncated", ("truncating input prompt",)),
    ("ollama/007-v05-truncation-gin-api-ps-polling.log", "prompt-truncated", ("truncating input prompt",)),
    ("ollama/045-v042-input-exceeds-context-shifting-debug.log", "prompt-truncated", ("input exceeds context",)),
    ("ollama/066-supp-v07-journald-truncation-long-chat-latency.log", "prompt-truncated", ("truncating input prompt",)),
    ("ollama/067-supp-v05-docker-generate-truncation-gin.log", "prompt-truncated", ("truncating input prompt",)),
    ("ollama/055-v02x-ctx-mismatch-user-annotated-llama-context.log", "context-not-in-effect",
     ("n_ctx", "n_ctx_train")),
    ("ollama/012-v032-vulkan-evict-idle-runner-debug.log", "eviction-thrash",
     ("evicting", "found an idle runner to unload", "resetting model to expire immediately")),
    ("ollama/052-v012-windows-load-failed-ggml-assert.log", "load-failure", ("GGML_ASSERT",)),
    # The CUDA error, and the launch of the load it broke.
    ("ollama/061-v01x-2023-jetson-golog-gin-runner-cuda-error.log", "load-failure", ("CUDA error", "starting llama runner")),
    ("ollama/051-v05-journald-nohost-markdown-bold-abort-499.log", "client-timeout-during-load",
     ("client connection closed", "| 499 |")),
    ("ollama/015-v011-docker-embeddinggemma-second-load-v1-chat.log", "cold-load-latency",
     ("[GIN]", "started in")),
    ("ollama/009-v07-two-gpu-ollama-engine-tensor-split.log", "partial-offload", ("offload",)),
    ("ollama/060-v0140-journald-offload-to-gpu-old-fields-cpu-fallback.log", "partial-offload", ("offload",)),
    ("ollama/037-v0138-concurrency-gin-masked-client.log", "queueing", ("[GIN]",)),
    ("ollama/058-v03-docker-compose-first-run-keygen-startup.log", "engine-exposed", ("0.0.0.0",)),
    ("vllm/001-v0-stats-line-2024-02.txt", "queueing", ("Pending: 3",)),
    ("vllm/004-v0-0.6.3-stats-and-swap-preemption.txt", "queueing", ("Pending: 98",)),
    ("vllm/004-v0-0.6.3-stats-and-swap-preemption.txt", "kv-pressure", ("preempted", "KV cache usage")),
    ("vllm/012-v1-0.10-stats-lines-glued.txt", "kv-pressure", ("KV cache usage: 9",)),
    ("vllm/018-v1-0.15-error-kv-cache-too-small.txt", "load-failure", ("KV cache",)),
    ("vllm/019-v1-cpu-backend-error-kv-cache-too-small.txt", "load-failure", ("KV cache",)),
    ("vllm/021-v1-0.11-cuda-oom.txt", "load-failure", ("OutOfMemoryError", "out of memory")),
    # The KV shortfall, the API server's traceback (its header line) and the failed engine start.
    ("vllm/real-kv-too-small-server.log", "load-failure", ("KV cache", "failed to start", "Traceback", "Starting to load model")),
    ("mlx/003-mlx-lm-831-generate-thread-exception-distributed.txt", "load-failure", ("Exception in thread",)),
    ("mlx/004-mlx-lm-1513-generate-thread-metal-malloc.txt", "load-failure", ("Exception in thread",)),
]
CLEAN = [
    "ollama/001-v032-vulkan-startup-discovery-debug.log", "ollama/022-v057-windows-startup-golog-config.log",
    "ollama/031-v0511-macos-startup-config.log", "ollama/057-v03-docker-desktop-healthcheck-polling-tz-mismatch.log",
    "ollama/049-v04-journald-debug-load-done-request-idle-timer.log", "vllm/013-v1-0.12-stats-and-prefixed-access-log.txt",
    "vllm/009-v1-0.10-startup-kv-cache-size.txt", "vllm/real-basic-server.log",
    "mlx/006-turboquant-mlx-11-stock-0.31-info-log.txt", "mlx/info-no-hf-cache-server.stderr",
]


def hints_of(rel: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    assert main(["analyze", str(FIX / rel), "--json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    hints: list[dict[str, Any]] = doc["hints"]
    return hints


@pytest.mark.parametrize(("rel", "hint_id", "markers"), SYMPTOMS, ids=[f"{s[0]}-{s[1]}" for s in SYMPTOMS])
def test_symptom_fires_its_hint_with_evidence(rel: str, hint_id: str, markers: tuple[str, ...],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    hints = {h["id"]: h for h in hints_of(rel, capsys)}
    assert hint_id in hints, f"{rel}: got {sorted(hints)}"
    hint = hints[hint_id]
    assert hint["detail"] and hint["next"] and hint["causes"]
    # Split on \n only, as ietop and grep count lines (tqdm bars in vLLM logs carry lone \r).
    lines = (FIX / rel).read_bytes().decode(errors="replace").split("\n")
    assert hint["evidence"], "a hint without evidence is a verdict"
    for ev in hint["evidence"]:
        assert ev["path"] == str(FIX / rel)
        text = lines[ev["line"] - 1]
        assert any(m in text for m in markers), f"line {ev['line']} is not evidence of {hint_id}: {text[:160]}"


@pytest.mark.parametrize("rel", CLEAN)
def test_clean_logs_fire_no_hint(rel: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert hints_of(rel, capsys) == []
