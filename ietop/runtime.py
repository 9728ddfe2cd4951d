"""Process-wide settings every ietop command starts with."""

from __future__ import annotations

import gc

RAISED_GEN0_THRESHOLD = 50_000
"""For `ietop analyze` and `ietop proxy`, which hold no UI. Measured with bench/dashboard.py's ingest
(tailer -> parser -> store): at CPython's default first threshold (700 allocations) the collector ran
every few hundred lines and re-walked the young line, event and request objects, 15-20 % of the time.
The dashboard keeps the default: replaying 236k inference requests it held 99.5 MB at 700, 128.8 MB at
10,000 and 151 MB at 50,000 (Textual's and asyncio's cyclic garbage lived longer and fragmented the
heap), against a budget of 150 MB for 1M. The proxy's RSS stays flat with it (37.2 MB after 10,000
streamed requests, bench/proxy_overhead.py)."""

_tuned = False


def tune_gc(*, raise_threshold: bool = False) -> None:
    """Freeze what imports created (never garbage, no longer walked by each full collection); with
    ``raise_threshold``, also collect the young generation less often."""
    global _tuned
    if _tuned:
        return
    _tuned = True
    gc.freeze()
    if raise_threshold:
        _, gen1, gen2 = gc.get_threshold()
        gc.set_threshold(RAISED_GEN0_THRESHOLD, gen1, gen2)
