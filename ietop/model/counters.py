"""Windowed numbers from cumulative Prometheus counters and histograms (vLLM `/metrics`).

vLLM exposes totals since the server started; ietop shows what happened in the last W seconds. The
method (vllm-formats.md §9): keep recent scrapes per endpoint, take the oldest scrape inside the window as
the baseline (the one just before the window when none is inside), difference every series between it and
the newest scrape, and estimate quantiles from the bucket deltas exactly like Prometheus'
`histogram_quantile`. A counter that goes down means the server restarted: the increase is counted from
zero again, never negative. Every consecutive pair of scrapes in the window is checked for that, so a
restart between the baseline and now is not hidden by a larger value afterwards.

The arithmetic on counters and buckets is in ``ietop.model.histograms``. Pure: standard library and
`parsers` only, no clock (callers pass `now`), no I/O.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ietop.model.histograms import (
    EMPTY,
    Histogram,
    Index,
    Labels,
    histogram_increase,
    increase,
    index_histograms,
    index_scrape,
    merge_histograms,
    quantile,
)
from parsers.events import Scrape
from parsers.vllm.metrics import COUNTERS, ENGINE_LABEL, GAUGES, HISTOGRAMS


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
    """The histograms ietop shows (keys of parsers.vllm.metrics.HISTOGRAMS); None when not exposed."""

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
    indexes = [index_scrape(s) for s in chain]
    newest = indexes[-1]
    has_baseline = len(chain) > 1
    span = (_ts(chain[-1]) - _ts(chain[0])).total_seconds()
    hists = {key: _series_hist(indexes, base) if has_baseline else {} for key, base in HISTOGRAMS.items()}
    counters = {key: _series_increase(indexes, name) if has_baseline else {} for key, name in COUNTERS.items()}
    gauges = {key: newest.get(name, {}) for key, name in GAUGES.items()}
    label_sets = [labels for fam in hists.values() for labels in fam]
    label_sets += [labels for fam in (*counters.values(), *gauges.values()) for labels in fam]
    engines = {e for e in map(_engine, label_sets) if e is not None}
    # Engine indexes in numeric order; a label of thousands of digits (int() refuses over 4,300) sorts as text.
    ordered = sorted(engines, key=lambda e: (0, int(e), e) if e.isascii() and e.isdigit() and len(e) < 19
                     else (1, 0, e))
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


def since_start(scrape: Scrape) -> Histograms:
    """The histograms of one scrape as they stand, all engines summed: every observation since the server
    (or the series) started. What a single saved scrape can tell, where a window needs two."""
    index = index_scrape(scrape)
    return Histograms(**{key: _stats(merge_histograms(index_histograms(index, base).values()))
                         for key, base in HISTOGRAMS.items()})


def _stats(hist: Histogram | None) -> HistogramStats | None:
    if hist is None:
        return None
    p50, p90, p99 = (quantile(q, hist.buckets) for q in (0.5, 0.9, 0.99))
    return HistogramStats(hist.count, hist.sum, _ratio(hist.sum, hist.count), p50, p90, p99, hist.reset)


def _series_increase(indexes: Sequence[Index], name: str) -> dict[Labels, float]:
    """Windowed increase of every series of counter ``name``. Scrapes without the metric are skipped; in
    a scrape that has it, a series not there yet reads 0 (vLLM creates series lazily for some labels)."""
    present = [index[name] for index in indexes if name in index]
    if len(present) < 2:
        return {}
    labels_seen = {labels for series in present for labels in series}
    return {labels: increase([series.get(labels, 0.0) for series in present]) for labels in labels_seen}


def _series_hist(indexes: Sequence[Index], base: str) -> dict[Labels, Histogram]:
    present = [h for h in (index_histograms(index, base) for index in indexes) if h]
    labels_seen = {labels for series in present for labels in series}
    out: dict[Labels, Histogram] = {}
    for labels in labels_seen:
        delta = histogram_increase([series.get(labels, EMPTY) for series in present])
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
