"""Strip the outer envelopes and paste artefacts around an inner log line.

A physical line is zero or more envelopes (journald, ``docker logs -t``, Docker
Desktop export, compose prefix; they can stack) around one inner line (slog, GIN,
Go std-log, runner output). Engine parsers only ever see the inner line.

Lines copied out of issues and terminals also carry noise that is not an envelope
but would break the inner grammars: ANSI colours (GIN on a TTY), a trailing
``<br/>`` (GitHub ``<details>`` pastes), markdown ``**`` around a part of the line,
a trailing ``\\r``. Those are removed too.

This runs once per line of multi-GB logs, so the common inner lines (``time=``,
``[GIN]``, ``{``) are recognised by their first character and cost a few C-level
string checks; regexes only run on lines whose first character and content
(``]:`` for journald, ``|`` for compose) make an envelope possible.
Timestamp formats and samples: reference/ollama-formats.md section 2.1.
"""

from __future__ import annotations

import re
import sys
from bisect import bisect_left
from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple, TypeAlias, cast

__all__ = ["Inner", "Stripped", "strip_envelope", "strip_inner"]


class Stripped(NamedTuple):
    """An inner line and what was around it."""

    text: str
    """The inner line, artefacts removed; "" for blank and "meta" lines."""
    kind: str
    """"none", or the envelope kinds outermost first joined by "+" (e.g. "compose+docker_ts")."""
    ts: datetime | None
    """The outermost envelope timestamp that carries a full date (see strip_envelope)."""


Inner: TypeAlias = "tuple[str, str, datetime | None]"
"""strip_inner()'s answer: Stripped's fields (text, kind, ts) in a plain tuple."""

# NamedTuple's generated __new__ is a Python function; calling tuple.__new__ directly
# builds the same object at a third of the cost.
_new = cast("Callable[[type[Stripped], Inner], Stripped]", tuple.__new__)

_BLANK: Inner = ("", "none", None)
_BLANK_META: Inner = ("", "meta", None)

# Inner lines that can never start with an envelope: slog, GIN / "[GIN-debug]" /
# llama.cpp "[...]" lines, JSON.
_INNER_PREFIXES = ("time=", "[", "{")

# CSI (colours, cursor), OSC (titles, hyperlinks; BEL- or ST-terminated) and the
# two-character escapes. An unterminated OSC only loses its "ESC ]" rather than
# swallowing the rest of the line.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")

# "**" opening after whitespace (or at the start) and closing before whitespace (or
# at the end), around a non-blank span: markdown bold pasted around e.g.
# msg="...". Runs of asterisks used as banners ("****NvRmMemInit failed****") do not
# qualify, because the span may not start or end with "*".
# What `_unbold` removes, as a regex: the reference its tests hold it to. Not used on lines: for an opener
# with no closer the lazy scan runs to the end of the line, for every opener, so a long line of `**kwargs`
# (a pasted traceback) took minutes.
BOLD_RE = re.compile(r"(?<!\S)\*\*(?=[^\s*])(.*?[^\s*])\*\*(?!\S)")
_STARS = re.compile(r"(?=\*\*)")


def unbold(line: str) -> str:
    """`BOLD_RE.sub(r"\\1", line)` in linear time: each `**` is classed once as a possible opener (after
    whitespace or the start, before a character that is neither whitespace nor `*`) or closer (the mirror),
    and each opener takes the first closer after its first character, as the lazy match does."""
    n = len(line)
    at = [m.start() for m in _STARS.finditer(line)]
    closers = [q for q in at if q > 0 and not line[q - 1].isspace() and line[q - 1] != "*"
               and (q + 2 == n or line[q + 2].isspace())]
    if not closers:
        return line
    out: list[str] = []
    done = 0
    for p in at:
        if p < done or not (p == 0 or line[p - 1].isspace()) or p + 2 >= n or line[p + 2].isspace() \
                or line[p + 2] == "*":
            continue
        k = bisect_left(closers, p + 3)
        if k == len(closers):
            break  # no closer after this opener: none after any later one either
        q = closers[k]
        out += (line[done:p], line[p + 2:q])
        done = q + 2
    return "".join(out) + line[done:] if out else line

_BR_TAGS = ("<br/>", "<br />", "<br>")

# Date-time envelopes capture (date, clock, fraction[, zone]) for _timestamp.
_DATE_TIME = r"(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:[.,](\d+))?"
_ZONE = r"(Z|[+-]\d{2}:?\d{2})"

