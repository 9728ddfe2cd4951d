"""The windowed math on cumulative counters and histograms: quantiles, resets, baselines, the store."""

from __future__ import annotations

import itertools
import math
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ietop.model.counters import ScrapeStore, compute_window, window_chain
from ietop.model.histograms import (
    Histogram,
    counter_delta,
    histogram_delta,
    histogram_increase,
    histograms,
    increase,
    merge_histograms,
    quantile,
)
from parsers.events import MetricSample, Scrape

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=timezone.utc)
EP = "http://127.0.0.1:8000/metrics"
INF = math.inf


# ------------------------------------------------------------------------------------------------ quantile
@st.composite
def cumulative_buckets(draw: st.DrawFn) -> list[tuple[float, float]]:
    """Sorted finite bounds (possibly starting at or below 0) plus +Inf, with cumulative counts."""
    bounds = sorted(set(draw(st.lists(st.floats(-10, 1e4, allow_nan=False), min_size=1, max_size=12))))
    counts = draw(st.lists(st.integers(0, 50), min_size=len(bounds) + 1, max_size=len(bounds) + 1))
    cum, total = [], 0
    for le, c in zip([*bounds, INF], counts):
        total += c
        cum.append((le, float(total)))
    return cum


@given(cumulative_buckets(), st.lists(st.floats(0, 1), min_size=2, max_size=6))
def test_quantile_is_monotonic_in_q_and_inside_the_buckets(buckets: list[tuple[float, float]], qs: list[float]) -> None:
    total = buckets[-1][1]
    results = [quantile(q, buckets) for q in sorted(qs)]
    if total == 0:
        assert results == [None] * len(results)
        return
    values = [r for r in results if r is not None]
    assert len(values) == len(results)
    assert values == sorted(values)
    first = next(i for i, (_, c) in enumerate(buckets) if c > 0)  # the first non-empty bucket
    lower = 0.0 if first == 0 else buckets[first - 1][0]
    if first == 0 and buckets[0][0] <= 0:
        lower = buckets[0][0]  # Prometheus: a first bucket with le <= 0 returns its le
    highest_finite = buckets[-2][0]
    assert all(min(lower, highest_finite) <= v <= highest_finite for v in values)


@given(cumulative_buckets())
def test_quantile_ignores_bucket_order(buckets: list[tuple[float, float]]) -> None:
    assert quantile(0.9, list(reversed(buckets))) == quantile(0.9, buckets)


def test_quantile_known_values() -> None:
    # 10 observations: 2 in (0, 1], 6 in (1, 2], 2 in (2, 4]
    b = [(1.0, 2.0), (2.0, 8.0), (4.0, 10.0), (INF, 10.0)]
    assert quantile(0.5, b) == pytest.approx(1.5)  # rank 5: 3 of 6 into (1, 2]
    assert quantile(0.1, b) == pytest.approx(0.5)  # rank 1 in the first bucket, lower bound 0
    assert quantile(0.9, b) == pytest.approx(3.0)
    assert quantile(1.0, b) == pytest.approx(4.0)
    assert quantile(0.0, b) == 0.0
    # rank in +Inf -> the highest finite bound
    assert quantile(0.99, [(1.0, 1.0), (2.0, 2.0), (INF, 100.0)]) == 2.0
    # leading empty buckets: q=0 gives the lower edge of the first non-empty bucket
    assert quantile(0.0, [(1.0, 0.0), (2.0, 0.0), (4.0, 5.0), (INF, 5.0)]) == 2.0
    # first bucket bound <= 0 returns the bound itself
    assert quantile(0.5, [(-1.0, 3.0), (1.0, 4.0), (INF, 4.0)]) == -1.0
    # equal bounds are added up (Prometheus coalesces them)
    assert quantile(0.5, [(1.0, 1.0), (1.0, 1.0), (INF, 2.0)]) == quantile(0.5, [(1.0, 2.0), (INF, 2.0)])


@pytest.mark.parametrize(
    "buckets",
    [[], [(INF, 5.0)], [(1.0, 0.0), (INF, 0.0)], [(1.0, 3.0), (2.0, 5.0)]],  # no +Inf: Prometheus gives NaN
)
def test_quantile_none(buckets: list[tuple[float, float]]) -> None:
    assert quantile(0.5, buckets) is None


@pytest.mark.parametrize("q", [-0.1, 1.5, math.nan])
def test_quantile_rejects_q_outside_0_1(q: float) -> None:
    with pytest.raises(ValueError, match="quantile"):
        quantile(q, [(1.0, 1.0), (INF, 1.0)])


