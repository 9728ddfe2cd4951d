"""Ollama server log → events, for every log era (E0 2023 Go std-log … E5 v0.30+ llama-server).

One `OllamaParser` per log file: it is a small pure state machine (the learned UTC offset that turns
GIN's zone-less clock into an aware time, the last llama-server task id for continuation lines, and the
evidence of which era wrote the log). `parse()` takes the inner line (outer envelopes already stripped)
and never raises: an unrecognised line yields a single `Unparsed`.

Messages are matched on `msg` text only, never on `source=file.go:N` (line numbers move every release).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import fields as dataclass_fields
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any

from parsers.events import (
    ErrorEvent,
    Event,
    LoadDone,
    LoadStart,
    ServerConfig,
    ServerStart,
    Unparsed,
)
from parsers.ollama import llamacpp
from parsers.ollama.gin import GinReader
from parsers.ollama.gofmt import (
    GOLOG_RE,
    SECONDS,
    SLOG_RE,
    parse_golog_time,
    parse_slog_time,
    unquote,
    with_offset,
    zone,
)
from parsers.ollama.memory import IN_CONTEXT, MemoryContext
from parsers.ollama.messages import env_map, slog_events
from parsers.text.memo import remember

_LISTEN_RE = re.compile(r"Listening on (\S+) \(version ([^)]+)\)")
_GLUED_SLOG_RE = re.compile(r"time=\d{4}-\d{2}-\d{2}T")
_STARTED_RE = re.compile(r"(?:llama runner|llama-server) started in ([0-9.]+) seconds")
_LLAMA_SERVER_PREFIXES = ("slot ", "srv ", "que ", "cmn ", "\t", " ")
_TEXT_SERVER_PREFIXES = ("INFO [", "DEBUG [", "WARN [", "ERR [", "ERROR [", "VERB [")

ERAS = {
    "E0": "E0 v0.0.x-v0.1.17 (Go std-log, llama.cpp server)",
    "E1": "E1 v0.1.18-v0.1.31 (cgo llama.cpp)",
    "E2": "E2 v0.1.32-v0.3.14 (ollama_llama_server subprocess)",
    "E3": "E3 v0.4.0-v0.11.4 (Go runners)",
    "E4": "E4 v0.11.5-v0.24.x (new memory management)",
    "E5": "E5 v0.30.0+ (llama-server)",
}


def era_of_version(version: str) -> str | None:
    """Map an Ollama release to its log era (see reference/ollama-formats.md §0)."""
    m = re.match(r"v?(\d{1,9})\.(\d{1,9})\.(\d{1,9})", version)  # bounded: int() refuses 4,300 digits
    if m is None:
        return None
    v = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
    if v >= (0, 30, 0):
        return "E5"
    if v >= (0, 11, 5):
        return "E4"
    if v >= (0, 4, 0):
        return "E3"
    if v >= (0, 1, 32):
        return "E2"
    if v >= (0, 1, 18):
        return "E1"
    return "E0"


class OllamaParser(GinReader):
    """Stateful-but-pure parser of one Ollama log stream."""

    engine = "ollama"

    def __init__(self) -> None:
        self.version: str | None = None
        self.era_evidence: set[str] = set()
        self._server = llamacpp.ServerLineState()
        GinReader.__init__(self)
        self._minute_key = ""
        """`2024-05-10T23:29` of the last slog time read in full, its zone text and offset, and that minute."""
        self._minute_zone = ""
        self._minute_offset: timedelta | None = None
        self._minute_base = datetime.min  # noqa: DTZ901 - a placeholder: read only once _minute_key is set
        self._offset_zone: str | None = None
        """The zone text (`-04:00`, `Z`) of the slog time the offset was learned from, if it had slog's layout."""
        # Memos (parsers.text.memo): the meaning of an slog line after its time (with the eras it shows), and of a
        # raw runner line.
        self._slog_seen: dict[str, tuple[Meaning, tuple[str, ...]]] = {}
        self._raw_seen: dict[str, Meaning] = {}
        self._memory = MemoryContext()

    @property
    def server(self) -> llamacpp.ServerLineState:
        """The llama-server line state (the task id a continuation line inherits): the one state a reader
        that skips llama-server lines giving no event (ietop.pipeline.bulk) must carry over itself."""
        return self._server

    @property
    def era(self) -> str | None:
        """The era named by the version line, else the newest era whose line shapes were seen."""
        if self.version is not None and (era := era_of_version(self.version)) is not None:
            return era
        return max(self.era_evidence) if self.era_evidence else None

    def parse(self, line: int, text: str, env_ts: datetime | None = None) -> list[Event]:
        """Parse one inner line. Never raises."""
        try:
            events = self._parse(line, text, env_ts)
        except (ValueError, IndexError, KeyError, OverflowError):
            events = None
        if events is None:
            return [Unparsed(line, env_ts)]
        return events

    def _parse(self, line: int, text: str, env_ts: datetime | None) -> list[Event] | None:
        if text.startswith("time="):
            return self._slog(line, text)
        if text.startswith("[GIN"):
            return self._gin(line, text)
        if not text:
            return []
        first = text[0]
        if first == "{":
            events = llamacpp.parse_json_line(text, line)
            if events is not None:
                self.era_evidence.add("E2")
            return events
        # Raw runner output repeats word for word (every load prints the same model metadata): what a line
        # that reached parse_raw_line() gave is remembered. Every branch before it is a pure test of the text
        # that changes nothing when it does not match, so a remembered line skips them too.
        known = self._raw_seen.get(text)
        if known is not None:
            return None if known is _RAW_UNPARSED else [kind(line, env_ts, *fields) for kind, fields in known]
        if first.isdigit() and (m := GOLOG_RE.match(text)) is not None:
            return self._golog(line, m)
        if text.startswith(_LLAMA_SERVER_PREFIXES):
            events = llamacpp.parse_server_line(text, line, env_ts, self._server)
            if events is not None:
                if text[0] not in " \t":
                    self.era_evidence.add("E5")
                return events
        if text.startswith(_TEXT_SERVER_PREFIXES):
            events = llamacpp.parse_text_server_line(text, line, env_ts)
            if events is not None:
                self.era_evidence.add("E2")
                return events
        glued = _GLUED_SLOG_RE.search(text)
        if glued is not None and glued.start() > 0:
            # Runner stderr without a trailing newline glued to the next slog line (sample 027).
            return self._slog(line, text[glued.start() :])
        if (m := _STARTED_RE.search(text)) is not None:
            return [LoadDone(line, env_ts, float(m.group(1)))]
        if (m := _LISTEN_RE.search(text)) is not None:
            return self._listening(line, env_ts, m)
        events = llamacpp.parse_raw_line(text, line, env_ts)
        remember(self._raw_seen, text, _RAW_UNPARSED if events is None else _meaning(events))
        return events

    def _slog(self, line: int, text: str) -> list[Event] | None:
        # Scheduler DEBUG lines repeat word for word after their time (a model's blob path, its keep-alive,
        # its refCount): what the rest of the line means is remembered, and only the time is read again.
        j = text.find(" level=", 5)
        rest = text[j:] if j > 5 else ""
        known = self._slog_seen.get(rest) if rest else None
        # The time must be one token, as SLOG_RE reads it: printable and without a space is that, or stricter
        # (a line it declines takes the regex below).
        if known is not None and (time_text := text[5:j]).isprintable() and " " not in time_text:
            meaning = known[0]
            if not meaning and time_text[23:] == self._offset_zone:
                # Half of a DEBUG log means nothing beyond its time, and this time is in the zone the current
                # offset came from: reading it could not change the offset, the one thing it might teach.
                return []
            ts = self._slog_time(time_text)
            if known[1]:
                self.era_evidence.update(known[1])
            if len(meaning) == 1:
                kind, fields = meaning[0]
                return [kind(line, ts, *fields)]
            return [kind(line, ts, *fields) for kind, fields in meaning]
        m = SLOG_RE.match(text)
        if m is None:
            return None
        time_text, level, _source, msg, attrs = m.groups()
        if msg[:1] == '"':
            msg = unquote(msg)
        ts = self._slog_time(time_text)
        if msg.startswith("Listening on "):
            lm = _LISTEN_RE.search(msg)
            return self._listening(line, ts, lm) if lm is not None else []
        events = slog_events(msg, attrs, level, line, ts)
        in_context = msg in IN_CONTEXT
        if in_context:
            events = self._memory.read(msg, attrs, events, self.version)
        eras = {_era_of_start(ev.runner) for ev in events if isinstance(ev, LoadStart)}
        self.era_evidence.update(eras)
        if not events and level == "ERROR":
            events = [ErrorEvent(line, ts, "other", msg[:500])]
        # A memory line's meaning depends on the runner started before it and on the version: not remembered.
        if rest and m.start("time") == 5 and m.end("time") == j and not in_context:
            remember(self._slog_seen, rest, (_meaning(events), tuple(eras)))
        return events

    def _slog_time(self, time_text: str) -> datetime | None:
        # Another time of the same minute in slog's layout (`2024-05-10T23:29:17.347-04:00`): the minute's
        # start plus a table's seconds and milliseconds, in one shared zone object (cheap for epoch()).
        if time_text[:16] == self._minute_key and time_text[23:] == self._minute_zone:
            second, milli = SECONDS.get(time_text[16:19]), _MILLIS.get(time_text[19:23])
            if second is not None and milli is not None:
                if self._minute_offset != self.offset:
                    self.offset, self._offset_zone = self._minute_offset, self._minute_zone
                return self._minute_base + second + milli
        ts = parse_slog_time(time_text)
        if ts is not None:
            if ts.tzinfo is not None:
                offset = ts.utcoffset()
                zone_text = _slog_zone(time_text)
                if offset != self.offset:
                    self.offset = offset
                    # Another time with that same zone text would teach this same offset.
                    self._offset_zone = zone_text
                if zone_text is not None and offset is not None:
                    self._minute_key, self._minute_zone, self._minute_offset = time_text[:16], zone_text, offset
                    self._minute_base = datetime(ts.year, ts.month, ts.day, ts.hour, ts.minute, tzinfo=zone(offset))
            elif self.offset is not None:
                ts = with_offset(ts, self.offset)
        return ts

    def _listening(self, line: int, ts: datetime | None, m: re.Match[str]) -> list[Event]:
        self.version = m.group(2)
        return [ServerStart(line, ts, m.group(2), m.group(1))]

    def _golog(self, line: int, m: re.Match[str]) -> list[Event]:
        ts = with_offset_opt(parse_golog_time(m.group("date"), m.group("clock")), self.offset)
        msg = m.group("msg")
        if msg.startswith("server config"):
            env = env_map(msg)
            return [ServerConfig(line, ts, env)] if env is not None else []
        self.era_evidence.add("E0")
        if (lm := _LISTEN_RE.search(msg)) is not None:
            return self._listening(line, ts, lm)
        if msg.startswith("starting llama runner"):
            return [LoadStart(line, ts, None, "llama.cpp server")]
        if (sm := _STARTED_RE.search(msg)) is not None:
            return [LoadDone(line, ts, float(sm.group(1)))]
        if m.group("level") == "ERROR" or msg.startswith("error"):
            return [ErrorEvent(line, ts, "other", msg[:500])]
        return []