# docker logs -t: RFC3339Nano UTC, one space, the line (a blank line may have lost
# its trailing space to an editor).
_DOCKER_TS = re.compile(r"(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.(\d+))?Z(?: |\Z)")
# journalctl -o short-iso / short-iso-precise (older systemd: +0000, newer: +00:00).
# The host is optional because users redact it.
_JOURNALD_ISO = re.compile(_DATE_TIME + _ZONE + r" +(?:[^ ]+ +)?[^ \[]+\[\d+\]: ?")
# Docker Desktop log export: host-local wall clock, second resolution.
_DESKTOP = re.compile(r"(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(?:\.(\d+))? ")
# A timestamp alone on its line: the first physical line of a log-UI export record.
_LONE_TS = re.compile(_DATE_TIME + _ZONE + r"?\s*\Z")
# journalctl default "short" output. The date token is locale-dependent ("Mar 03",
# "mar 15", "7月 21", "06.05"), hence any word with an optional day; no year, no
# zone. journalctl separates fields with spaces only; matching " " instead of \s
# halves the cost of this, the most frequent envelope.
_JOURNALD = re.compile(r"[^ ]+(?: +\d{1,2})? +\d\d:\d\d:\d\d(?:\.\d+)? +(?:[^ ]+ +)?[^ \[]+\[\d+\]: ?")
# docker compose: service name padded to align the "|" column.
_COMPOSE = re.compile(r"[A-Za-z0-9][\w.\-]* +\|(?: |\Z)")

# The second physical line of a log-UI export record: the level alone.
_LEVEL_WORDS = frozenset(
    {"trace", "debug", "info", "notice", "warn", "warning", "error", "err", "critical", "crit", "fatal"}
)
_LONGEST_LEVEL = max(map(len, _LEVEL_WORDS)) + 2  # room for stray padding

# More stacked envelopes than this is not a real log; stop rather than loop.
_MAX_STACK = 4

# From 3.11 fromisoformat reads docker's stamp as it is ("Z", nine fraction digits cut to six, as
# _timestamp() cuts them); 3.10 takes the general path.
_ISO_Z = sys.version_info >= (3, 11)



def _timestamp(m: re.Match[str], zone: str | None) -> datetime | None:
    """Datetime from a (date, clock, fraction) match and a zone token; None if out of range."""
    date, clock, frac = m.group(1, 2, 3)
    # fromisoformat is C and ten times faster than int() on each field, but before
    # Python 3.11 it wants exactly "+HH:MM" and 3 or 6 fraction digits.
    text = f"{date}T{clock}.{frac or ''}000000"[:26]
    if zone is not None:
        if zone == "Z":
            text += "+00:00"
        elif len(zone) == 5:
            text += f"{zone[:3]}:{zone[3:]}"
        else:
            text += zone
    try:
        return datetime.fromisoformat(text)
    except ValueError:  # e.g. month 13 or second 61: still an envelope, just no usable time
        return None


def _strip_trailers(line: str) -> str:
    """Trailing CRs and `<br>` tags off: walked back by index and cut once (a copy per trailer made a megabyte
    of CRs quadratic, found by bench/fuzz_campaign.py)."""
    end = len(line)
    while end:
        last = line[end - 1]
        if last == "\r":
            end -= 1
        elif last == ">":
            tail = line[max(0, end - 6):end].lower()
            tag = next((t for t in _BR_TAGS if tail.endswith(t)), None)
            if tag is None:
                break
            end -= len(tag)
        else:
            break
    return line if end == len(line) else line[:end]


def _iso_envelope(line: str) -> Inner | None:
    """Envelopes that start with an ISO-like date (line[4] and line[7] are "-")."""
    sep = line[10]
    if sep == "T":
        m = _DOCKER_TS.match(line)
        if m is not None:
            return "docker_ts", line[m.end() :], _timestamp(m, "Z")
    elif sep != " ":
        return None
    m = _LONE_TS.match(line)
    if m is not None:
        return "meta", "", _timestamp(m, m.group(4))
    if sep == "T":
        m = _JOURNALD_ISO.match(line)
        if m is not None:
            return "journald_iso", line[m.end() :], _timestamp(m, m.group(4))
        return None
    m = _DESKTOP.match(line)
    if m is not None:
        # The export writes the host's local clock without a zone: keep it naive.
        return "desktop", line[m.end() :], _timestamp(m, None)
    return None


