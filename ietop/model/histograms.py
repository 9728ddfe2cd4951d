"""Counter and histogram arithmetic on Prometheus samples: increases across restarts, bucket deltas,
merges and ``histogram_quantile``-style quantiles. ``ietop.model.counters`` builds windows from these.

Pure: standard library and ``parsers`` only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from parsers.events import Scrape

Labels = tuple[tuple[str, str], ...]
Buckets = tuple[tuple[float, float], ...]  # (upper bound `le`, cumulative count), sorted by le
Index = dict[str, dict[Labels, float]]  # sample name -> labels -> value, for one scrape


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


EMPTY = Histogram((), 0.0, 0.0)  # a series not born yet in a scrape whose metric exists


def histograms(scrape: Scrape, base: str) -> dict[Labels, Histogram]:
    """Rebuild every series of histogram ``base`` in one scrape, keyed by its labels without ``le``."""
    return index_histograms(index_scrape(scrape), base)


def index_histograms(index: Index, base: str) -> dict[Labels, Histogram]:
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


def index_scrape(scrape: Scrape) -> Index:
    index: Index = {}
    for sample in scrape.samples:
        index.setdefault(sample.name, {})[sample.labels] = sample.value
    return index
