"""The latency sketch: exact while small, within its stated relative error after, mergeable, and robust to
clock artefacts (negative values, NaN)."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from ietop.model.sketch import EXACT_LIMIT, Sketch

_latencies = st.lists(st.floats(min_value=1e-5, max_value=3600.0, allow_nan=False), min_size=1, max_size=300)


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered) - 1e-9)) - 1]


@settings(max_examples=200, deadline=None)
@given(_latencies)
def test_exact_while_small(values: list[float]) -> None:
    sketch = Sketch()
    for v in values:
        sketch.add(v)
    for q in (0.5, 0.9, 0.99):
        assert sketch.quantile(q) == nearest_rank(values, q)
    assert sketch.count == len(values) and sketch.low == min(values) and sketch.high == max(values)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from(["lognormal", "uniform", "bimodal"]))
def test_within_the_relative_error_after(seed: int, shape: str) -> None:
    rng = random.Random(seed)
    draw = {
        "lognormal": lambda: rng.lognormvariate(-1.0, 1.5),
        "uniform": lambda: rng.uniform(1e-4, 600.0),
        "bimodal": lambda: rng.choice((0.05, 30.0)) * rng.uniform(0.9, 1.1),
    }[shape]
    values = [draw() for _ in range(EXACT_LIMIT + 500)]
    sketch = Sketch()
    for v in values:
        sketch.add(v)
    assert sketch.exact is None
    bound = (sketch.gamma - 1) / (sketch.gamma + 1) + 1e-9
    for q in (0.5, 0.9, 0.99):
        got, want = sketch.quantile(q), nearest_rank(values, q)
        assert got is not None and abs(got - want) <= bound * want


@settings(max_examples=100, deadline=None)
@given(_latencies, _latencies)
def test_merge_is_adding_both(a: list[float], b: list[float]) -> None:
    left, right, both = Sketch(), Sketch(), Sketch()
    for v in a:
        left.add(v)
        both.add(v)
    for v in b:
        right.add(v)
        both.add(v)
    left.merge(right)
    assert left.buckets == both.buckets and left.count == both.count
    assert left.low == both.low and left.high == both.high
    assert math.isclose(left.total, both.total)
    for q in (0.5, 0.9, 0.99):
        assert left.quantile(q) == both.quantile(q)


def test_negative_and_nan_count_as_zero() -> None:
    sketch = Sketch()
    for v in (-0.5, float("nan"), 0.0, 2.0):
        sketch.add(v)
    assert sketch.count == 4 and sketch.low == 0.0 and sketch.high == 2.0 and sketch.total == 2.0
    assert sketch.quantile(0.5) == 0.0 and sketch.quantile(1.0) == 2.0