# ------------------------------------------------------------------------------------------------ counters
@st.composite
def counter_readings(draw: st.DrawFn) -> list[float]:
    """Cumulative readings of a counter that sometimes restarts from zero."""
    out: list[float] = []
    value = draw(st.integers(0, 1000))
    for _ in range(draw(st.integers(1, 30))):
        if draw(st.booleans()) and draw(st.booleans()):
            value = draw(st.integers(0, 20))  # restart
        else:
            value += draw(st.integers(0, 100))
        out.append(float(value))
    return out


@given(counter_readings())
def test_deltas_never_negative_across_resets(readings: list[float]) -> None:
    pairs = [counter_delta(a, b) for a, b in itertools.pairwise(readings)]
    assert all(d >= 0 for d in pairs)
    assert increase(readings) >= 0
    assert increase(readings) == pytest.approx(sum(pairs))


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=20))
def test_increase_without_reset_is_last_minus_first(steps: list[int]) -> None:
    readings, total = [], 0
    for s in steps:
        total += s
        readings.append(float(total))
    assert increase(readings) == readings[-1] - readings[0]


def test_counter_delta_cases() -> None:
    assert counter_delta(10.0, 15.0) == 5.0
    assert counter_delta(10.0, 3.0) == 3.0  # restarted: counted from zero
    assert counter_delta(10.0, 10.0) == 0.0
    assert counter_delta(math.nan, 3.0) == 0.0
    assert increase([100.0, 120.0, 5.0, 9.0]) == 20.0 + 9.0
    assert increase([]) == 0.0


# ---------------------------------------------------------------------------------------------- histograms
def hist(counts: list[float], total: float, les: tuple[float, ...] = (0.1, 1.0, INF)) -> Histogram:
    return Histogram(tuple(zip(les, counts)), total, counts[-1])


def test_histogram_delta_and_reset() -> None:
    a, b = hist([1, 2, 3], 1.0), hist([2, 5, 7], 3.5)
    d = histogram_delta(a, b)
    assert d == Histogram(((0.1, 1.0), (1.0, 3.0), (INF, 4.0)), 2.5, 4.0, reset=False)
    restarted = hist([1, 1, 1], 0.05)
    assert histogram_delta(b, restarted) == Histogram(restarted.buckets, 0.05, 1.0, reset=True)
    # one bucket going down is enough
    assert histogram_delta(b, hist([1, 6, 8], 4.0)).reset
    # a changed bucket layout (server restarted with other --custom-histogram-buckets)
    assert histogram_delta(b, hist([9, 9, 9], 9.0, (0.5, 2.0, INF))).reset
    # a series that did not exist yet counts from zero, without a reset
    assert histogram_delta(Histogram((), 0.0, 0.0), b) == b


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.booleans()), min_size=2, max_size=15))
def test_histogram_increase_never_negative(steps: list[tuple[int, int, bool]]) -> None:
    series, lo, hi = [], 0.0, 0.0
    for fast, slow, restart in steps:
        if restart:
            lo, hi = 0.0, 0.0
        lo, hi = lo + fast, hi + fast + slow
        series.append(Histogram(((0.1, lo), (INF, hi)), hi * 0.5, hi))
    total = histogram_increase(series)
    assert total is not None
    assert all(c >= 0 for _, c in total.buckets)
    assert total.count is not None and total.count >= 0
    pairwise = [histogram_delta(a, b) for a, b in itertools.pairwise(series)]
    assert total.count == pytest.approx(sum(d.count or 0.0 for d in pairwise))
    assert total.reset == any(d.reset for d in pairwise)


def test_histogram_increase_across_a_restart() -> None:
    series = [hist([1, 2, 3], 1.0), hist([2, 4, 6], 2.0), hist([0, 1, 1], 0.5), hist([1, 2, 2], 0.75)]
    total = histogram_increase(series)
    assert total == Histogram(((0.1, 2.0), (1.0, 4.0), (INF, 5.0)), 1.75, 5.0, reset=True)
    assert histogram_increase(series[:1]) is None


def test_merge_histograms() -> None:
    a, b = hist([1, 2, 3], 1.0), hist([0, 1, 4], 2.0)
    assert merge_histograms([a, b]) == Histogram(((0.1, 1.0), (1.0, 3.0), (INF, 7.0)), 3.0, 7.0)
    other = merge_histograms([a, hist([1, 1, 1], 0.5, (0.2, 2.0, INF))])
    assert other == Histogram((), 1.5, 4.0)  # layouts differ: no buckets, but sum and count add up
    assert merge_histograms([]) is None


