"""Windowed numbers from cumulative Prometheus counters and histograms (vLLM `/metrics`).

vLLM exposes totals since the server started; ietop shows what happened in the last W seconds. The
method (vllm-formats.md §9): keep recent scrapes per endpoint, take the oldest scrape inside the window as
the baseline (the one just before the window when none is inside), difference every series between it and
the newest scrape, and estimate quantiles from the bucket deltas exactly like Prometheus'
`histogram_quantile`. A counter that goes down means the server restarted: the increase is counted from
zero again, never negative. Every consecutive pair of scrapes in the window is checked for that, so a
restart between the baseline and now is not hidden by a larger value afterwards.

Pure: standard library and `parsers` only, no clock (callers pass `now`), no I/O.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from parsers.events import Scrape
from parsers.vllm_metrics import COUNTERS, ENGINE_LABEL, GAUGES, HISTOGRAMS

Labels = tuple[tuple[str, str], ...]
Buckets = tuple[tuple[float, float], ...]  # (upper bound `le`, cumulative count), sorted by le
_Index = dict[str, dict[Labels, float]]  # sample name -> labels -> value, for one scrape


# ---------------------------------------------------------------------------------------------- counters
def counter_delta(prev: float, cur: float) -> float:
    """Increase of a counter between two readings: any decrease means it restarted, so the increase is
    ``cur`` itself (counted from zero). Never negative; 0 when either reading is not a finite number."""
    if not (math.isfinite(prev) and math.isfinite(cur)):
        return 0.0
    return max(cur, 0.0) if cur < prev else cur - prev


def increase(values: Sequence[float]) -> float:
    """Total increase over consecutive readings with restarts, like Prometheus `increase()` without
    extrapolation. Equals the sum of :func:`counter_delta` over consecutive pairs, computed segment by
    segment (last minus first between restarts) so that no rounding accumulates."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return 0.0
    total, start, prev = 0.0, finite[0], finite[0]
    for value in finite[1:]:
        if value < prev:  # restart: close the segment; the new one starts from zero
            total += max(prev - start, 0.0)
            start = 0.0
        prev = value
    return total + max(prev - start, 0.0)


# -------------------------------------------------------------------------------------------- histograms
@dataclass(frozen=True, slots=True)
class Histogram:
    """One histogram series: cumulative buckets sorted by ``le`` (as read from the scrape: vLLM's buckets
    are configurable), ``sum`` and ``count`` (None when the scrape lacks them). As a delta, ``reset`` says
    a restart was seen and the values are the newer cumulative ones alone."""

    buckets: Buckets
    sum: float | None
    count: float | None
    reset: bool = False

    @property
    def les(self) -> tuple[float, ...]:
        return tuple(le for le, _ in self.buckets)


_EMPTY = Histogram((), 0.0, 0.0)  # a series not born yet in a scrape whose metric exists


def histograms(scrape: Scrape, base: str) -> dict[Labels, Histogram]:
    """Rebuild every series of histogram ``base`` in one scrape, keyed by its labels without ``le``."""
    return _histograms(_index(scrape), base)


def _histograms(index: _Index, base: str) -> dict[Labels, Histogram]:
    buckets: dict[Labels, list[tuple[float, float]]] = {}
    for labels, value in index.get(base + "_bucket", {}).items():
        rest = tuple(kv for kv in labels if kv[0] != "le")
        le = dict(labels).get("le")
        try:
            bound = float(le) if le is not None else math.nan  # float() reads "+Inf" as inf
        except ValueError:
            continue
        if not math.isnan(bound):
            buckets.setdefault(rest, []).append((bound, value))
    sums, counts = index.get(base + "_sum", {}), index.get(base + "_count", {})
    out: dict[Labels, Histogram] = {}
    for labels in {*buckets, *sums, *counts}:
        cum = tuple(sorted(buckets.get(labels, [])))
        count = counts.get(labels)
        if count is None and cum and math.isinf(cum[-1][0]):
            count = cum[-1][1]  # the +Inf bucket is the count by definition
        out[labels] = Histogram(cum, sums.get(labels), count)
    return out


