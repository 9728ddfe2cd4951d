"""Numbers no engine writes: the guard between what a line says and what the model believes.

A line is untrusted text. `started in 9999…(400 digits) seconds` parses (the patterns take any run of
digits) but the number it gives is infinite as a float, or an int too large to become one: the store would
divide by it, the JSON report would carry `Infinity` (not JSON), a table writer would refuse it. Such an
event is counted as an unparsed line instead, where the line totals still add up and the report says so.

The bound is 2**53: every integer below it is exact as a JSON number in any reader (JavaScript's too), and
it is far beyond any real count, byte size or duration (285 million years in seconds).
"""

from __future__ import annotations

import dataclasses
import re

from parsers.events.base import Event

LIMIT = float(2**53)
# A field's annotation (a string: every event module uses postponed annotations) that may hold one number:
# `int`, `float | None`, `float | str` (a start-up fact's value), never a container.
_NAME_RE = re.compile(r"^\w+$")
_FIELDS: dict[type, tuple[str, ...]] = {}


def _one_number(annotation: object) -> bool:
    if not isinstance(annotation, str):
        return False
    members = [m.strip() for m in annotation.split("|")]
    return all(_NAME_RE.match(m) for m in members) and bool({"int", "float"} & set(members))


def numeric_fields(cls: type) -> tuple[str, ...]:
    """The names of an event class's fields that may hold one int or float; bools and containers excluded."""
    found = _FIELDS.get(cls)
    if found is None:
        found = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls) if _one_number(f.type))
    return found


def implausible(event: Event) -> str | None:
    """The first numeric field of `event` that is NaN, infinite or beyond ±2**53, else None."""
    cls = type(event)
    names = _FIELDS.get(cls)
    if names is None:
        names = numeric_fields(cls)
    for name in names:
        value = getattr(event, name)
        # `not (a < x < b)` is also true for NaN; bool is an int, and always in range; a str is no number.
        if value is not None and value.__class__ is not str and not -LIMIT < value < LIMIT:
            return name
    return None
