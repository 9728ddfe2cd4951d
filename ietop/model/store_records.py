"""What the store keeps about its inputs (sources, engine endpoints) and the simplest sink it feeds.

Plain records, kept apart from ietop.model.store so that the store module holds the event logic alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from parsers.events.base import Event

__all__ = ["EngineState", "ListSink", "Sink", "SourceFailed", "SourceInfo"]

Sink = Callable[[str, Any], None]
"""Receives each finalized record: `sink(kind, record)`."""


@dataclass(slots=True)
class SourceInfo:
    path: str
    engine: str
    format: str | None = None
    version: str | None = None
    lines: int = 0
    unparsed_lines: int = 0
    failed: str | None = None
    """Why the source gave up for good (`exit 1`, `docker not found`); None while it is read (SourceFailed)."""


@dataclass(slots=True)
class SourceFailed(Event):
    """What a feed posts when its source can give nothing more (a followed command exited with an error, or
    could not start; the proxy could not listen): said by the wiring, not by a log line (``line`` is 0).
    The dashboard's toast fades; the store keeps this on the source, and as an error for the Events panel.

    ``reason``: a few words for the header (`exit 1`). ``detail``: what the source said about it, e.g. the
    command's last stderr line (untrusted text, made inert where it is shown), or ""."""

    reason: str
    detail: str


@dataclass(slots=True)
class EngineState:
    """An engine endpoint as its polls and its log describe it."""

    engine: str
    endpoint: str
    state: str = "unknown"
    detail: str = ""
    since: float | None = None
    models: tuple[str, ...] | None = None
    version: str | None = None
    context: int | None = None
    """The context its models run with, as its API says (vLLM `/v1/models` max_model_len)."""


class ListSink:
    """Keeps every finalized record in memory (tests, small logs)."""

    def __init__(self) -> None:
        self.records: dict[str, list[Any]] = {}

    def __call__(self, kind: str, record: Any) -> None:
        self.records.setdefault(kind, []).append(record)
