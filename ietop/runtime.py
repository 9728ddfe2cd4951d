"""Process-wide settings every ietop command starts with."""

from __future__ import annotations

import gc

RAISED_GEN0_THRESHOLD = 50_000
"""For `ietop analyze` and `ietop proxy`, which hold no UI. Measured with bench/dashboard.py's ingest
(tailer -> parser -> store): at CPython's default first threshold (700 allocations) the collector ran
every few hundred lines and re-walked the young line, event and request objects, 15-20 % of the time.
The proxy's RSS stays flat with it (37.2 MB after 10,000 streamed requests, bench/proxy_overhead.py)."""

DASHBOARD_GEN0_THRESHOLD = 3_000
"""For the dashboard (live, replay, demo): a compromise between ingest and memory. A batch of log lines
(~2,000 per 256 KB read) allocates a few thousand events and tuples that die once the store has them; at
the default 700 the collector walked them mid-batch, ~400 times on a 1M-line log, and the walks also
evicted the parser's data from the caches: ingest 96.5k -> 122k lines/s (median of 3 interleaved runs on
the 1M-line benchmark log; 6,000 was no faster). Higher costs memory: Textual's and asyncio's cyclic
garbage lives longer and fragments the heap. bench/dashboard.py's replay of 1.13M inference requests held
112.4 MB at 700 and 122.0 MB at 3,000 (peak 124.6), against a budget of 150 MB; on older code 236k
requests held 99.5 MB at 700, 128.8 MB at 10,000 and 151 MB at 50,000."""

_tuned = False


def tune_gc(*, raise_threshold: bool = False) -> None:
    """Freeze what imports created (never garbage, no longer walked by each full collection) and collect the
    young generation less often: DASHBOARD_GEN0_THRESHOLD, or with ``raise_threshold`` (no UI)
    RAISED_GEN0_THRESHOLD."""
    global _tuned
    if _tuned:
        return
    _tuned = True
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(RAISED_GEN0_THRESHOLD if raise_threshold else DASHBOARD_GEN0_THRESHOLD, gen1, gen2)
