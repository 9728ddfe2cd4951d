"""Durations as people read them, shared by the dashboard and the terminal report (`5079.0` s is `1h24m`)."""

from __future__ import annotations

import math


def secs(value: float | None) -> str:
    """Durations: ms below a second, s below a minute, then m+s, h+m from an hour, d+h from a day (as k9s shows
    an age). Past an hour a countdown or an age changes once a minute, not every second: the residency table
    then re-renders once a minute for a model loaded since the morning."""
    if value is None or not math.isfinite(value):  # a /metrics percentile can be NaN or +Inf
        return "—"
    if value < 1:
        return f"{value * 1000:.0f}ms"
    if value < 59.95:
        return f"{value:.1f}s"
    whole = round(value)  # 119.6 is 2m00s, not 1m60s
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"
