"""How durations read on screen (latencies, ages, countdowns)."""

from __future__ import annotations

from ietop.tui.format import secs


def test_durations_read_like_ages_and_tick_once_a_minute_past_an_hour() -> None:
    assert [secs(v) for v in (None, 0.25, 12.34, 59.96, 119.6, 3599.6, 7500, 90000)] == [
        "—", "250ms", "12.3s", "1m00s", "2m00s", "1h00m", "2h05m", "1d01h"]
    # A model resident since the morning: its age changes once a minute (the table re-renders that often).
    assert len({secs(3 * 3600 + s) for s in range(60)}) == 1
    assert len({secs(59 * 60 + s) for s in range(60)}) == 60