def _sub(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def histogram_delta(prev: Histogram, cur: Histogram) -> Histogram:
    """Bucket, sum and count increases from ``prev`` to ``cur``. A restart (any delta < 0, or the bucket
    layout changed) gives ``cur`` alone with ``reset`` set; a series absent before counts from zero."""
    if not prev.buckets and not prev.count:
        return replace(cur, reset=False)
    if prev.les != cur.les:
        return replace(cur, reset=True)
    delta = Histogram(
        tuple((le, c - p) for (le, c), (_, p) in zip(cur.buckets, prev.buckets, strict=True)),
        _sub(cur.sum, prev.sum),
        _sub(cur.count, prev.count),
    )
    parts = [d for _, d in delta.buckets] + [v for v in (delta.sum, delta.count) if v is not None]
    return replace(cur, reset=True) if any(d < 0 for d in parts) else delta


def histogram_increase(series: Sequence[Histogram]) -> Histogram | None:
    """Windowed increase over consecutive readings of one series (oldest first), restarts handled per
    step. Segments between restarts with a different bucket layout cannot be added: the older are dropped."""
    if len(series) < 2:
        return None
    segments: list[Histogram] = []
    start = prev = series[0]
    from_zero = False
    for cur in series[1:]:
        if histogram_delta(prev, cur).reset:
            segments.append(prev if from_zero else histogram_delta(start, prev))
            start, from_zero = cur, True
        prev = cur
    segments.append(prev if from_zero else histogram_delta(start, prev))
    total = replace(segments[-1], reset=len(segments) > 1)
    for older in reversed(segments[:-1]):
        if older.les != total.les:
            break
        total = _plus(total, older)
    return total


def _plus(a: Histogram, b: Histogram) -> Histogram:
    buckets = tuple((le, x + y) for (le, x), (_, y) in zip(a.buckets, b.buckets, strict=True))
    return Histogram(buckets, _add(a.sum, b.sum), _add(a.count, b.count), a.reset or b.reset)


def merge_histograms(parts: Iterable[Histogram]) -> Histogram | None:
    """Sum of several series (e.g. over the ``engine`` label). Buckets are added only when every part has
    the same layout; otherwise they are unknown (empty) while sum and count still add up."""
    items = list(parts)
    if not items:
        return None
    total = items[0]
    for item in items[1:]:
        if item.les == total.les:
            total = _plus(total, item)
        else:
            total = Histogram((), _add(total.sum, item.sum), _add(total.count, item.count), total.reset or item.reset)
    return total


def quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """Prometheus `histogram_quantile` on cumulative buckets (le, count): rank q·N, linear interpolation
    inside the bucket holding the rank, 0 as the lower edge of the first bucket (the edge itself when it
    is <= 0), the highest finite ``le`` when the rank falls in +Inf. None when N == 0, when there is no
    +Inf bucket, or fewer than two buckets (Prometheus returns NaN there).

    One deliberate difference: for q == 0 with leading empty buckets Prometheus divides 0 by 0 (NaN);
    this returns the lower edge of the first non-empty bucket, the limit as q -> 0.
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {q}")
    merged: dict[float, float] = {}
    for le, count in buckets:  # buckets with the same bound are added up, as Prometheus coalesces them
        merged[le] = merged.get(le, 0.0) + count
    les = sorted(merged)
    if len(les) < 2 or not math.isinf(les[-1]) or les[-1] < 0:
        return None
    cum: list[float] = []
    for le in les:  # force monotonic, as Prometheus does for slightly inconsistent scrapes
        cum.append(max(merged[le], cum[-1] if cum else 0.0))
    total = cum[-1]
    if not total > 0:
        return None
    rank = q * total
    last = len(les) - 1
    hit = next((i for i in range(last) if (cum[i] >= rank if rank > 0 else cum[i] > 0)), last)
    if hit == last:
        return les[-2]
    if hit == 0 and les[0] <= 0:
        return les[0]
    lower = les[hit - 1] if hit else 0.0
    below = cum[hit - 1] if hit else 0.0
    estimate = lower + (les[hit] - lower) * (rank - below) / (cum[hit] - below)
    return min(max(estimate, lower), les[hit])  # rounding must not leave the bucket (keeps q monotonic)


# -------------------------------------------------------------------------------------------- the window
@dataclass(frozen=True, slots=True)
class HistogramStats:
    """One histogram over the window: observations, exact mean (Δsum/Δcount) and estimated quantiles."""

    count: float | None
    sum: float | None
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    reset: bool


@dataclass(frozen=True, slots=True)
class Histograms:
    """The histograms ietop shows (keys of parsers.vllm_metrics.HISTOGRAMS); None when not exposed."""

    ttft: HistogramStats | None
    itl: HistogramStats | None
    e2e: HistogramStats | None
    queue: HistogramStats | None
    prefill: HistogramStats | None
    decode: HistogramStats | None
    prompt_tokens: HistogramStats | None
    generation_tokens: HistogramStats | None


@dataclass(frozen=True, slots=True)
class EngineWindow:
    """One data-parallel engine (``engine`` label value), or all of them summed (``engine`` None).

    Increases (Δ) cover the window; gauges come from the newest scrape. None means not measurable: the
    metric is absent, there is no baseline yet, or a ratio has a zero denominator.
    """

    engine: str | None
    histograms: Histograms
    prompt_tokens: float | None
    generation_tokens: float | None
    requests: float | None  # finished requests (Δ request_success_total, all finished_reason values)
    finished: tuple[tuple[str, float], ...]  # Δ request_success_total per finished_reason
    prompt_tokens_per_request: float | None
    generation_tokens_per_request: float | None
    prompt_tokens_per_s: float | None
    generation_tokens_per_s: float | None
    prefix_cache_queries: float | None
    prefix_cache_hits: float | None
    prefix_cache_hit_rate: float | None  # Δhits/Δqueries, 0-1
    preemptions: float | None
    preemptions_per_s: float | None
    running: float | None
    waiting: float | None
    kv_cache_usage: float | None  # 0-1 fraction (vllm:kv_cache_usage_perc is a fraction despite its name)


@dataclass(frozen=True, slots=True)
class Window:
    """What one endpoint did between ``start`` (the baseline scrape; None when there is none yet and
    only gauges are known) and ``end`` (the newest scrape at or before `now`)."""

    endpoint: str
    start: datetime | None
    end: datetime
    span_s: float
    scrapes: int  # scrapes from the baseline to the newest, both included
    total: EngineWindow
    engines: tuple[EngineWindow, ...]  # per engine label value, in numeric order; empty for V0


def window_chain(scrapes: Iterable[Scrape], now: datetime, seconds: float) -> tuple[Scrape, ...]:
    """The scrapes a window uses, oldest first: from the baseline (oldest scrape inside [now-seconds,
    now] other than the newest; else the newest before the window) to the newest scrape at or before
    ``now``. One scrape when there is no baseline; empty when nothing is at or before ``now``."""
    if not seconds > 0:
        raise ValueError(f"window must be positive, got {seconds}")
    timed = sorted((s for s in scrapes if s.ts is not None and s.ts <= now), key=_ts)
    if not timed:
        return ()
    newest = _ts(timed[-1])
    start = now - timedelta(seconds=seconds)
    earlier = [i for i, s in enumerate(timed) if _ts(s) < newest]
    inside = [i for i in earlier if _ts(timed[i]) >= start]
    if inside:
        return tuple(timed[inside[0] :])
    return tuple(timed[earlier[-1] :]) if earlier else (timed[-1],)


def compute_window(endpoint: str, scrapes: Iterable[Scrape], now: datetime, seconds: float) -> Window | None:
    """The window for one endpoint's scrapes; None when no scrape is at or before ``now``."""
    chain = window_chain(scrapes, now, seconds)
    if not chain:
        return None
    indexes = [_index(s) for s in chain]
    newest = indexes[-1]
    has_baseline = len(chain) > 1
    span = (_ts(chain[-1]) - _ts(chain[0])).total_seconds()
    hists = {key: _series_hist(indexes, base) if has_baseline else {} for key, base in HISTOGRAMS.items()}
    counters = {key: _series_increase(indexes, name) if has_baseline else {} for key, name in COUNTERS.items()}
    gauges = {key: newest.get(name, {}) for key, name in GAUGES.items()}
    label_sets = [labels for fam in hists.values() for labels in fam]
    label_sets += [labels for fam in (*counters.values(), *gauges.values()) for labels in fam]
    engines = {e for e in map(_engine, label_sets) if e is not None}
    ordered = sorted(engines, key=lambda e: (0, int(e), e) if e.isascii() and e.isdigit() else (1, 0, e))
    per_engine = tuple(_engine_window(e, hists, counters, gauges, span) for e in ordered)
    total = _engine_window(None, hists, counters, gauges, span)
    start = _ts(chain[0]) if has_baseline else None
    return Window(endpoint, start, _ts(chain[-1]), span, len(chain), total, per_engine)


def _engine_window(engine: str | None, hists: dict[str, dict[Labels, Histogram]],
                   counters: dict[str, dict[Labels, float]], gauges: dict[str, dict[Labels, float]],
                   span: float) -> EngineWindow:
    def mine(labels: Labels) -> bool:
        return engine is None or _engine(labels) == engine

    def gauge(key: str) -> list[float]:
        return [v for labels, v in gauges[key].items() if mine(labels)]

    def delta(key: str) -> float | None:
        values = [v for labels, v in counters[key].items() if mine(labels)]
        return sum(values) if values else None

    stats = {key: _stats(merge_histograms(h for labels, h in series.items() if mine(labels)))
             for key, series in hists.items()}
    finished: dict[str, float] = {}
    for labels, value in counters["request_success"].items():
        if mine(labels):
            reason = dict(labels).get("finished_reason", "")
            finished[reason] = finished.get(reason, 0.0) + value
    requests = sum(finished.values()) if finished else None
    if requests is None and stats["prompt_tokens"] is not None:
        requests = stats["prompt_tokens"].count  # one observation per finished request
    prompt, generation = delta("prompt_tokens"), delta("generation_tokens")
    queries, hits, preemptions = delta("prefix_cache_queries"), delta("prefix_cache_hits"), delta("preemptions")
    running, waiting, kv = gauge("running"), gauge("waiting"), gauge("kv_cache_usage")
    return EngineWindow(
        engine=engine,
        histograms=Histograms(**stats),
        prompt_tokens=prompt,
        generation_tokens=generation,
        requests=requests,
        finished=tuple(sorted(finished.items())),
        prompt_tokens_per_request=_ratio(prompt, requests),
        generation_tokens_per_request=_ratio(generation, requests),
        prompt_tokens_per_s=_ratio(prompt, span),
        generation_tokens_per_s=_ratio(generation, span),
        prefix_cache_queries=queries,
        prefix_cache_hits=hits,
        prefix_cache_hit_rate=_ratio(hits, queries),
        preemptions=preemptions,
        preemptions_per_s=_ratio(preemptions, span),
        running=sum(running) if running else None,
        waiting=sum(waiting) if waiting else None,
        # Engines of one server have equal KV caches: the server-wide fraction is the mean of theirs.
        kv_cache_usage=sum(kv) / len(kv) if kv else None,
    )


def _stats(hist: Histogram | None) -> HistogramStats | None:
    if hist is None:
        return None
    p50, p90, p99 = (quantile(q, hist.buckets) for q in (0.5, 0.9, 0.99))
    return HistogramStats(hist.count, hist.sum, _ratio(hist.sum, hist.count), p50, p90, p99, hist.reset)


def _series_increase(indexes: Sequence[_Index], name: str) -> dict[Labels, float]:
    """Windowed increase of every series of counter ``name``. Scrapes without the metric are skipped; in
    a scrape that has it, a series not there yet reads 0 (vLLM creates series lazily for some labels)."""
    present = [index[name] for index in indexes if name in index]
    if len(present) < 2:
        return {}
    labels_seen = {labels for series in present for labels in series}
    return {labels: increase([series.get(labels, 0.0) for series in present]) for labels in labels_seen}


def _series_hist(indexes: Sequence[_Index], base: str) -> dict[Labels, Histogram]:
    present = [h for h in (_histograms(index, base) for index in indexes) if h]
    labels_seen = {labels for series in present for labels in series}
    out: dict[Labels, Histogram] = {}
    for labels in labels_seen:
        delta = histogram_increase([series.get(labels, _EMPTY) for series in present])
        if delta is not None:
            out[labels] = delta
    return out


def _ratio(num: float | None, den: float | None) -> float | None:
    return None if num is None or den is None or not den > 0 else num / den


def _engine(labels: Labels) -> str | None:
    return dict(labels).get(ENGINE_LABEL)


def _ts(scrape: Scrape) -> datetime:
    assert scrape.ts is not None  # window_chain keeps only timed scrapes
    return scrape.ts


def _index(scrape: Scrape) -> _Index:
    index: _Index = {}
    for sample in scrape.samples:
        index.setdefault(sample.name, {})[sample.labels] = sample.value
    return index


# --------------------------------------------------------------------------------------------- the store
class ScrapeStore:
    """The last ``keep`` scrapes of each endpoint, in time order (a late scrape is slotted in place)."""

    def __init__(self, keep: int = 256) -> None:
        if keep < 2:
            raise ValueError("a window needs at least two scrapes")
        self._keep = keep
        self._by_endpoint: dict[str, list[Scrape]] = {}

    def add(self, scrape: Scrape) -> bool:
        """Keep ``scrape``; False (not kept) when it has no time, since it cannot be placed in a window."""
        if scrape.ts is None:
            return False
        kept = self._by_endpoint.setdefault(scrape.endpoint, [])
        bisect.insort_right(kept, scrape, key=_ts)
        del kept[: max(0, len(kept) - self._keep)]
        return True

    def endpoints(self) -> tuple[str, ...]:
        return tuple(self._by_endpoint)

    def scrapes(self, endpoint: str) -> tuple[Scrape, ...]:
        return tuple(self._by_endpoint.get(endpoint, ()))

    def latest(self, endpoint: str) -> Scrape | None:
        kept = self._by_endpoint.get(endpoint)
        return kept[-1] if kept else None

    def window(self, endpoint: str, now: datetime, seconds: float) -> Window | None:
        """See :func:`compute_window`."""
        return compute_window(endpoint, self._by_endpoint.get(endpoint, ()), now, seconds)
