"""Process-wide settings every ietop command starts with."""

from __future__ import annotations

import gc

# Measured with bench/dashboard.py's ingest (tailer -> parser -> store): at CPython's default first
# threshold (700 allocations) the collector ran every few hundred lines and re-walked the young line,
# event and request objects, 15-20 % of ingest time. Those are freed by reference counting, not by the
# collector, which only finds cycles; it still runs, less often, so a cycle is still freed.
GEN0_THRESHOLD = 50_000

_tuned = False


def tune_gc() -> None:
    """Freeze what imports created (never garbage) and collect the young generation less often."""
    global _tuned
    if _tuned:
        return
    _tuned = True
    gc.freeze()  # import-time objects leave the generations the collector walks
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)
