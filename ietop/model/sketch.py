"""A mergeable log-bucket latency sketch with bounded memory and a stated relative error.

Why not keep every sample: the dashboard must stay under its RSS budget after a million requests and
`analyze` must stay flat in the size of the log. Buckets grow geometrically by ``gamma``; a quantile is
reported as the geometric middle of its bucket, so its relative error is at most ``(gamma-1)/(gamma+1)``
(≈1 % for the default). Values at or below ``min_value`` share one bucket (latencies under 1 µs are 0 for
every practical purpose). Exact count, sum, min and max are kept alongside, and so are the samples
themselves while there are at most ``EXACT_LIMIT`` of them: a post-mortem of a few hundred requests
should read exact percentiles, not bucket midpoints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

EXACT_LIMIT = 4096


@dataclass(slots=True)
class Sketch:
    """Relative-error quantile sketch (DDSketch-style, positive values)."""

    gamma: float = 1.02
    min_value: float = 1e-6
    buckets: dict[int, int] = field(default_factory=dict)
    count: int = 0
    total: float = 0.0
    low: float = math.inf
    high: float = -math.inf
    exact: list[float] | None = field(default_factory=list)
    log_gamma: float = field(init=False, repr=False, compare=False)
    """log(gamma), once: log(x, gamma) is log(x) / log(gamma), so add() divides by it and keys are the same."""

    def __post_init__(self) -> None:
        self.log_gamma = math.log(self.gamma)

    def add(self, value: float) -> None:
        """Record one sample (negative values are clamped to 0: a clock artefact, not a latency)."""
        # Called for every request: comparisons instead of max()/min() calls, and the key inline.
        v = value if value > 0.0 else 0.0
        key = -(2**31) if v <= self.min_value else math.ceil(math.log(v / self.min_value) / self.log_gamma)
        buckets = self.buckets
        buckets[key] = buckets.get(key, 0) + 1
        self.count += 1
        self.total += v
        if v < self.low:
            self.low = v
        if v > self.high:
            self.high = v
        if self.exact is not None:
            self.exact.append(v)
            if len(self.exact) > EXACT_LIMIT:
                self.exact = None

    def merge(self, other: Sketch) -> None:
        """Fold another sketch with the same parameters into this one."""
        if (other.gamma, other.min_value) != (self.gamma, self.min_value):
            raise ValueError("cannot merge sketches with different parameters")
        for k, n in other.buckets.items():
            self.buckets[k] = self.buckets.get(k, 0) + n
        self.count += other.count
        self.total += other.total
        self.low = min(self.low, other.low)
        self.high = max(self.high, other.high)
        if self.exact is not None and other.exact is not None and len(self.exact) + len(other.exact) <= EXACT_LIMIT:
            self.exact.extend(other.exact)
        else:
            self.exact = None

    def quantile(self, q: float) -> float | None:
        """The nearest-rank q-quantile (0..1): the smallest recorded value with at least q·count values at
        or below it, within the relative error; exact at q=0 and q=1. None when empty."""
        if self.count == 0:
            return None
        if q <= 0:
            return self.low
        if q >= 1:
            return self.high
        rank = max(1, math.ceil(q * self.count - 1e-9))
        if self.exact is not None:
            return sorted(self.exact)[rank - 1]
        seen = 0
        for key in sorted(self.buckets):
            seen += self.buckets[key]
            if seen >= rank:
                return min(max(self._value(key), self.low), self.high)
        return self.high

    def _value(self, key: int) -> float:
        if key == -(2**31):
            return 0.0
        upper = self.min_value * self.gamma**key
        return 2 * upper / (self.gamma + 1)

    def summary(self) -> dict[str, float | int | None]:
        """count, p50, p90, p99, max, mean — the shape the report and `--json` use."""
        return {
            "count": self.count,
            "p50": self.quantile(0.5),
            "p90": self.quantile(0.9),
            "p99": self.quantile(0.99),
            "max": self.high if self.count else None,
            "mean": self.total / self.count if self.count else None,
        }
