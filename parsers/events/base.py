"""The base of every event (``parsers.events``): where the line came from and the time it carries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(slots=True)
class Event:
    """Base of all events."""

    line: int
    ts: datetime | None
