"""`ietop.analyze.compare` (issue 23, item 3): the figures of each side equal a direct computation over what
`ietop analyze --json` lists for the same logs, and the "why it moved" verdict names output tokens and the decode
rate the way the seeds' third lesson reads them (latency is output tokens divided by the rate)."""

from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from ietop.analyze.compare import METRICS, compare, side, why
from ietop.cli import main
from tests.analyze.make_compare_pair import write


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write(tmp_path_factory.mktemp("pair"))


def analyze_json(path: Path) -> dict[str, Any]:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["--no-config", "analyze", "--json", str(path)]) == 0
    return json.loads(out.getvalue())


def nearest_rank(values: list[float], q: float) -> float | None:
    """p-th percentile as the smallest observed value with at least q of the samples at or below it."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, math.ceil(q * len(s)) - 1)]


def direct(doc: dict[str, Any], model: str | None = "*") -> dict[str, tuple[float | None, int]]:
    """The compare figures computed here, independently, from analyze's `requests` and `unloads`."""
    reqs = [r for r in doc["requests"] if r["inference"] and (model == "*" or r["model"] == model)]
    e2e = [r["latency_s"] for r in reqs if r["latency_s"] is not None and r["status"] < 400]
    ttft = [r["ttft_s"] for r in reqs if r["ttft_s"] is not None]
    out = [r["output_tokens"] for r in reqs if r["output_tokens"] is not None]
    rate = [1 / r["itl_s"] for r in reqs if r["itl_s"]]
    known = [r["cold_load"] for r in reqs if r["cold_load"] is not None]
    evictions = [u for u in doc["unloads"] if u["reason"] in ("evicted", "switched")
                 and (model == "*" or u["model"] == model)]
    return {"e2e_p50_s": (nearest_rank(e2e, 0.5), len(e2e)), "e2e_p90_s": (nearest_rank(e2e, 0.9), len(e2e)),
            "ttft_p50_s": (nearest_rank(ttft, 0.5), len(ttft)), "ttft_p90_s": (nearest_rank(ttft, 0.9), len(ttft)),
            "cold_loads": (sum(known) if known else None, len(known)),
            "evictions": (len(evictions), len(reqs)), "truncations": (sum(r["truncated"] is True for r in reqs), len(reqs)),
            "output_tokens_p50": (nearest_rank(out, 0.5), len(out)), "decode_tps_p50": (nearest_rank(rate, 0.5), len(rate))}


def test_pair_is_what_its_story_says(pair: tuple[Path, Path]) -> None:
    before, after = (analyze_json(p) for p in pair)
    assert before["config"]["configured"]["keep_alive"] == "5m0s"
    assert before["config"]["configured"]["max_loaded_models"] == 1
    assert after["config"]["configured"]["keep_alive"] == "30m0s"
    assert after["config"]["configured"]["max_loaded_models"] == 3
    # The embedder evicts the chat model before, never after; both sides serve the same requests.
    assert {(u["model"], u["for_model"]) for u in before["unloads"] if u["reason"] == "evicted"} == {
        ("qwen3:8b", "nomic-embed-text:latest"), ("nomic-embed-text:latest", "qwen3:8b")}
    assert [u for u in after["unloads"] if u["reason"] == "evicted"] == []
    assert ([r["output_tokens"] for r in before["requests"]] == [r["output_tokens"] for r in after["requests"]])


def test_figures_equal_a_direct_computation_over_analyze_json(pair: tuple[Path, Path]) -> None:
    docs = [analyze_json(p) for p in pair]
    sides = [side({"label": lb}, d["requests"], d["unloads"], d["config"]) for lb, d in zip(("before", "after"), docs)]
    comp = compare(*sides)
    for doc, key in zip(docs, ("before", "after")):
        expected = direct(doc)
        for name, _, _ in METRICS:
            m = comp["overall"]["metrics"][name]
            assert (m[key], m[f"n_{key}"]) == pytest.approx(expected[name]), name
        # Overall percentiles are analyze's own `latency` section.
        assert comp["overall"]["metrics"]["e2e_p50_s"][key] == doc["latency"]["e2e_s"]["p50"]
        assert comp["overall"]["metrics"]["ttft_p90_s"][key] == doc["latency"]["ttft_s"]["p90"]
        for row in doc["models"]:
            got = next(m for m in comp["models"] if (m["engine"], m["model"]) == (row["engine"], row["model"]))
            mine = direct(doc, row["model"])
            for name, _, _ in METRICS:
                assert (got["metrics"][name][key], got["metrics"][name][f"n_{key}"]) == pytest.approx(mine[name])
            # … and what analyze's `models` says of the same model.
            assert got["metrics"]["ttft_p50_s"][key] == row["ttft_p50_s"]
            assert got["metrics"]["decode_tps_p50"][key] == row["decode_tps_p50"]
            assert got["metrics"]["output_tokens_p50"][key] == row["output_tokens_p50"]
            assert got["metrics"]["cold_loads"][key] == row["cold_loads"]
            assert got["metrics"]["evictions"][key] == row["evictions_suffered"]
            assert got["metrics"]["truncations"][key] == row["truncations"]