_MILLIS = {f".{ms:03d}": timedelta(milliseconds=ms) for ms in range(1000)}
"""slog's milliseconds field (`.347`) as the time it adds to its second."""
Meaning = tuple[tuple[type[Event], tuple[Any, ...]], ...]
"""What a remembered line says beyond its number and time: each event's class and its other fields."""
_RAW_UNPARSED: Meaning = ((Unparsed, ()),)
"""Remembered for a raw line that parse_raw_line() did not recognise (compared by identity)."""
_FIELD_GETTERS: dict[type[Event], Callable[[Event], tuple[Any, ...]]] = {}


def _fields_after_time(event: Event) -> tuple[Any, ...]:
    """The values of an event's fields after `line` and `ts`, in constructor order."""
    get = _FIELD_GETTERS.get(type(event))
    if get is None:
        names = tuple(f.name for f in dataclass_fields(event))[2:]
        # attrgetter reads them all in one C call (a generator of getattr() was 3 % of the live ingest); with
        # one name it returns the bare value, and with none there is nothing to read.
        getter = attrgetter(*names) if names else (lambda _event: ())
        get = _FIELD_GETTERS[type(event)] = getter if len(names) != 1 else (lambda ev: (getter(ev),))
    return get(event)


def _meaning(events: list[Event]) -> Meaning:
    return tuple((type(ev), _fields_after_time(ev)) for ev in events)


def _slog_zone(time_text: str) -> str | None:
    """The zone text of a time in slog's own layout (`…:05.000-07:00`, `…:05.000Z`), which begins at index
    23 and alone gives the offset; None for any other layout."""
    if time_text[19:20] == "." and time_text[20:23].isdigit() and time_text[23:24] in ("+", "-", "Z"):
        return time_text[23:]
    return None


def with_offset_opt(ts: datetime | None, offset: timedelta | None) -> datetime | None:
    return with_offset(ts, offset) if ts is not None else None


_ERA_OF_RUNNER = {"llama-server": "E5", "runner": "E4", "go runner": "E3", "cgo": "E1", "llama.cpp server": "E0"}


def _era_of_start(runner: str) -> str:
    return _ERA_OF_RUNNER.get(runner, "E2")
