"""Process-wide settings every ietop command starts with."""

from __future__ import annotations

import gc

RAISED_GEN0_THRESHOLD = 50_000
"""For `ietop analyze` and `ietop proxy`, which hold no UI. Measured with bench/dashboard.py's ingest
(tailer -> parser -> store): at CPython's default first threshold (700 allocations) the collector ran
every few hundred lines and re-walked the young line, event and request objects, 15-20 % of the time.
The proxy's RSS stays flat with it (37.2 MB after 10,000 streamed requests, bench/proxy_overhead.py)."""

DASHBOARD_GEN0_THRESHOLD = 10_000
"""For the dashboard (live, replay, demo): a compromise between ingest and memory. A batch of log lines (~2,000 per
256 KB read) allocates a few thousand events and tuples that die once the store has them; a young collection
that comes mid-batch walks them all, and the walks also evict the parser's data from the caches (the instruction
count barely sees it; the wall clock does). Measured with bench/dashboard.py on the 1M-line benchmark log,
rounds interleaved on this VM: 96.5k -> 122k lines/s from 700 to 3,000 (2026-11-29); on 2026-11-30, 3,000 /
20,000 / 50,000 in 5 interleaved rounds: medians 96.6k / 111.1k / 112.0k, and 3,000 / 10,000 in 5 more: 10,000
faster in 4, median per-round ratio 1.07. Higher costs memory: Textual's and asyncio's cyclic garbage lives
longer and fragments the heap. The replay of 1.13M inference requests held 112.4 MB at 700, 125.2 MB at 3,000
(peak 125.4), 141.3 MB at 10,000 (peak 142.8) and 148.3 MB at 20,000 (peak 151.6, over the 150 MB budget):
10,000 is the largest setting that keeps the peak within it with room to spare. (Those replays read each line in
full; since the replay parses as the live tail does, 10,000 holds 134.7 MB, peak 135.9, and with the redraws
paced by their cost 120.0 MB, peak 121.9, 2026-11-30.)"""

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
