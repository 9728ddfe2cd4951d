"""Ollama's access lines (gin's logger): `[GIN] 2024/05/02 - 12:33:06 | 200 | 52.021µs | 127.0.0.1 | HEAD "/"`.

The lines a busy server writes most, read three ways: GIN's own layout in one regex, other spacing by
splitting on the bars, anything else by the full regex; and, for a consumer that only counts successful
non-inference requests, recognised whole (envelope included) without building an event. Kept apart from
the rest of the Ollama parser (parsers.ollama.log), whose OllamaParser is a GinReader.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from parsers.events import Event, HttpAccess
from parsers.ollama.gofmt import SECONDS, epoch, parse_go_duration, unquote, with_offset

GIN_RE = re.compile(
    r"\[GIN\] (\d{4})/(\d{2})/(\d{2}) - (\d{2}):(\d{2}):(\d{2}) \|\s*(\d{3})\s*\|\s*(\S+)\s*\|\s*(\S*)\s*\|\s*"
    r'([A-Z]+)\s+"([^"\\]*(?:\\.[^"\\]*)*)"'
)
# A successful access line that is not inference (health checks, `/api/tags`, `/api/ps`…), bare or inside a
# `docker logs -t`, journald or compose envelope: the lines a busy server writes most. Taken only where
# strip_envelope() and _gin() would certainly turn the line into exactly such an HttpAccess: no "*" (markdown
# bold) and no ESC (ANSI colours) anywhere, no trailer, a well-formed quoted path. Those two characters, the
# tag and POST are substring tests in front of the pattern (_PROBE_TAG, _PROBE_REFUSES, _PROBE_ESC): a scan
# in C is cheaper than the pattern finding them, and with "*" and ESC out of its classes the pattern itself
# runs a quarter faster. A line with ESC goes to probe_colored() instead. Group 1 is GIN's 21-character
# stamp, which probe_epoch() still has to accept as a date. The envelope alternatives are those
# strip_envelope() takes off such a line in one step (docker -t, journald, compose).
_PROBE_TAG = "[GIN] "
_PROBE_REFUSES = ("| POST ", "*")
_PROBE_ESC = "\x1b"
_PROBE_RE = re.compile(
    # No envelope first (a bare line, the commonest): trying the three envelopes on it cost a tenth.
    r"(?:(?=\[GIN\] )"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z "
    r"|(?![\[{\s]|time=|\d...-..-)[^ ]++(?: +\d{1,2})? +\d\d:\d\d:\d\d(?:\.\d+)? ++(?:[^ ]+ +)?"
    r"[^ \[]+\[\d+\]: ?"
    # docker compose's service column; strip_envelope() reads a date-like first word as a date instead
    r"|(?!\d...-..-)[A-Za-z0-9][\w.\-]*+ +\| )"
    r'\[GIN\] ([^|]{21}) \| [123]\d\d \|[^|]*+\|[^|]*+\| (?!POST )[A-Z]++ ++"[^"\\|]*+"\Z',
    re.ASCII,
)
# gin's colours on a terminal (`|\x1b[97;42m 200 \x1b[0m|`): SGR sequences, which strip_envelope() removes first.
_COLOR_RE = re.compile(r"\x1b\[[0-9;]*m")
# GIN's layout exactly: one space around each bar, the latency and client columns padded on the left, the
# method on the right, a path without quote or backslash ending the line. Each group is what _gin_split()
# would take from such a line (no group can hold whitespace that strip() would remove). A latency of one
# unit (nearly all) also comes as its number and unit, which parse_go_duration() would multiply the same way.
_GIN_PLAIN_RE = re.compile(
    r'\[GIN\] ([^|]{21}) \| (\d{3}) \| *((\d+(?:\.\d+)?)(s|ms|\xb5s|\u03bcs|us|ns)|[!-{}~\xb5\u03bc]+) \| *'
    r'([!-{}~]*) \| ([A-Z]+) +"([^"\\]*)"\Z',
    re.ASCII,
)
_UNIT_SECONDS = {"s": 1.0, "ms": 1e-3, "\xb5s": 1e-6, "\u03bcs": 1e-6, "us": 1e-6, "ns": 1e-9}
_SECOND_FLOATS = {text: delta.total_seconds() for text, delta in SECONDS.items()}


class GinReader:
    """The access-line half of OllamaParser: GIN's zone-less clock takes the UTC offset the parser learnt
    from slog lines (`offset`), and the time of the previous line is reused."""

    def __init__(self) -> None:
        self.offset: timedelta | None = None
        self._gin_stamp = ""
        self._gin_offset: timedelta | None = None
        self._gin_ts: datetime | None = None
        self._gin_minute = ""
        self._gin_minute_ts = datetime.min  # noqa: DTZ901 - a placeholder: read only once _gin_minute is set
        self._gin_minute_offset: timedelta | None = None
        """The offset _gin_minute_ts was built under (not _gin_offset: a stamp read in full without a seconds
        field, `00:00.00`, moves that one and leaves the minute)."""

    ok_probe_tag = _PROBE_TAG
    ok_probe_refuses = _PROBE_REFUSES
    ok_probe_esc = _PROBE_ESC
    ok_probe_re = _PROBE_RE
    """For a consumer that only counts successful non-inference requests (the dashboard keeps none of them):
    a line that holds ok_probe_tag, none of ok_probe_refuses, and that this pattern matches (whole, with its
    envelope) is one such access line, and `parse()` would give one HttpAccess at probe_epoch(group 1) unless
    that is None. The consumer then skips its events. A line that also holds ok_probe_esc goes to
    probe_colored() instead of the pattern."""
    ok_probe_seconds = _SECOND_FLOATS
    """A probed stamp is its minute (the first 18 characters) and one of these keys, the seconds it adds: a
    consumer may add them to the epoch of a stamp of the same minute read under the same offset."""

    def ok_probe(self, raw: str) -> datetime | None:
        """The time of `raw` (a whole physical line) when it is a successful access line that is not
        inference, as `parse()` would give it; None for any other line."""
        if _PROBE_TAG not in raw or any(refused in raw for refused in _PROBE_REFUSES):
            return None
        if _PROBE_ESC in raw:
            stamp = self.probe_colored(raw)
        else:
            m = _PROBE_RE.match(raw)
            stamp = m[1] if m is not None else None
        return self._gin_time(stamp, self.offset) if stamp is not None else None

    def probe_colored(self, raw: str) -> str | None:
        """ok_probe_re's stamp for a line with escape sequences (ok_probe_esc): taken when they are all
        colours (what strip_envelope() removes first then leaves exactly the uncoloured line) and the
        uncoloured line is a health check."""
        plain = _COLOR_RE.sub("", raw)
        if _PROBE_ESC in plain:
            return None
        m = _PROBE_RE.match(plain)
        return m[1] if m is not None else None

    def probe_epoch(self, stamp: str) -> float | None:
        """`epoch()` of the time `_gin_time(stamp)` gives at the current offset; None when the stamp is not a
        date."""
        ts = self._gin_time(stamp, self.offset)
        return epoch(ts) if ts is not None else None

    def probe_time(self, stamp: str, offset: timedelta | None) -> datetime | None:
        """The time of a probed stamp under the offset that held when it was read."""
        return self._gin_time(stamp, offset)

    def _gin_time(self, stamp: str, offset: timedelta | None) -> datetime | None:
        """GIN's `2024/05/02 - 12:33:06` as a time under `offset` (the parser's, or a probe's), None when it is
        not a valid date. Access lines arrive many per second: the last stamp's time is returned again, and
        another second of its minute is one addition."""
        if stamp == self._gin_stamp and offset == self._gin_offset:
            return self._gin_ts
        minute, seconds = stamp[:18], SECONDS.get(stamp[18:])
        if minute == self._gin_minute and offset == self._gin_minute_offset and seconds is not None:
            # Another second of the same minute: one addition instead of a parse and a new aware time.
            ts = self._gin_minute_ts + seconds
        else:
            try:
                # fromisoformat is C: a quarter of six int() calls and datetime(); GIN prints no zone.
                naive = datetime.fromisoformat(stamp.replace("/", "-").replace(" - ", "T"))
            except ValueError:
                return None
            if naive.tzinfo is not None:
                return None  # not GIN's clock: let the full path decide
            # Naive until an slog line teaches us the offset of this machine's clock.
            ts = with_offset(naive, offset)
            if seconds is not None:
                self._gin_minute, self._gin_minute_ts, self._gin_minute_offset = minute, ts - seconds, offset
        self._gin_ts, self._gin_stamp, self._gin_offset = ts, stamp, offset
        return ts

    def _gin(self, line: int, text: str) -> list[Event] | None:
        # The hot path of every Ollama log. GIN's own layout (one space around each bar, padded columns, a
        # plain quoted path at the end) in one C call; anything else takes the split below.
        m = _GIN_PLAIN_RE.match(text)
        if m is None:
            return self._gin_split(line, text)
        stamp, status_text, latency_raw, number, unit, client, method, path = m.groups()
        if (ts := self._gin_time(stamp, self.offset)) is None:
            return self._gin_slow(line, text)
        latency = float(number) * _UNIT_SECONDS[unit] if number is not None else parse_go_duration(latency_raw)
        return [HttpAccess(line, ts, int(status_text), latency, latency_raw,
                           client or None, method, path)]

    def _gin_split(self, line: int, text: str) -> list[Event] | None:
        # Split on the column bars: what a line with other spacing or an escaped path takes.
        parts = text.split("|", 4)
        if len(parts) != 5 or len(parts[0]) < 27:
            return self._gin_slow(line, text)
        stamp = parts[0][6:27]
        status_text = parts[1].strip()
        method, _, quoted = parts[4].strip().partition(" ")
        quoted = quoted.lstrip()
        status_ok = status_text.isascii() and status_text.isdigit()
        if not (status_ok and len(quoted) >= 2 and quoted[0] == '"' and quoted[-1] == '"'):
            return self._gin_slow(line, text)
        if (ts := self._gin_time(stamp, self.offset)) is None:
            return self._gin_slow(line, text)
        path = quoted[1:-1]
        if "\\" in path:
            path = unquote(quoted)
        latency_raw = parts[2].strip()
        client = parts[3].strip() or None
        return [HttpAccess(line, ts, int(status_text), parse_go_duration(latency_raw), latency_raw,
                           client, method, path)]

    def _gin_slow(self, line: int, text: str) -> list[Event] | None:
        m = GIN_RE.match(text)
        if m is None:
            return None
        g = m.groups()
        naive = datetime(int(g[0]), int(g[1]), int(g[2]), int(g[3]), int(g[4]), int(g[5]))  # noqa: DTZ001
        ts = with_offset(naive, self.offset)
        path = g[10]
        if "\\" in path:
            path = unquote('"' + path + '"')
        client = g[8] or None
        return [HttpAccess(line, ts, int(g[6]), parse_go_duration(g[7]), g[7], client, g[9], path)]

