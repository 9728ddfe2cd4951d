"""Golden tests: `ietop analyze --json` on every real Ollama sample reports the ground-truth facts of
`fixtures/ollama/expectations.json` (values read by hand from the pasted logs, see SAMPLES-INDEX.md).

The expected values are compared with independent conversions written here (e.g. Go durations), not
with the parser's own helpers, so a bug in a shared helper cannot make both sides agree.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ietop.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ollama"
EXPECTATIONS: dict[str, Any] = json.loads((FIXTURES / "expectations.json").read_text())

_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}


def go_seconds(text: str) -> float:
    """Independent reading of a Go duration such as `1h24m39s` or `444.455595ms`."""
    total = 0.0
    for number, unit in re.findall(r"([0-9.]+)(h|ms|µs|us|ns|m|s)", text):
        total += float(number) * _UNITS[unit]
    return total


def analyze_json(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    code = main(["analyze", str(path), "--json", *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_all_samples_have_expectations() -> None:
    """Every sample log has an expectations entry and vice versa (44 files)."""
    logs = sorted(p.name for p in FIXTURES.glob("[0-9][0-9][0-9]-*.log"))
    assert logs == sorted(EXPECTATIONS)
    assert len(logs) == 44


@pytest.mark.parametrize("name", sorted(EXPECTATIONS))
def test_golden(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    exp = EXPECTATIONS[name]
    facts = exp["facts"]
    counts = exp["counts"]
    # Every access line, one by one (--all-requests); by default the successful probes are counted instead.
    doc = analyze_json(FIXTURES / name, capsys, "--all-requests")
    assert doc["schema"] == "ietop.analyze/2"
    folded = analyze_json(FIXTURES / name, capsys)
    assert len(folded["requests"]) + sum(p["count"] for p in folded["probes"]) == counts["gin"]
    (source,) = doc["sources"]
    assert source["engine"] == "ollama"
    assert source["lines"] >= counts["lines"]
    eff = doc["config"]["effective"]

    gin = facts.get("gin", [])
    assert len(doc["requests"]) == len(gin) == counts["gin"]
    for got, want in zip(doc["requests"], gin):
        assert got["status"] == want["status"]
        assert got["latency_s"] == pytest.approx(go_seconds(want["latency"]), abs=1e-9)
        assert got["client"] == want["client"]
        assert got["method"] == want["method"]
        assert got["path"] == want["path"]
        assert got["source"]["line"] >= 1

    done = [ld for ld in doc["loads"] if ld["ok"]]
    want_done = facts.get("load_done", [])
    assert len(done) == len(want_done) == counts.get("load_done", 0)
    for got, (_kind, secs) in zip(done, want_done):
        assert got["duration_s"] == pytest.approx(float(secs))

    want_trunc = facts.get("truncation", [])
    truncs = [t for t in doc["truncations"] if t["truncated"]]
    assert len(truncs) == len(want_trunc)
    for got, (limit, prompt, keep, new) in zip(truncs, want_trunc):
        assert (got["limit"], got["prompt"], got["keep"], got["new"]) == (int(limit), int(prompt), int(keep), int(new))
    assert len(doc["truncations"]) == counts.get("truncation", 0)

    launched = [ld for ld in doc["loads"] if ld["runner"] is not None]
    assert len(launched) == counts.get("load_start", 0)
    for key, field in (("ctx_flag", "ctx"), ("par_flag", "parallel"), ("ngl_flag", "gpu_layers")):
        for (value,) in facts.get(key, []):
            assert launched[0][field] == int(value)

    for op, par, batch, kv in facts.get("loadreq", []):
        assert eff["parallel"] == int(par)
        assert eff["batch_size"] == int(batch)
        assert eff["ctx_total"] == int(kv)
        assert eff["ctx_per_slot"] == int(kv) // int(par)
        assert eff["load_request_op"] == op

    if counts.get("evict_or_unload"):
        assert doc["unloads"], "an eviction/unload line must yield an unload"
    for (num_ctx,) in facts.get("runner_num_ctx", []):
        assert any(u["num_ctx"] == int(num_ctx) for u in doc["unloads"])
    for (duration,) in facts.get("idle_timer", []):
        assert eff["keep_alive"] == duration
    for (nctx,) in facts.get("n_ctx_slot_json", []):
        assert eff["ctx_per_slot"] == int(nctx)
    for addr, version in facts.get("listening", []):
        assert source["version"] == version
        assert eff["listen"] == addr
    for par, available, required in facts.get("fit_single", []):
        assert doc["loads"][0]["parallel"] == int(par)
        assert doc["loads"][0]["available"] == available
        assert doc["loads"][0]["required"] == required
    for (nctx,) in facts.get("llama_ctx", []):
        assert eff["ctx_total"] == int(nctx)
    waits = [w for u in doc["unloads"] for w in (u["vram_wait_s"] or [])]
    for (secs,) in facts.get("vram_timeout", []):
        assert float(secs) in waits
    for prompt, limit in facts.get("exceeds", []):
        assert any(t["limit"] == int(limit) and t["prompt"] == int(prompt) and not t["truncated"]
                   for t in doc["truncations"])
    for slot, _cache, prompt, used, remaining in facts.get("cache_slot", []):
        assert any(t.get("slot") == int(slot) and t["prompt_tokens"] == int(prompt)
                   and t["cached_tokens"] == int(used) and t["prefill_tokens"] == int(remaining)
                   for t in doc["tasks"])
    for nctx, keep, ntok in facts.get("new_prompt", []):
        assert any(t.get("n_ctx_slot") == int(nctx) and t.get("n_keep") == int(keep)
                   and t["prompt_tokens"] == int(ntok) for t in doc["tasks"])
    progress = [p for t in doc["tasks"] for p in t.get("progress", [])]
    for ntok, frac, secs in facts.get("prefill_progress", []):
        assert {"n_tokens": int(ntok), "progress": float(frac), "t_s": float(secs)} in progress
    assert len(doc["errors"]) >= counts.get("error", 0)
