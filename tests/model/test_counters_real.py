"""Windowed numbers on real vLLM scrapes, checked against ground truth that does not come from this code.

- real-basic-*: our own vLLM 0.32.0 CPU run (fixtures/vllm/metrics/README.md). The client's log
  `real-basic-requests.jsonl` records, in order, the three scrapes and every request between them with
  the `usage` block vLLM returned, so Δ counters between two scrapes must equal the usage sums of the
  requests in between.
- Quantiles are re-derived here from the raw text with a textbook `histogram_quantile`, written inline
  (no call into ietop's parser or quantile), and against the numbers printed by the reference script
  `histogram_quantile_check.py` on the same two files.
- 022/024/025: public scrapes with facts recorded in the samples index.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from ietop.model.counters import Window, compute_window
from ietop.model.histograms import histograms, merge_histograms
from parsers.events import Scrape
from parsers.vllm.metrics import COUNTERS, GAUGES, HISTOGRAMS
from parsers.vllm.prometheus import parse_scrape

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "vllm" / "metrics"
EP = "http://127.0.0.1:18000/metrics"
FILES = {
    "1": "real-basic-metrics-1-idle-1795967515.txt",
    "2": "real-basic-metrics-2-after-load-1795967518.txt",
    "3": "real-basic-metrics-3-after-errors-1795967534.txt",
}


def client_log() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIX / "real-basic-requests.jsonl").read_text().splitlines() if line]


def scrape_times() -> dict[str, datetime]:
    """When the client took each scrape (its label starts with the scrape number)."""
    return {e["label"][0]: datetime.fromtimestamp(e["t"], timezone.utc) for e in client_log() if e["kind"] == "scrape"}


def real_scrapes() -> dict[str, Scrape]:
    times = scrape_times()
    return {n: parse_scrape((FIX / name).read_text(), EP, times[n], line=1) for n, name in FILES.items()}


def window(old: str, new: str) -> Window:
    """The window whose baseline is scrape ``old`` and whose end is scrape ``new``."""
    times, scrapes = scrape_times(), real_scrapes()
    seconds = (times[new] - times[old]).total_seconds()
    w = compute_window(EP, scrapes.values(), times[new], seconds)
    assert w is not None and w.start == times[old] and w.end == times[new]
    return w


def usage_between(old: str, new: str, field: str) -> tuple[int, int]:
    """(Σ usage[field], number of successful requests) of the requests logged between two scrapes."""
    total, n, inside = 0, 0, False
    for entry in client_log():
        if entry["kind"] == "scrape":
            label = entry["label"][0]
            inside = label == old if label in (old, new) else inside
            if label == new:
                break
            continue
        if inside and entry.get("usage"):
            total += entry["usage"][field]
            n += 1
    return total, n


@pytest.mark.parametrize(("old", "new", "prompt", "generated", "requests"),
                         [("1", "2", 1427, 288, 11), ("2", "3", 244, 268, 1), ("1", "3", 1671, 556, 12)])
def test_token_deltas_equal_the_usage_the_client_saw(old: str, new: str, prompt: int, generated: int,
                                                     requests: int) -> None:
    assert usage_between(old, new, "prompt_tokens") == (prompt, requests)
    assert usage_between(old, new, "completion_tokens") == (generated, requests)
    total = window(old, new).total
    assert total.prompt_tokens == prompt  # Δ vllm:prompt_tokens_total
    assert total.generation_tokens == generated
    assert total.requests == requests  # Δ vllm:request_success_total
    assert total.finished == (("abort", 0.0), ("error", 0.0), ("length", requests), ("repetition", 0.0),
                              ("stop", 0.0))
    prompt_hist = total.histograms.prompt_tokens
    assert prompt_hist is not None and prompt_hist.sum == prompt and prompt_hist.count == requests
    assert total.prompt_tokens_per_request == pytest.approx(prompt / requests)
    assert total.generation_tokens_per_request == pytest.approx(generated / requests)


def test_window_1_to_2_other_numbers() -> None:
    w = window("1", "2")
    t = w.total
    assert w.span_s == pytest.approx(2.754662)
    assert [e.engine for e in w.engines] == ["0"]
    assert w.engines[0].prompt_tokens == t.prompt_tokens
    # Prefix cache: the second identical 361-token prompt hit 2 blocks of 128 (RUN.md).
    assert (t.prefix_cache_queries, t.prefix_cache_hits) == (1427.0, 256.0)
    assert t.prefix_cache_hit_rate == pytest.approx(256 / 1427)
    assert (t.preemptions, t.preemptions_per_s) == (0.0, 0.0)
    assert (t.running, t.waiting, t.kv_cache_usage) == (0.0, 0.0, 0.0)
    itl = t.histograms.itl
    assert itl is not None and itl.count == 288 - 11  # one ITL observation per token after the first
    assert not any(getattr(t.histograms, k).reset for k in HISTOGRAMS)


def test_whole_run_itl_count_and_prefix_hits() -> None:
    t = window("1", "3").total
    itl = t.histograms.itl
    assert itl is not None and itl.count == 544  # 556 generated - 12 requests (RUN.md)
    assert t.prefix_cache_hit_rate == pytest.approx(256 / 1671)  # the stats line said 15.3%


# ---- an independent histogram_quantile: plain text splitting and the textbook algorithm, inline ----------
SAMPLE = re.compile(r'^(?P<name>[^{\s]+)\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)$')


def raw_buckets(path: Path, metric: str) -> dict[float, float]:
    out: dict[float, float] = {}
    for line in path.read_text().splitlines():
        m = SAMPLE.match(line)
        if m and m["name"] == metric + "_bucket":
            le = dict(kv.split("=", 1) for kv in m["labels"].split(","))["le"].strip('"')
            out[float("inf") if le == "+Inf" else float(le)] = float(m["value"])
    return out


def textbook_quantile(q: float, old: dict[float, float], new: dict[float, float]) -> float:
    bounds = sorted(new)
    delta = [new[b] - old.get(b, 0.0) for b in bounds]
    rank = q * delta[-1]
    for i, (bound, cum) in enumerate(zip(bounds, delta)):
        if cum >= rank:
            if bound == float("inf"):
                return bounds[i - 1]
            lo_bound = bounds[i - 1] if i else 0.0
            lo_cum = delta[i - 1] if i else 0.0
            return lo_bound + (bound - lo_bound) * (rank - lo_cum) / (cum - lo_cum)
    raise AssertionError("unreachable: the +Inf bucket holds every observation")


# Printed by `histogram_quantile_check.py metrics-1-idle-after-startup.txt metrics-2-after-basic-load.txt
# METRIC` (the shared reference script, run on these two files; 4 decimals as it prints them).
REFERENCE_SCRIPT = {
    "ttft": {"n": 11, "mean": 0.0653, 0.5: 0.0525, 0.9: 0.1675, 0.99: 0.2418},
    "e2e": {"n": 11, "mean": 0.3717, 0.5: 0.2750, 0.9: 0.7175, 0.99: 0.7918},
}


@pytest.mark.parametrize("key", ["ttft", "e2e", "itl", "queue", "prefill", "decode", "prompt_tokens"])
def test_percentiles_agree_with_an_independent_computation(key: str) -> None:
    metric = HISTOGRAMS[key]
    old, new = raw_buckets(FIX / FILES["1"], metric), raw_buckets(FIX / FILES["2"], metric)
    stats = getattr(window("1", "2").total.histograms, key)
    assert stats is not None
    got = {0.5: stats.p50, 0.9: stats.p90, 0.99: stats.p99}
    for q, value in got.items():
        assert value == pytest.approx(textbook_quantile(q, old, new), rel=1e-12)
    if key in REFERENCE_SCRIPT:
        ref = REFERENCE_SCRIPT[key]
        assert stats.count == ref["n"]
        assert stats.mean == pytest.approx(ref["mean"], abs=5e-5)
        for q, value in got.items():
            assert value == pytest.approx(ref[q], abs=5e-5)


def test_queue_percentile_shows_the_bucket_resolution_caveat() -> None:
    # All 11 queue times were < 0.3 s (the first bucket), so p50 is 0.15 while the exact mean is ~0 (§9.6).
    queue = window("1", "2").total.histograms.queue
    assert queue is not None and queue.p50 == pytest.approx(0.15)
    assert queue.mean is not None and queue.mean < 1e-3


# ---- the metric names ietop reads exist in the real 0.32 scrape ------------------------------------------
def test_every_table_name_is_in_the_real_scrape() -> None:
    names = {s.name for s in real_scrapes()["2"].samples}
    for base in HISTOGRAMS.values():
        assert {base + "_bucket", base + "_sum", base + "_count"} <= names, base
    for name in (*COUNTERS.values(), *GAUGES.values()):
        assert name in names, name


# ---- public samples --------------------------------------------------------------------------------------
def sample(name: str, at: datetime) -> Scrape:
    return parse_scrape((FIX / name).read_text(), EP, at, line=1)


T = datetime(2025, 8, 1, 12, 0, tzinfo=timezone.utc)


def test_sample_025_two_engines_apart_and_summed() -> None:
    s = sample("025-metrics-v1-0.10-two-dp-engines.txt", T)
    itl = histograms(s, HISTOGRAMS["itl"])
    by_engine = {dict(labels)["engine"]: h for labels, h in itl.items()}
    assert by_engine["0"].sum == 13.223765562288463
    assert by_engine["1"].sum == 3.8492672259453684
    # engine 1's buckets and count come from the deprecated time_per_output_token_seconds spelling
    assert by_engine["1"].count == 243.0
    assert by_engine["0"].buckets == ((0.01, 229.0), (0.025, 954.0))
    merged = merge_histograms(itl.values())
    assert merged is not None and merged.sum == 13.223765562288463 + 3.8492672259453684

    # The same through a window, against a baseline of zeros (as after the engines started).
    zero = Scrape(0, T - timedelta(seconds=30), EP, tuple(type(x)(x.line, T - timedelta(seconds=30), x.name,
                                                                   x.labels, 0.0) for x in s.samples))
    w = compute_window(EP, [zero, s], T, 60)
    assert w is not None
    assert [e.engine for e in w.engines] == ["0", "1"]
    e0, e1, total = (e.histograms.itl for e in (*w.engines, w.total))
    assert e0 is not None and e1 is not None and total is not None
    assert (e0.sum, e1.sum) == (13.223765562288463, 3.8492672259453684)
    assert total.sum == pytest.approx(13.223765562288463 + 3.8492672259453684)
    assert e1.count == 243.0 and e1.mean == pytest.approx(3.8492672259453684 / 243)
    assert e1.p99 is not None and e1.p99 <= 7.5  # all 243 in the first listed bucket (le 7.5)
    # The excerpt cut engine 0 short (no +Inf, no _count): its count and quantiles are unknown, not guessed.
    assert e0.count is None and e0.p50 is None and total.count is None and total.p50 is None


def test_sample_024_kv_usage_is_a_fraction_in_scientific_notation() -> None:
    w = compute_window(EP, [sample("024-metrics-v1-0.10.0-engine-label-deprecated-gpu-prefix.txt", T)], T, 60)
    assert w is not None and w.start is None  # one scrape: gauges only
    assert w.total.kv_cache_usage == 9.75010481363281e-06
    assert w.engines[0].engine == "0" and w.engines[0].kv_cache_usage == 9.75010481363281e-06


def test_sample_022_ttft_count_exceeds_finished_requests() -> None:
    s = sample("022-metrics-v0-0.5.3-ttft-count-vs-success.txt", T)
    (ttft,) = histograms(s, HISTOGRAMS["ttft"]).values()
    assert ttft.count == 8060.0
    assert ttft.buckets == () and ttft.sum is None  # the excerpt has only _count
    success = sum(x.value for x in s.samples if x.name == COUNTERS["request_success"])
    assert success == 3810 + 108 == 3918