def test_pair_moves_the_way_the_tuning_should(pair: tuple[Path, Path]) -> None:
    docs = [analyze_json(p) for p in pair]
    comp = compare(*(side({"label": lb}, d["requests"], d["unloads"], d["config"])
                     for lb, d in zip(("before", "after"), docs)))
    m = comp["overall"]["metrics"]
    assert m["cold_loads"]["after"] < m["cold_loads"]["before"]
    assert m["evictions"]["before"] > 0 and m["evictions"]["after"] == 0
    assert m["e2e_p50_s"]["delta_pct"] < -10
    chat = next(x for x in comp["models"] if x["model"] == "qwen3:8b")
    assert chat["why"]["latency"] == "fell"
    assert chat["why"]["because"] == ["cold_loads"]  # same answers, same rate: the loads explain it
    assert "output tokens unchanged (p50 410 → 410)" in chat["why"]["text"]
    changed = {(c["kind"], c["name"]): c for c in comp["config"]["changed"]}
    keep = changed[("configured", "OLLAMA_KEEP_ALIVE")]
    assert (keep["before"], keep["after"]) == ("5m0s", "30m0s")
    # The line each value rests on: the `server config` line of each log.
    for path, src, text in zip(pair, (keep["before_source"], keep["after_source"]),
                               ("OLLAMA_KEEP_ALIVE:5m0s", "OLLAMA_KEEP_ALIVE:30m0s")):
        line = path.read_text().splitlines()[src["line"] - 1]
        assert 'msg="server config"' in line and text in line
    assert (changed[("configured", "OLLAMA_MAX_LOADED_MODELS")]["before"],
            changed[("configured", "OLLAMA_MAX_LOADED_MODELS")]["after"]) == (1, 3)


def _metrics(**pairs: tuple[float | None, float | None]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, _, _ in METRICS:
        b, a = pairs.get(name, (None, None))
        out[name] = {"before": b, "after": a, "n_before": 20, "n_after": 20}
    return out


def test_why_latency_fell_because_output_tokens_fell_not_the_rate() -> None:
    # The seeds' third lesson: a healthy rate, and the median fell because the answers got shorter.
    m = _metrics(e2e_p50_s=(26.0, 9.0), output_tokens_p50=(640, 210), decode_tps_p50=(56.0, 55.0),
                 ttft_p50_s=(0.4, 0.4), cold_loads=(0, 0))
    v = why(m, 0.0, 0.0)
    assert v["latency"] == "fell"
    assert v["because"] == ["output_tokens"]
    assert v["text"] == ("latency fell (p50 26.0 s → 9.00 s) because output tokens fell (p50 640 → 210), "
                         "decode rate unchanged (56 → 55 tok/s)")


def test_why_latency_rose_because_the_rate_fell() -> None:
    m = _metrics(e2e_p50_s=(9.0, 16.0), output_tokens_p50=(400, 410), decode_tps_p50=(60.0, 30.0),
                 ttft_p50_s=(0.3, 0.3))
    v = why(m, 0.1, 0.1)
    assert (v["latency"], v["because"]) == ("rose", ["decode_rate"])
    assert "because decode rate fell (60 → 30 tok/s), output tokens unchanged (p50 400 → 410)" in v["text"]


def test_why_names_a_move_nothing_explains_and_a_steady_latency() -> None:
    m = _metrics(e2e_p50_s=(9.0, 16.0), output_tokens_p50=(400, 400), decode_tps_p50=(60.0, 60.0))
    v = why(m, 0.1, 0.1)
    assert v["because"] == [] and "neither explains it" in v["text"]
    steady = why(_metrics(e2e_p50_s=(9.0, 9.5), output_tokens_p50=(400, 100)), None, None)
    assert (steady["latency"], steady["because"]) == ("unchanged", [])
    assert why(_metrics(e2e_p50_s=(None, 9.5)), None, None)["latency"] == "unknown"
