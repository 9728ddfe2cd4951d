"""The model: pure state built from events — the store, its records and facts, settings, residency, counters,
sketches, the live snapshot and timeline. Engine-specific trackers live in `engines`, diagnostic hints in
`hints`. Imports the standard library and `parsers` only: no I/O, no clock, no presentation.
"""

from __future__ import annotations
