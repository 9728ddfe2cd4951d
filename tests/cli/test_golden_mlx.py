"""Golden tests: `ietop analyze --json` on the real mlx_lm.server 0.32.2 logs agrees with the client's own
transcript of the same run (fixtures/mlx/README.md): the prompt size (the uncached part at INFO, the
full count from the DEBUG usage blocks), output tokens, TTFT and ITL, and the model switches.

The transcript is ground truth measured by the client: usage blocks from the responses and, for
streams, the arrival time of every SSE chunk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ietop.cli import main

MLX = Path(__file__).resolve().parents[2] / "fixtures" / "mlx"


def load_transcript(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (MLX / name).read_text().splitlines() if line.strip()]


def usage_of(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The usage block the client received: the JSON body, or the last SSE chunk carrying one."""
    resp = entry.get("response")
    if isinstance(resp, dict) and "usage" in resp:
        u: dict[str, Any] = resp["usage"]
        return u
    for chunk in reversed(entry.get("sse") or []):
        line = chunk["line"]
        if line.startswith("data: {") and '"usage"' in line:
            found: dict[str, Any] = json.loads(line[6:])["usage"]
            return found
    return None


def content_times(entry: dict[str, Any]) -> list[float]:
    """Client arrival times (s after t_start) of SSE chunks that carry generated text."""
    times = []
    for chunk in entry.get("sse") or []:
        line = chunk["line"]
        if not line.startswith("data: {"):
            continue
        choices = json.loads(line[6:]).get("choices") or []
        if choices and (choices[0].get("delta", {}).get("content") or choices[0].get("text")):
            times.append(chunk["t"])
    return times


def analyze(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["analyze", str(path), "--json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def close(got: float | None, want: float) -> bool:
    return got is not None and (abs(got - want) <= 0.05 or abs(got - want) <= 0.1 * want)


def posts(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in doc["requests"] if r["method"] == "POST"]


def test_debug_run_matches_the_transcript(capsys: pytest.CaptureFixture[str]) -> None:
    doc = analyze(MLX / "debug-server.stderr", capsys)
    assert doc["sources"][0]["engine"] == "mlx"
    assert doc["sources"][0]["version"] == "0.32.2"
    assert doc["sources"][0]["unparsed_lines"] == 0
    truth = [e for e in load_transcript("debug-transcript.jsonl") if e.get("method") == "POST" and "t_start" in e]
    got = posts(doc)
    # The log also has the bad-JSON request (400) and the client that disconnected mid-stream (200),
    # which the transcript records without a method.
    assert sorted(r["status"] for r in got) == sorted([e["status"] for e in truth] + [400, 200])

    checked_prompt = checked_ttft = checked_itl = 0
    sequential = [e for e in truth if not e["name"].startswith("concurrent") and e["status"] == 200]
    got_ok = [r for r in got if r["status"] == 200 and r["inference"]]
    # Admission order: 8 sequential requests, the 4 concurrent ones, the rest, the disconnected stream.
    concurrent_got = got_ok[8:12]
    seq_got = got_ok[:8] + got_ok[12:-1]
    assert len(seq_got) == len(sequential)
    for entry, req in zip(sequential, seq_got, strict=True):
        usage = usage_of(entry)
        if usage is not None:
            cached = usage["prompt_tokens_details"]["cached_tokens"]
            assert req["prefill_tokens"] == usage["prompt_tokens"] - cached, entry["name"]
            if isinstance(entry.get("response"), dict):  # the log has the usage of non-stream responses
                assert req["prompt_tokens"] == usage["prompt_tokens"], entry["name"]
                assert req["cached_tokens"] == cached, entry["name"]
                assert req["output_tokens"] == usage["completion_tokens"], entry["name"]
                assert req["prompt_tokens_source"] == "log"
            checked_prompt += 1
        if entry.get("client_ttft_s") is not None:
            assert close(req["ttft_s"], entry["client_ttft_s"]), (entry["name"], req["ttft_s"], entry["client_ttft_s"])
            checked_ttft += 1
            times = content_times(entry)
            if len(times) >= 3 and req["itl_s"] is not None:
                client_itl = (times[-1] - times[0]) / (len(times) - 1)
                assert close(req["itl_s"], client_itl), (entry["name"], req["itl_s"], client_itl)
                checked_itl += 1
    assert checked_prompt >= 10 and checked_ttft >= 3 and checked_itl >= 3

    # The concurrent block: four requests admitted in the same milliseconds, whose progress lines carry no id.
    # Which denominator is whose cannot be told (admission order is not evidence of it), so a row states a
    # size only where it is provable, and never one that is not some request's of the block.
    conc_truth = [
        usage["prompt_tokens"] - usage["prompt_tokens_details"]["cached_tokens"]
        for e in truth if e["name"].startswith("concurrent") and (usage := usage_of(e)) is not None
    ]
    assert len(concurrent_got) == len(conc_truth) == 4
    stated = [r["prefill_tokens"] for r in concurrent_got if r["prefill_tokens"] is not None]
    assert all(n in conc_truth for n in stated), (stated, conc_truth)


def test_debug_run_model_switches(capsys: pytest.CaptureFixture[str]) -> None:
    """tinymlx2 by path, back to the default, then a repo id: each is an unload plus a load."""
    doc = analyze(MLX / "debug-server.stderr", capsys)
    ok_loads = [ld for ld in doc["loads"] if ld["ok"]]
    models = [ld["model"] for ld in ok_loads]
    assert models[:2] == ["/tmp/tinymlx2", "default"]
    assert "mlx-community/Tiny-Llama-Test-4bit" in models
    first = ok_loads[0]
    assert 0.1 < first["duration_s"] < 0.3  # 147 ms arrival→admission gap in the run's analysis
    assert first["trigger_request"] is not None
    switched = [u for u in doc["unloads"] if u["reason"] == "switched"]
    assert switched[0]["model"] == "default" and switched[0]["for_model"] == "/tmp/tinymlx2"
    assert switched[1]["model"] == "/tmp/tinymlx2" and switched[1]["for_model"] == "default"
    failed = [ld for ld in doc["loads"] if ld["status"] == "failed"]
    assert [ld["model"] for ld in failed] == ["mlx-community/DoesNotExist-4bit"]
    cold = [r for r in posts(doc) if r["cold_load"]]
    assert len(cold) >= 3 and all(r["load_s"] for r in cold)


def test_info_run_uncached_prompt_size(capsys: pytest.CaptureFixture[str]) -> None:
    """At INFO only the uncached part is logged: prefill_tokens = prompt_tokens − cached_tokens."""
    doc = analyze(MLX / "info-no-hf-cache-server.stderr", capsys)
    assert doc["sources"][0]["unparsed_lines"] == 0
    truth = [e for e in load_transcript("info-no-hf-cache-transcript.jsonl")
             if e.get("method") == "POST" and e.get("status") == 200 and not e["name"].startswith("concurrent")]
    got = [r for r in posts(doc) if r["status"] == 200 and r["prefill_tokens"] is not None]
    checked = 0
    for entry in truth:
        usage = usage_of(entry)
        if usage is None:
            continue
        want = usage["prompt_tokens"] - usage["prompt_tokens_details"]["cached_tokens"]
        assert want in [r["prefill_tokens"] for r in got], entry["name"]
        checked += 1
    assert checked >= 8
    # INFO has no usage and no token lines: nothing else is claimed.
    assert all(r["prompt_tokens"] is None and r["ttft_s"] is None for r in got)
    assert any(e["kind"] == "other" for e in doc["errors"])  # the /v1/models crash without an HF cache
