"""Per-model figures (`ietop analyze --json`'s `models`, ietop.model.per_model) equal a direct computation over the
same document's `requests`, `loads`, `unloads` and `probes`, for an Ollama, a vLLM and an MLX log.

The expected numbers are computed here from the JSON lists with this file's own code: nearest-rank quantiles
over sorted values (the definition `Sketch.quantile` uses below its exact limit), per-request rates, and a
residency sweep over load completions and unloads. Nothing of ietop.model.per_model is called for them."""

from __future__ import annotations

import io
import json
import math
import re
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from ietop.analyze.report import Analysis
from ietop.model.names import resolve
from ietop.model.per_model import PerModel, model_rows
from ietop.model.store import Store
from ietop.pipeline.ingest import run_files

ROOT = Path(__file__).resolve().parents[2]
LOGS = {
    "ollama-incident": ROOT / "ietop" / "demo" / "incident.log",
    "ollama-truncations": ROOT / "fixtures" / "ollama" / "066-supp-v07-journald-truncation-long-chat-latency.log",
    "vllm": ROOT / "fixtures" / "vllm" / "real-basic-server.log",
    "mlx": ROOT / "fixtures" / "mlx" / "real-stream-no-usage-server.log",
}


def document(path: Path) -> dict[str, Any]:
    an = Analysis([str(path)])
    try:
        out = io.StringIO()
        an.write_json(out)
    finally:
        an.close()
    doc: dict[str, Any] = json.loads(out.getvalue())
    return doc


def rank(values: list[float], q: float) -> float | None:
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered) - 1e-9)) - 1]


def when(iso: str) -> float:
    """A JSON time as epoch seconds (a time without a zone is UTC, as the store reads it)."""
    ts = datetime.fromisoformat(iso)
    return (ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)).timestamp()


def window(doc: dict[str, Any]) -> tuple[float, float]:
    """Every time a record carries: request start and end, load begin and end, unload, counted probes."""
    times: list[float] = []
    for r in doc["requests"]:
        if r["time"]:
            times.append(when(r["time"]))
            if r["latency_s"] is not None:
                times.append(when(r["time"]) - r["latency_s"])
    for ld in doc["loads"]:
        if ld["time"]:
            times.append(when(ld["time"]))
            if ld["duration_s"] is not None:
                times.append(when(ld["time"]) + ld["duration_s"])
    times += [when(u["time"]) for u in doc["unloads"] if u["time"]]
    times += [when(p[k]) for p in doc["probes"] for k in ("first", "last") if p.get(k)]
    return min(times), max(times)


def loaded_at(ld: dict[str, Any]) -> float:
    """When a load completed: the time on the line that says so (`done_source`: Ollama's `time=…` field; its
    `time` is the scheduler's first line, before the runner's own count starts), else its time plus its duration."""
    done = ld["done_source"]
    if done is not None:
        with open(done["path"], encoding="utf-8") as f:
            line = f.readlines()[done["line"] - 1]
        stamp = re.search(r"\btime=(\S+)", line)
        if stamp is not None:
            return when(stamp.group(1).replace("Z", "+00:00"))
    return when(ld["time"]) + float(ld["duration_s"])


def residency(doc: dict[str, Any]) -> dict[tuple[str, str], float]:
    """Seconds each model was resident inside the window: from a completed load to the next unload of it or the
    next load of it, else to the window's end."""
    w0, w1 = window(doc)
    steps = [(when(u["time"]), 0, u) for u in doc["unloads"] if u["model"]]
    steps += [(loaded_at(ld), 1, ld) for ld in doc["loads"] if ld["ok"] and ld["model"]]
    steps.sort(key=lambda s: (s[0], s[1]))
    open_: dict[tuple[str, str], float] = {}
    held: dict[tuple[str, str], float] = {}

    def close(key: tuple[str, str], end: float) -> None:
        start = open_.pop(key)
        held[key] = held.get(key, 0.0) + max(0.0, min(end, w1) - max(start, w0))

    for t, is_load, rec in steps:
        key = (rec["engine"], rec["model"])
        if key in open_:
            close(key, t)
        if is_load:
            open_[key] = t
    for key in list(open_):
        close(key, w1)
    return held