def _one_envelope(line: str) -> Inner | None:
    """Recognise the outermost envelope of a non-empty line, if any."""
    first = line[0]
    if first.isspace():
        return None  # continuation lines of multi-line blocks
    if "0" <= first <= "9" and len(line) >= 19 and line[4] == "-" and line[7] == "-":
        return _iso_envelope(line)
    if "]:" in line:
        m = _JOURNALD.match(line)
        if m is not None:
            return "journald", line[m.end() :], None
    if "|" in line:
        m = _COMPOSE.match(line)
        if m is not None:
            return "compose", line[m.end() :], None
    if len(line) <= _LONGEST_LEVEL and line.strip().lower() in _LEVEL_WORDS:
        return "meta", "", None
    return None


def strip_envelope(line: str) -> Stripped:
    """Return the inner line of ``line`` and the envelopes that were around it.

    ``ts`` is the outermost envelope timestamp that carries a full date: aware UTC
    for ``docker logs -t``, aware with its offset for journald ISO output, naive
    host-local for a Docker Desktop export or a log-UI timestamp line. The journald
    short form has no year or zone, so it gives None.

    Log-UI exports (Kubernetes, Grafana) split each record into a timestamp line,
    a level line, the real line and a blank line; the first two come back as kind
    "meta" with empty text, so callers neither parse nor count them. Blank lines come
    back as kind "none" with empty text. Never raises.
    """
    return _new(Stripped, strip_inner(line))


def strip_inner(line: str) -> Inner:
    """strip_envelope()'s fields in a plain tuple: what the ingest loops read, once per line (building a
    Stripped, even through tuple.__new__, cost as much as the common envelope checks themselves)."""
    # Each check below is a single C-level scan or index; the regexes behind them
    # run only on the rare lines that need them.
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    if not line:
        return _BLANK
    last = line[-1]
    if last == ">" or last == "\r":
        line = _strip_trailers(line)
        if not line:
            return _BLANK
    if "*" in line and "**" in line:
        line = unbold(line)
    first = line[0]
    if first == "[" or first == "{" or (first == "t" and line.startswith("time=")):
        return (line, "none", None)
    if first.isspace():
        return _BLANK if line.isspace() else (line, "none", None)
    # The first envelope, read here as _one_envelope() reads it (same tests, same regexes, same order)
    # without its calls: docker -t, journald and compose are most envelope lines, and a line with none (a
    # runner's own output) is settled without a second look. An inner line behind it ends the stack at once.
    if "0" <= first <= "9" and len(line) >= 19 and line[4] == "-" and line[7] == "-":
        if _ISO_Z and line[10] == "T" and (m := _DOCKER_TS.match(line)) is not None:
            end = m.end()
            try:
                ts: datetime | None = datetime.fromisoformat(line[: end - 1] if line[end - 1] == " " else line[:end])
            except ValueError:
                ts = None
            return _stack("docker_ts", line[end:], ts)
        return _envelopes(line)
    if "]:" in line and (m := _JOURNALD.match(line)) is not None:
        return _stack("journald", line[m.end() :], None)
    if "|" in line and (m := _COMPOSE.match(line)) is not None:
        return _stack("compose", line[m.end() :], None)
    if len(line) <= _LONGEST_LEVEL and line.strip().lower() in _LEVEL_WORDS:
        return _BLANK_META
    return (line, "none", None)


def _envelopes(line: str) -> Inner:
    """Any stack of envelopes around the line (cleaned, non-blank, not starting like an inner line)."""
    found = _one_envelope(line)
    if found is None:
        return (line, "none", None)
    return _stack(*found)


def _stack(kind: str, line: str, ts: datetime | None) -> Inner:
    """The envelopes under a first one of `kind` (`line`: what it held, `ts`: its time)."""
    if line.startswith(_INNER_PREFIXES):
        return (line, kind, ts)
    depth = 1
    while kind != "meta" and line and not line.startswith(_INNER_PREFIXES) and depth < _MAX_STACK:
        found = _one_envelope(line)
        if found is None:
            break
        env, line, env_ts = found
        kind = f"{kind}+{env}"
        if ts is None:
            ts = env_ts
        if env == "meta":
            break
        depth += 1
    return (line, kind, ts)
