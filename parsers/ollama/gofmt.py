"""Go-side text formats shared by Ollama's server and runners: slog text lines, Go std-log lines,
`time.Duration` strings and slog attribute lists.

Kept apart from the Ollama message table so the grammar (how a line is built) and the vocabulary (what
a message means) can change independently: the grammar has been stable since v0.1.21, the vocabulary
changes in almost every release.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone, tzinfo

from parsers.text.memo import remember

# slog text handler: time=… level=… source=file.go:N msg=… attrs…  (source is absent in a few builds)
SLOG_RE = re.compile(
    r'time=(?P<time>\S+) level=(?P<level>[A-Z]+(?:[+-]\d+)?)(?: source=(?P<source>\S+))? '
    r'msg=(?P<msg>"[^"\\]*(?:\\.[^"\\]*)*"|\S*) ?(?P<attrs>.*)$'
)
# Go std log: 2024/06/02 18:43:45 routes.go:1007: [INFO ]message
GOLOG_RE = re.compile(
    r"(?P<date>\d{4}/\d{2}/\d{2}) (?P<clock>\d{2}:\d{2}:\d{2}) (?P<file>[\w.]+\.go):(?P<line>\d+): "
    r"(?:(?P<level>INFO|WARN|ERROR|DEBUG) )?(?P<msg>.*)$"
)
# A key starts a token (`(?<!\S)`): tried inside a long run of non-space characters with no `=` (a blob, 5,000
# digits), every position of the run would scan to its end again: a 1 MB line took 17 s.
_ATTR_RE = re.compile(r'(?<!\S)("[^"\\]*(?:\\.[^"\\]*)*"|[^\s=]+)=("[^"\\]*(?:\\.[^"\\]*)*"|\S*)')
_DURATION_PART_RE = re.compile(r"(\d+(?:\.\d+)?)(h|ms|us|µs|μs|ns|m|s)")
_DURATION_FULL_RE = re.compile(r"-?(?:\d+(?:\.\d+)?(?:h|ms|us|µs|μs|ns|m|s))+")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ns": 1e-9}


def unquote(value: str) -> str:
    """Undo Go `%q` quoting of an slog value (only the escapes slog emits matter here)."""
    if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        inner = value[1:-1]
        if "\\" in inner:
            inner = inner.replace('\\"', '"').replace("\\\\", "\\")
        return inner
    return value


def parse_attrs(attrs: str) -> Mapping[str, str]:
    """Tokenize `k=v k2="v 2"` into a mapping of unquoted strings. Later keys win. The mapping may be
    shared with other calls on the same text: read it, never change it."""
    # The same attribute text comes back line after line (a model's blob path and keep-alive on every
    # request's scheduler lines): remembered, it costs a hash instead of a tokenization.
    found = _ATTRS_SEEN.get(attrs)
    if found is None:
        # unquote() only where a quote opens the token: a call per key and value was a third of the cost.
        found = {
            (unquote(k) if k[0] == '"' else k): (unquote(v) if v[:1] == '"' else v) for k, v in _ATTR_RE.findall(attrs)
        }
        remember(_ATTRS_SEEN, attrs, found, max_entries=_ATTRS_SEEN_MAX)  # within ~1 MB
    return found


_ATTRS_SEEN: dict[str, dict[str, str]] = {}
_ATTRS_SEEN_MAX = 1024


def parse_go_duration(text: str) -> float | None:
    """`1h24m39s`, `7.6964767s`, `444.455595ms`, `16.724µs`, `0s` → seconds; None if not a duration."""
    text = text.strip()
    # Fast path for the single-unit forms that make up nearly every access line: one look at the last
    # two characters instead of trying each unit.
    if text[-1:] == "s":
        scale = _SCALE_BEFORE_S.get(text[-2:-1])
        body = text[:-2] if scale is not None else text[:-1]
        if body.isascii() and body.replace(".", "", 1).isdigit():
            return float(body) * (scale if scale is not None else 1.0)
    if not text or _DURATION_FULL_RE.fullmatch(text) is None:
        return None
    sign = -1.0 if text.startswith("-") else 1.0
    total = 0.0
    for number, unit in _DURATION_PART_RE.findall(text):
        total += float(number) * _UNIT_S[unit]
    return sign * total


_SCALE_BEFORE_S = {"m": 1e-3, "µ": 1e-6, "u": 1e-6, "n": 1e-9}
_TZ_CACHE: dict[timedelta, timezone] = {}
SECONDS = {f":{s:02d}": timedelta(seconds=s) for s in range(60)}
"""A clock's seconds field (`:06`, in GIN's stamps and slog's times) as the time it adds to its minute."""