def expected(doc: dict[str, Any]) -> dict[tuple[str, str | None], dict[str, Any]]:
    out: dict[tuple[str, str | None], dict[str, Any]] = {}

    def row(engine: str, model: str | None) -> dict[str, Any]:
        return out.setdefault((engine, model), {"reqs": [], "loads": [], "failed": 0, "for": Counter(),
                                                "by": Counter()})

    for r in doc["requests"]:
        if r["inference"]:
            row(r["engine"], r["model"])["reqs"].append(r)
    for ld in doc["loads"]:
        e = row(ld["engine"], ld["model"])
        if ld["ok"]:
            e["loads"].append(ld)
        elif ld["status"] == "failed":
            e["failed"] += 1
    for u in doc["unloads"]:
        if u["reason"] in ("evicted", "switched"):
            row(u["engine"], u["model"])["for"][u["for_model"]] += 1
            if u["for_model"] is not None:
                row(u["engine"], u["for_model"])["by"][u["model"]] += 1
    w0, w1 = window(doc)
    held = residency(doc)
    figures = {}
    for key, e in out.items():
        reqs = e["reqs"]
        known = [r["cold_load"] for r in reqs if r["cold_load"] is not None]
        ttft = [r["ttft_s"] for r in reqs if r["ttft_s"] is not None]
        decode = [1 / r["itl_s"] for r in reqs if r["itl_s"]]
        # A prefill rate only where one log line states both the tokens evaluated and their time.
        prefill = [r["prefill_tokens"] / r["ttft_s"] for r in reqs
                   if r["prefill_tokens"] is not None and r["ttft_s"]
                   and r["facts_evidence"].get("ttft_s") is not None
                   and r["facts_evidence"].get("ttft_s") == r["facts_evidence"].get("prefill_tokens")
                   and r["facts_evidence"]["ttft_s"] != r["source"]]
        prompt = [r["prompt_tokens"] for r in reqs if r["prompt_tokens"] is not None]
        output = [r["output_tokens"] for r in reqs if r["output_tokens"] is not None]
        load_s = [ld["duration_s"] for ld in e["loads"] if ld["duration_s"] is not None]
        resident = held.get(key) if key[1] is not None else None  # type: ignore[arg-type]
        figures[key] = {
            "requests": len(reqs), "cold_loads": sum(known),
            "cold_load_share": sum(known) / len(known) if known else None,
            "ttft_p50_s": rank(ttft, 0.5), "ttft_p90_s": rank(ttft, 0.9), "decode_tps_p50": rank(decode, 0.5),
            "prefill_tps_p50": rank(prefill, 0.5),
            "prompt_tokens_p50": rank(prompt, 0.5), "prompt_tokens_p90": rank(prompt, 0.9),
            "output_tokens_p50": rank(output, 0.5), "output_tokens_p90": rank(output, 0.9),
            "loads": len(e["loads"]), "loads_failed": e["failed"], "load_s_median": rank(load_s, 0.5),
            "evictions_suffered": sum(e["for"].values()), "evictions_caused": sum(e["by"].values()),
            "evicted_for": sorted([{"model": m, "count": n} for m, n in e["for"].items()],
                                  key=lambda d: (-d["count"], d["model"] or "")),
            "evicted_by_this": sorted([{"model": m, "count": n} for m, n in e["by"].items()],
                                      key=lambda d: (-d["count"], d["model"] or "")),
            "truncations": sum(1 for r in reqs if r["truncated"] is True),
            "resident_s": resident, "resident_share": None if resident is None else resident / (w1 - w0),
        }
    return figures


@pytest.fixture(scope="module", params=list(LOGS))
def doc(request: pytest.FixtureRequest) -> dict[str, Any]:
    return document(LOGS[request.param])


def test_models_equal_a_direct_computation_over_the_json(doc: dict[str, Any]) -> None:
    want = expected(doc)
    got = {(m["engine"], m["model"]): m for m in doc["models"]}
    assert set(got) == set(want)
    for key, figures in want.items():
        for name, value in figures.items():
            if isinstance(value, float):
                assert got[key][name] == pytest.approx(value, rel=1e-9, abs=1e-6), (key, name)
            else:
                assert got[key][name] == value, (key, name)
    # Most requests first: the model that served the log leads.
    assert [m["requests"] for m in doc["models"]] == sorted((m["requests"] for m in doc["models"]), reverse=True)


def test_the_incident_in_numbers() -> None:
    """The demo's story, read off `models`: qwen3:8b and gemma3:27b evicted each other once, gemma3:27b's first
    load failed, the truncated prompts were all qwen3:8b's, and the prefill rate comes from runner timings."""
    models = {m["model"]: m for m in document(LOGS["ollama-incident"])["models"]}
    qwen, gemma = models["qwen3:8b"], models["gemma3:27b"]
    # 19 inference requests; the 499 that gave up during the gemma3:27b load is that model's where the store
    # attributes it to the load, else a row of its own (model null).
    assert qwen["requests"] == 14 and sum(m["requests"] for m in models.values()) == 19
    assert set(models) - {None} == {"qwen3:8b", "gemma3:27b"}
    assert qwen["evicted_for"] == [{"model": "gemma3:27b", "count": 1}]
    assert gemma["evicted_by_this"] == [{"model": "qwen3:8b", "count": 1}]
    assert (gemma["loads"], gemma["loads_failed"], gemma["load_s_median"]) == (1, 1, 12.41)
    assert (qwen["truncations"], gemma["truncations"]) == (4, 0)
    assert qwen["prefill_tps_p50"] is not None and gemma["prefill_tps_p50"] is not None
    assert 0 < gemma["resident_share"] < qwen["resident_share"] < 1


def test_sources_without_a_stated_prefill_time_give_no_prefill_rate() -> None:
    """vLLM logs no per-request timing; MLX's TTFT runs from arrival (it includes waiting): no prefill rate."""
    for name in ("vllm", "mlx"):
        assert all(m["prefill_tps_p50"] is None for m in document(LOGS[name])["models"]), name


def test_the_list_entry_point_gives_what_the_stream_gives() -> None:
    """`model_rows` over the finalized records, in any order, equals what `PerModel` built as they streamed past."""
    records: list[tuple[str, Any]] = []
    agg = PerModel()
    store = Store()

    def sink(kind: str, record: Any) -> None:
        records.append((kind, record))
        agg(kind, record)

    store.set_sink(sink)
    run_files(store, [str(LOGS["ollama-incident"])])
    # Records made before a DEBUG line named their blob carry the blob: both sides name them alike.
    aliases = store.loads.aliases

    def names(model: str | None) -> str | None:
        return resolve(model, aliases)

    streamed = agg.rows(names)
    by_kind = {k: [r for kind, r in records if kind == k] for k in ("request", "load", "unload")}
    listed = model_rows(reversed(by_kind["request"]), by_kind["load"], by_kind["unload"], names, agg.span())
    assert listed == streamed
    assert {r.model for r in streamed} - {None} == {"qwen3:8b", "gemma3:27b"}
