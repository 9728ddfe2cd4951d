"""Durations as people read them; a /metrics percentile can be NaN or +Inf (found by bench/fuzz_campaign.py:
`round(nan)` crashed the terminal report)."""

from __future__ import annotations

import pytest

from ietop.model.durations import secs


@pytest.mark.parametrize(("value", "shown"), [
    (None, "—"), (float("nan"), "—"), (float("inf"), "—"), (-float("inf"), "—"),
    (0.444, "444ms"), (12.4, "12.4s"), (119.6, "2m00s"), (5079.0, "1h24m"), (90000.0, "1d01h"),
])
def test_secs(value: float | None, shown: str) -> None:
    assert secs(value) == shown
