"""The bundled demo incident (`ietop/demo/incident.log`): `ietop analyze --json` finds in it everything the
dashboard panels need (loads with their triggers, evictions, truncations, per-request prompt size and
timings, configured-versus-effective context, hints), and `make_incident.py` rebuilds it byte for byte.

Counts are lower bounds (a better join may find more); the facts the story is built on are exact.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "ietop" / "demo"
INCIDENT = DEMO / "incident.log"
QWEN3, GEMMA3 = "qwen3:8b", "gemma3:27b"


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "ietop", "analyze", "--json", str(INCIDENT)], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    parsed: dict[str, Any] = json.loads(out.stdout)
    return parsed


def inference(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in doc["requests"] if r["inference"]]


def test_make_incident_reproduces_the_committed_log(tmp_path: Path) -> None:
    out = tmp_path / "incident.log"
    subprocess.run([sys.executable, str(DEMO / "make_incident.py"), "--out", str(out)], check=True, cwd=tmp_path)
    assert out.read_bytes() == INCIDENT.read_bytes()


def test_every_line_parses_as_one_v032_log(doc: dict[str, Any]) -> None:
    (source,) = doc["sources"]
    assert source["engine"] == "ollama"
    assert source["version"] == "0.32.13"
    assert source["format"].startswith("E5")
    assert source["unparsed_lines"] == 0
    assert source["lines"] >= 600
    assert doc["counts"]["gpus"] == 1


def test_loads_have_durations_and_triggers(doc: dict[str, Any]) -> None:
    ok = [ld for ld in doc["loads"] if ld["status"] == "ok"]
    assert len(ok) >= 3
    assert doc["counts"]["loads_ok"] >= 3
    assert [ld["duration_s"] for ld in ok] == [4.17, 12.41, 2.86]
    assert [(ld["ctx"], ld["parallel"]) for ld in ok] == [(8192, 2), (16384, 2), (8192, 2)]
    for ld in ok:
        assert ld["trigger_request"] is not None
        assert ld["model"] is not None
    assert [ld["trigger_request"]["path"] for ld in ok] == ["/api/chat", "/api/chat", "/api/generate"]
    assert ok[0]["queued_requests"] >= 1  # the second chat waited for the first load too
    # The load the IDE agent gave up on: failed, its trigger the 499.
    (aborted,) = [ld for ld in doc["loads"] if ld["status"] == "failed"]
    assert aborted["trigger_request"]["latency_s"] == pytest.approx(10.191)


def test_evictions_name_victim_and_beneficiary(doc: dict[str, Any]) -> None:
    evictions = [u for u in doc["unloads"] if u["reason"] == "evicted"]
    assert len(evictions) >= 2
    assert all(u["for_model"] for u in evictions)
    assert [u["model"] for u in evictions[:2]] == [QWEN3, GEMMA3]
    assert [u["num_ctx"] for u in evictions[:2]] == [4096, 8192]
    assert evictions[0]["for_model"] != evictions[1]["for_model"]
    expired = [u for u in doc["unloads"] if u["reason"] == "expired"]
    assert [u["model"] for u in expired] == [QWEN3]
    assert expired[0]["time"].startswith("2026-11-28T14:12:")


def test_truncations(doc: dict[str, Any]) -> None:
    truncs = doc["truncations"]
    assert len(truncs) >= 2
    assert doc["counts"]["truncations"] >= 2
    assert [t["prompt"] for t in truncs] == [6112, 9840, 7321, 5321]
    assert {(t["limit"], t["keep"], t["new"]) for t in truncs} == {(2050, 4, 2050)}
    truncated = [r for r in inference(doc) if r["truncated"]]
    assert [r["prompt_tokens"] for r in truncated] == [6112, 9840, 7321, 5321]
    assert all(r["prefill_tokens"] == 2050 for r in truncated)


def test_requests_carry_prompt_size_and_timings(doc: dict[str, Any]) -> None:
    reqs = inference(doc)
    assert len(reqs) >= 15
    assert doc["counts"]["inference_requests"] >= 15
    timed = [r for r in reqs if r["prompt_tokens"] and r["ttft_s"] is not None and r["itl_s"] is not None]
    assert len(timed) >= 15
    assert len(timed) * 5 >= len(reqs) * 4  # most of them
    for r in timed:
        assert 0 < r["ttft_s"] < 2
        assert 0.005 < r["itl_s"] < 0.05
    slow = [r for r in reqs if r["latency_s"] and r["latency_s"] >= 20]
    assert len(slow) >= 3
    # Continued conversations read their prefix from the slot's cache.
    assert [r["cached_tokens"] for r in reqs if r["cached_tokens"]] == [698, 2490, 744, 329]
    (abort,) = [r for r in reqs if r["status"] == 499]
    assert abort["time"] == "2026-11-28T14:03:15+00:00"


def test_requests_that_waited_for_a_load_are_cold(doc: dict[str, Any]) -> None:
    cold = [r for r in inference(doc) if r["cold_load"]]
    assert len(cold) >= 4
    by_time = {r["time"][11:19]: r for r in cold}
    assert by_time["14:01:19"]["load_s"] == 4.17
    assert by_time["14:03:49"]["load_s"] == 12.41
    assert by_time["14:03:49"]["latency_s"] > 30
    assert by_time["14:05:48"]["load_s"] == 2.86
    assert "14:01:23" in by_time  # queued behind the first load
    assert not any(r["cold_load"] for r in inference(doc) if r["status"] == 499)


def test_configured_context_is_not_the_effective_one(doc: dict[str, Any]) -> None:
    cfg = doc["config"]
    assert cfg["configured"]["context_length"] == 8192
    assert cfg["configured"]["num_parallel"] == 2
    assert cfg["configured"]["max_loaded_models"] == 2
    assert cfg["configured"]["keep_alive"] == "5m0s"
    assert cfg["effective"]["ctx_per_slot"] == 4096
    assert cfg["effective"]["ctx_per_slot"] != cfg["configured"]["context_length"]
    assert cfg["effective"]["loaded_models"] == 1
    assert cfg["effective"]["keep_alive"] == "5m0s"


def test_hints(doc: dict[str, Any]) -> None:
    hints = {h["id"]: h for h in doc["hints"]}
    for wanted in ("eviction-thrash", "cold-load-latency", "context-not-in-effect", "prompt-truncated",
                   "client-timeout-during-load"):
        assert wanted in hints, sorted(hints)
    thrash = hints["eviction-thrash"]
    assert thrash["severity"] in ("warn", "crit")
    assert QWEN3 in thrash["detail"] and GEMMA3 in thrash["detail"]
    assert "load-failure" not in hints  # the only failed load was the client's abort


def test_requests_are_named_like_the_dashboard_names_them(doc: dict[str, Any]) -> None:
    # Three requests end before the scheduler's DEBUG line names their blob (`runner.name=…qwen3:8b` with
    # `runner.model=…/sha256-ba060a8423d7…`): the report names them as the dashboard does, after the fact.
    from ietop.pipeline.feeds import Evidence, TailParse
    from ietop.pipeline.setup import new_store

    models = [r["model"] for r in doc["requests"]]
    assert not [m for m in models if m and m.startswith("sha256-")]
    # Five gemma3:27b: the 499 that gave up during its load is named by that load (issue 23).
    assert sorted(m for m in models if m) == sorted([QWEN3] * 14 + [GEMMA3] * 5)
    store, view, _evidence = new_store()
    store.apply_all(TailParse(store, str(INCIDENT), "ollama", Evidence()).parse(INCIDENT.read_text().splitlines()))
    snap = view.snapshot(store.now, 10**6)
    # The dashboard lists fewer requests (not the probes, which name no model); the named ones are the same.
    named = [snap.model_name(r.model) for r in snap.requests]
    assert sorted(m for m in named if m) == sorted(m for m in models if m)


def test_csv_and_parquet_name_the_same_models(doc: dict[str, Any], tmp_path: Path) -> None:
    import polars as pl

    from ietop.cli import main

    assert main(["analyze", str(INCIDENT), "--csv", str(tmp_path / "c"), "--parquet", str(tmp_path / "p")]) == 0
    want = [r["model"] for r in doc["requests"]]
    assert not [m for m in want if m and m.startswith("sha256-")]
    assert pl.read_csv(tmp_path / "c" / "requests.csv")["model"].to_list() == want
    assert pl.read_parquet(tmp_path / "p" / "requests.parquet")["model"].to_list() == want