def parse_slog_time(text: str) -> datetime | None:
    """slog `time=` value: RFC3339 with ms and an offset (`Z`, `+01:00`); Windows builds may omit it."""
    try:
        if text.endswith("Z"):
            if len(text) == 24 and text[19] == ".":
                # slog's own shape (2006-01-02T15:04:05.000Z): "+00:00" instead of .replace(tzinfo=…), which
                # is ~1.9 us on CPython 3.11, as slow as the parse (3.10's fromisoformat takes no "Z").
                try:
                    return datetime.fromisoformat(text[:-1] + "+00:00")
                except ValueError:
                    pass
            return datetime.fromisoformat(text[:-1]).replace(tzinfo=timezone.utc)
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def parse_golog_time(date: str, clock: str) -> datetime | None:
    """`2024/06/02` + `18:43:45` → naive local datetime (Go std log carries no zone)."""
    try:
        return datetime(  # noqa: DTZ001 - the Go std log has no zone
            int(date[0:4]), int(date[5:7]), int(date[8:10]), int(clock[0:2]), int(clock[3:5]), int(clock[6:8])
        )
    except ValueError:
        return None


_EPOCH_NAIVE = datetime(1970, 1, 1)  # noqa: DTZ001 - naive on purpose: log clocks without a zone
_EPOCH_UTC = datetime(1970, 1, 1, tzinfo=timezone.utc)
_EPOCH_IN: dict[tzinfo, datetime] = {timezone.utc: _EPOCH_UTC}
"""The epoch as a time in each zone of zone() (and UTC), holding that very zone object."""


def epoch(ts: datetime) -> float:
    """Sortable seconds. A naive time (the log gave no zone) is read as UTC: only order matters here."""
    tz = ts.tzinfo
    if tz is None:
        return (ts - _EPOCH_NAIVE).total_seconds()
    base = _EPOCH_IN.get(tz)
    if base is not None:
        # Exactly timestamp()'s seconds. With the very same zone object (the parsers' times) the subtraction
        # is wall-clock arithmetic: 0.3 us, where timestamp() asks the zone for its offset twice (1.3 us on
        # CPython 3.11); with another object of that offset it asks, and costs what timestamp() does.
        return (ts - base).total_seconds()
    return ts.timestamp()


def zone(offset: timedelta) -> timezone:
    """One zone object per offset, for the times the parsers build: epoch() is cheap for these."""
    tz = _TZ_CACHE.get(offset)
    if tz is None:
        tz = _TZ_CACHE[offset] = timezone(offset)
        _EPOCH_IN[tz] = _EPOCH_UTC.astimezone(tz)
    return tz


def with_offset(naive: datetime, offset: timedelta | None) -> datetime:
    """Attach a learned UTC offset to a naive local time; leave it naive when the offset is unknown."""
    if offset is None:
        return naive
    tz = zone(offset)
    if naive.fold or naive.tzinfo is not None:
        return naive.replace(tzinfo=tz)
    # The constructor, not .replace(tzinfo=tz): 0.76 against 1.9 us on CPython 3.11, per GIN second.
    return datetime(naive.year, naive.month, naive.day, naive.hour, naive.minute, naive.second, naive.microsecond, tz)