# ------------------------------------------------------------------------------------------------- windows
def scrape(at: float, values: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> Scrape:
    ts = T0 + timedelta(seconds=at)
    samples = tuple(MetricSample(0, ts, name, labels, v) for (name, labels), v in values.items())
    return Scrape(0, ts, EP, samples)


def bare(at: float) -> Scrape:
    return scrape(at, {})


@given(st.lists(st.integers(0, 200), min_size=1, max_size=25, unique=True), st.integers(0, 220),
       st.integers(1, 100))
def test_window_picks_the_right_baseline(times: list[int], now_s: int, seconds: int) -> None:
    scrapes = [bare(t) for t in times]
    now = T0 + timedelta(seconds=now_s)
    chain = window_chain(reversed(scrapes), now, seconds)  # input order does not matter
    timed = sorted(t for t in times if t <= now_s)
    if not timed:
        assert chain == ()
        return
    chain_times = [(s.ts - T0).total_seconds() for s in chain if s.ts is not None]
    assert chain_times[-1] == timed[-1]  # the newest scrape at or before now
    assert chain_times == sorted(chain_times)
    inside = [t for t in timed[:-1] if t >= now_s - seconds]
    before = [t for t in timed[:-1] if t < now_s - seconds]
    if inside:
        expected = inside[0]  # the oldest scrape inside the window
    elif before:
        expected = before[-1]  # else the one just before the window
    else:
        expected = timed[-1]  # no baseline: the newest alone
    assert chain_times[0] == expected
    assert chain_times == [t for t in timed if t >= expected]


def test_window_chain_rejects_a_non_positive_window() -> None:
    with pytest.raises(ValueError, match="positive"):
        window_chain([bare(0)], T0, 0)


E0 = (("engine", "0"), ("model_name", "m"))
E1 = (("engine", "1"), ("model_name", "m"))


def vllm_values(e0: float, e1: float, ttft0: list[float], ttft1: list[float]) -> dict[
        tuple[str, tuple[tuple[str, str], ...]], float]:
    """A small two-engine vLLM scrape: counters scaled by e0/e1, TTFT buckets (0.1, 1, +Inf) per engine."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for lab, k, ttft in ((E0, e0, ttft0), (E1, e1, ttft1)):
        out[("vllm:prompt_tokens_total", lab)] = 100 * k
        out[("vllm:generation_tokens_total", lab)] = 10 * k
        out[("vllm:prefix_cache_queries_total", lab)] = 100 * k
        out[("vllm:prefix_cache_hits_total", lab)] = 25 * k
        out[("vllm:num_preemptions_total", lab)] = k
        out[("vllm:request_success_total", (*lab[:1], ("finished_reason", "stop"), *lab[1:]))] = 2 * k
        out[("vllm:num_requests_running", lab)] = 3.0
        out[("vllm:num_requests_waiting", lab)] = 1.0
        out[("vllm:kv_cache_usage_perc", lab)] = 0.25 if lab is E0 else 0.75
        for le, c in zip(("0.1", "1.0", "+Inf"), ttft):
            out[("vllm:time_to_first_token_seconds_bucket", (lab[0], ("le", le), lab[1]))] = c
        out[("vllm:time_to_first_token_seconds_sum", lab)] = ttft[-1] * 0.2
        out[("vllm:time_to_first_token_seconds_count", lab)] = ttft[-1]
    return out


def test_window_per_engine_and_summed() -> None:
    old = scrape(0, vllm_values(1, 1, [1, 2, 2], [0, 0, 0]))
    mid = scrape(5, vllm_values(2, 1, [2, 4, 4], [0, 0, 0]))
    new = scrape(10, vllm_values(3, 2, [3, 6, 6], [0, 2, 2]))
    w = compute_window(EP, [new, old, mid], T0 + timedelta(seconds=10), 10)
    assert w is not None
    assert (w.start, w.end, w.span_s, w.scrapes) == (old.ts, new.ts, 10.0, 3)
    assert [e.engine for e in w.engines] == ["0", "1"]
    e0, e1, total = w.engines[0], w.engines[1], w.total
    assert (e0.prompt_tokens, e1.prompt_tokens, total.prompt_tokens) == (200.0, 100.0, 300.0)
    assert (e0.requests, e1.requests, total.requests) == (4.0, 2.0, 6.0)
    assert total.finished == (("stop", 6.0),)
    assert total.prompt_tokens_per_request == 50.0
    assert total.generation_tokens_per_request == 5.0
    assert total.prompt_tokens_per_s == 30.0
    assert total.prefix_cache_hit_rate == 0.25
    assert (total.preemptions, total.preemptions_per_s) == (3.0, 0.3)
    assert (total.running, total.waiting, total.kv_cache_usage) == (6.0, 2.0, 0.5)
    assert (e1.running, e1.kv_cache_usage) == (3.0, 0.75)
    ttft0, ttft1, ttft = e0.histograms.ttft, e1.histograms.ttft, total.histograms.ttft
    assert ttft0 is not None and ttft1 is not None and ttft is not None
    assert (ttft0.count, ttft1.count, ttft.count) == (4.0, 2.0, 6.0)
    assert ttft.mean == pytest.approx(0.2)
    assert ttft0.p50 == pytest.approx(0.1)  # engine 0: 2 in (0, 0.1], 2 in (0.1, 1]
    assert ttft1.p50 == pytest.approx(0.55)  # engine 1: 2 in (0.1, 1], rank 1 of 2
    assert ttft.p50 == pytest.approx(0.325)  # summed: 2 in (0, 0.1], 4 in (0.1, 1]; rank 3 -> 1 of 4
    assert total.histograms.itl is None  # not exposed


def test_window_with_a_restart_in_the_middle() -> None:
    # Engine 0 restarts between the scrapes at 5 s and 10 s: 100 -> 200 -> 30 is 100 + 30, not -70 or 30.
    a = scrape(0, {("vllm:prompt_tokens_total", E0): 100.0})
    b = scrape(5, {("vllm:prompt_tokens_total", E0): 200.0})
    c = scrape(10, {("vllm:prompt_tokens_total", E0): 30.0})
    w = compute_window(EP, [a, b, c], T0 + timedelta(seconds=12), 20)
    assert w is not None and w.total.prompt_tokens == 130.0


def test_window_without_baseline_has_gauges_only() -> None:
    only = scrape(0, vllm_values(1, 1, [1, 2, 2], [0, 0, 0]))
    w = compute_window(EP, [only], T0 + timedelta(seconds=1), 60)
    assert w is not None
    assert (w.start, w.span_s, w.scrapes) == (None, 0.0, 1)
    assert w.total.prompt_tokens is None and w.total.histograms.ttft is None and w.total.preemptions_per_s is None
    assert w.total.running == 6.0
    assert compute_window(EP, [only], T0 - timedelta(seconds=1), 60) is None  # nothing at or before now


def test_window_counts_an_idle_window_as_zero_not_unknown() -> None:
    values = vllm_values(1, 1, [1, 2, 2], [0, 0, 0])
    w = compute_window(EP, [scrape(0, values), scrape(5, values)], T0 + timedelta(seconds=5), 60)
    assert w is not None
    assert w.total.prompt_tokens == 0.0
    ttft = w.total.histograms.ttft
    assert ttft is not None and ttft.count == 0.0 and ttft.p50 is None and ttft.mean is None
    assert w.total.prefix_cache_hit_rate is None  # 0 / 0


def test_histograms_of_one_scrape() -> None:
    s = scrape(0, vllm_values(1, 1, [1, 2, 3], [0, 1, 1]))
    got = histograms(s, "vllm:time_to_first_token_seconds")
    assert got[E0] == Histogram(((0.1, 1.0), (1.0, 2.0), (INF, 3.0)), 0.6000000000000001, 3.0)
    assert set(got) == {E0, E1}


# --------------------------------------------------------------------------------------------------- store
def test_store_keeps_the_last_n_in_time_order() -> None:
    store = ScrapeStore(keep=3)
    for t in (0, 10, 5, 20, 15):
        assert store.add(bare(t))
    assert [(s.ts - T0).total_seconds() for s in store.scrapes(EP) if s.ts] == [10.0, 15.0, 20.0]
    latest = store.latest(EP)
    assert latest is not None and latest.ts == T0 + timedelta(seconds=20)
    assert store.endpoints() == (EP,)
    assert not store.add(Scrape(0, None, EP, ()))  # no time: cannot be placed in a window
    assert store.latest("other") is None and store.scrapes("other") == ()
    w = store.window(EP, T0 + timedelta(seconds=20), 7)
    assert w is not None and w.start == T0 + timedelta(seconds=15)
    with pytest.raises(ValueError, match="two"):
        ScrapeStore(keep=1)
