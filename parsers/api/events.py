"""Events read from engine HTTP APIs (as opposed to log lines).

Kept apart from ``parsers.events`` so the log-event catalogue and the API-event catalogue can change
independently; both share the ``Event`` base, so the pipeline and the store treat them alike. Like every
poll event, ``line`` is 0: the event comes from an answer, not from a line of a log.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from parsers.events import Event

__all__ = ["OllamaResidency", "ResidentModel"]


@dataclass(frozen=True, slots=True)
class ResidentModel:
    """One model Ollama holds in memory (an entry of ``GET /api/ps``).

    Every field but ``name`` is None when the server left it out or sent something unreadable.
    """

    name: str
    size: int | None
    """Bytes the runner takes in total (≤ v0.11: the scheduler's estimate; later: what the runner reports)."""
    size_vram: int | None
    """Bytes of ``size`` in GPU memory; 0 means all on the CPU. v0.1.38–v0.1.4x omitted it when 0
    (ollama/ollama#4840), which reads as None here."""
    expires_at: datetime | None
    """When the keep-alive timer unloads the model, with the server's UTC offset. keep_alive < 0 gives a
    date ~292 years ahead (year 2318): resident until evicted or stopped."""
    context_length: int | None
    """Per-slot context (num_ctx), v0.10.0+; None before, and for 0 (not reported yet)."""
    digest: str | None
    """Manifest digest: the join key to ``/api/tags``."""


@dataclass(slots=True)
class OllamaResidency(Event):
    """The whole set of models resident in one Ollama server at one poll (an empty tuple: none).

    A full snapshot rather than a diff: the store derives loads and unloads by comparing consecutive
    snapshots, so a missed poll loses nothing but time resolution.
    """

    endpoint: str
    models: tuple[ResidentModel, ...]
