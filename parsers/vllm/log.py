"""vLLM server log → events, for V0 (≤0.7, selectable until ~0.10) and V1 up to 0.32.

A record is `[(<Proc> pid=N) ]LEVEL MM-DD hh:mm:ss [file.py:N] message` (V1; V0 and early V1 wrote
`file.py:N]` with no opening bracket; DEBUG prints relative paths there; custom logging configs give
`LEVEL YYYY-MM-DD hh:mm:ss.mmm file.py:N]`). Everything else is printed outside vLLM's logging: uvicorn
(access lines carry no time), Python warnings and tracebacks of child processes, tqdm bars, native
libraries. Those are recognised and give no event, and anything no grammar knows is `Unparsed`. A JSON
formatter's record (`parsers.vllm.jsonlog`) is read as the lines the default format would have printed.
Formats: reference/vllm-formats.md §1-§6.

Time. The stamp has no year: the caller passes the year the log was written in (`year=`); without one
the parser uses 2000 (a leap year, so `02-29` stays a valid date), unless the line's outer envelope gave
a full time (`env_ts`), whose year wins. A month going back by more than six (Dec → Jan) starts the next
year. Lines with no stamp (uvicorn, raw tracebacks, Unparsed) take `env_ts`, else the last stamp seen: they
were written at about the same time as the record before them.

Errors. A Python traceback is one event, not one per line: the record that announces it (`EngineCore failed
to start.`), its frames and its exception line(s) are collected and the event is emitted when the next line
shows the record is over (or at `flush()`), with the kind its most telling part says (oom > load_failed >
engine_dead > other). Tracebacks repeat the full prefix on every line, so lines of one record share their
header; a child's raw copy of a traceback already reported by its logger is dropped. The `EngineDeadError`
that 0.32 logs on a normal SIGTERM, after its `[shutdown]` lines, is reported as kind "other" with the
message "shutdown" rather than as a dead engine.

One `VllmParser` per log; it never raises.
"""

from __future__ import annotations

import itertools
import re
from collections import deque
from datetime import datetime

from parsers.events import (
    ErrorEvent,
    Event,
    LoadDone,
    LoadStart,
    ServerStart,
    ServerStop,
    StartupFact,
    Unparsed,
)
from parsers.vllm import startup as su
from parsers.vllm.errors import EXC_LINE_RE, TB_MARKERS, PendingError, classify, clip
from parsers.vllm.jsonlog import json_record
from parsers.vllm.lines import (
    UVICORN_RE,
    access_event,
    noise_kind,
    preemption_event,
    request_events,
    stats_event,
    uvicorn_listen,
    v0_prefix_rate_event,
)

_PREFIX_RE = re.compile(r"\(([^()]*) pid=\d+\)(?: |$)")
_RECORD_RE = re.compile(
    r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) (?:(\d{4})-)?(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,6}))? "
    r"(\[)?[^\]\s]+:\d+\](?: |$)"
)
# A second record glued onto the end of the first (a lost newline, sample 012).
_GLUED_RE = re.compile(
    r"(?:\([^()]*? pid=\d+\) )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?:\d{4}-)?\d{2}-\d{2} \d{2}:\d{2}:\d{2}"
    r"(?:[.,]\d+)? \[?[^\]\s]+:\d+\] "
)
_LONG_LINE = 1 << 16
"""Longer lines are cut at their record heads before they are read (see _parse_long)."""
_LEVEL_WORDS = ("INFO ", "WARNING ", "ERROR ", "DEBUG ", "CRITICAL ")  # substring tests before the regex
_NO_GLUE = ("Received request", "Request ", "Generated response")  # their text is the user's, not a record
_PROCESS_RE = re.compile(r"Process [\w-]+:")
_DEFAULT_YEAR = 2000

ERAS = (None, "vLLM V0", "vLLM V1", "vLLM V1 0.32+")
_VERSION_RE = re.compile(r"v?(\d{1,9})\.(\d{1,9})")  # bounded: int() refuses 4,300 digits


class VllmParser:
    """Stateful-but-pure parser of one vLLM server log stream."""

    engine = "vllm"

    def __init__(self, year: int | None = None) -> None:
        self.version: str | None = None
        self._year = year if year is not None else _DEFAULT_YEAR
        self._month: int | None = None
        self._last_ts: datetime | None = None
        self._era = 0
        self._pending: PendingError | None = None
        self._raw_tb = False  # inside an unprefixed traceback (survives interleaved records)
        self._ctx = False  # the last raw line opened a block whose indented lines follow
        self._shutdown = False
        self._load = ""  # "", "started" or "done": one load per server start
        self._load_ts: datetime | None = None
        self._announced = False
        self._served: str | None = None  # the name clients and /metrics use (`served_model_name`)
        self._reported: deque[str] = deque(maxlen=4)  # exception texts of recent record tracebacks

    # -- what a reader that skips successful health-check access lines (ietop.pipeline.bulk) must know --------
    @property
    def last_ts(self) -> datetime | None:
        """The time an access line would take now (uvicorn prints none: the last record's)."""
        return self._last_ts

    def access_acts(self) -> bool:
        """Whether an access line read now would change this parser: it ends a raw error's message and an
        indented block. When it would not, skipping it changes nothing but the request it is."""
        pending = self._pending
        return self._ctx or (pending is not None and pending.raw and not pending.in_tb)

    def saw_process(self, proc: str) -> None:
        """A `(APIServer pid=N) ` prefix: the V1 engine core's own process; both names came with V1's prefix
        (~0.10.1). Also what a reader that skips such a line must tell the parser."""
        if proc.startswith(("EngineCore", "APIServer")):
            self._saw(2)

    @property
    def era(self) -> str | None:
        """"vLLM V0", "vLLM V1" or "vLLM V1 0.32+" from the shapes seen and the version; None before any."""
        level = self._era
        m = _VERSION_RE.match(self.version or "")
        if m is not None and level != 1:
            major_minor = (int(m.group(1)), int(m.group(2)))
            if major_minor >= (0, 32):
                level = 3
            elif level == 0:
                level = 2 if major_minor >= (0, 8) else 1
        return ERAS[level]

    def parse(self, line: int, text: str, env_ts: datetime | None = None) -> list[Event]:
        """Parse one physical line (outer envelopes already stripped). Never raises."""
        try:
            return self._parse(line, text, env_ts)
        except (ValueError, IndexError, KeyError, OverflowError, RecursionError):
            self._pending = None
            return [Unparsed(line, env_ts or self._last_ts)]

    def flush(self) -> list[Event]:
        """At end of log: the error of a traceback still waiting for its end."""
        self._raw_tb = False
        return self._finish()

    def _parse(self, line: int, text: str, env_ts: datetime | None) -> list[Event]:
        if len(text) > _LONG_LINE:
            return self._parse_long(line, text, env_ts)
        return self._parse_glued(line, text, env_ts)

    def _parse_long(self, line: int, text: str, env_ts: datetime | None) -> list[Event]:
        """A line over 64 KiB that starts with a record: cut at every record head first, in one pass. Read
        record by record, each record's search for the next scanned the rest of the line (a megabyte of 8,000
        glued DEBUG records took 16 s). A record whose text is the user's (_NO_GLUE) keeps the rest, as
        `_record` keeps it."""
        heads = [m.start() for m in _GLUED_RE.finditer(text)]
        if not heads or heads[0] != 0:
            return self._parse_glued(line, text, env_ts)
        heads.append(len(text))
        out: list[Event] = []
        for a, b in itertools.pairwise(heads):
            head = _GLUED_RE.match(text, a)
            if head is not None and text.startswith(_NO_GLUE, head.end()):
                out += self._parse_glued(line, text[a:], env_ts)
                break
            out += self._parse_glued(line, text[a:b], env_ts)
        return out

    def _parse_glued(self, line: int, text: str, env_ts: datetime | None) -> list[Event]:
        # Records glued onto one line are read one after the other, in a loop: one recursion per record ran
        # out of stack (and held every remainder) on a line of a thousand of them.
        out: list[Event] = []
        rest: str | None = text
        while rest is not None:
            events, rest = self._parse_one(line, rest, env_ts)
            out += events
        return out

    def _parse_one(self, line: int, text: str, env_ts: datetime | None) -> tuple[list[Event], str | None]:
        """The events of the line's first record, and the text of a record glued after it (or None)."""
        if text[:1] == "{" and (record := json_record(text)) is not None:
            # A JSON formatter's record: read as the lines the default format would have printed. Its time
            # stands in for the one uvicorn's text line lacks.
            lines, when = record
            return [e for part in lines for e in self._parse(line, part, env_ts or when)], None
        if text[:1] == "│" or text.endswith("│"):
            text = text.strip().strip("│").strip()  # TUI borders around each line (sample 030)
        if not text or text.isspace():
            return [], None
        proc = ""
        rest = text
        if text[0] == "(" and (pm := _PREFIX_RE.match(text)) is not None:
            proc, rest = pm.group(1), text[pm.end():]
            self.saw_process(proc)
            if not rest.strip():
                return [], None  # a bare prefix: the process printed an empty line
        if rest[:1] in ("D", "I", "W", "E", "C") and (rm := _RECORD_RE.match(rest)) is not None:
            return self._record(line, rest, rm, proc, env_ts)
        return self._raw(line, rest, env_ts or self._last_ts), None

    # ---- records ----------------------------------------------------------------------------------------

    def _stamp(self, m: re.Match[str], env_ts: datetime | None) -> datetime | None:
        month = int(m.group(3))
        if m.group(2) is not None:
            self._year = int(m.group(2))
        elif env_ts is not None:
            # The envelope's year, corrected when the two clocks straddle New Year.
            self._year = env_ts.year - (1 if month - env_ts.month > 6 else -1 if env_ts.month - month > 6 else 0)
        elif self._month is not None and self._month - month > 6:
            self._year += 1
        self._month = month
        frac = m.group(8)
        # `%(msecs)d` is not zero-padded (sample 010 prints `.53` for 53 ms); six digits are microseconds.
        micros = 0 if frac is None else int(frac) * 1000 if len(frac) <= 3 else int(frac.ljust(6, "0"))
        try:
            ts = datetime(  # noqa: DTZ001 - vLLM prints the local clock with no zone
                self._year, month, int(m.group(4)), int(m.group(5)), int(m.group(6)), int(m.group(7)), micros)
        except ValueError:
            return self._last_ts
        self._last_ts = ts
        return ts

    def _record(self, line: int, rest: str, m: re.Match[str], proc: str, env_ts: datetime | None
                ) -> tuple[list[Event], str | None]:
        ts = self._stamp(m, env_ts)
        if m.group(9) is None and m.group(2) is None:
            self._saw(1)  # `metrics.py:449]` with no `[`: V0 (and the rare opt-in V1) before ~0.8
        msg = rest[m.end():]
        level = m.group(1)
        self._ctx = False
        glued = None
        if (any(w in msg for w in _LEVEL_WORDS) and not msg.startswith(_NO_GLUE)
                and (g := _GLUED_RE.search(msg, 1)) is not None):
            msg, glued = msg[: g.start()], msg[g.start():]
        if level in ("ERROR", "CRITICAL"):
            out = self._error_record(line, ts, f"{proc}|{rest[: m.end()]}", proc, msg)
        else:
            out = self._settle(proc)
            out += self._message(msg, line, ts) or []
        return out, glued

    def _stopping(self, line: int, ts: datetime | None) -> list[Event]:
        """The server's first shutdown line: it stops, and what it held with it."""
        if self._shutdown:
            return []
        self._shutdown = True
        return [ServerStop(line, ts)]

    def _error_record(self, line: int, ts: datetime | None, key: str, proc: str, msg: str) -> list[Event]:
        pending = self._pending
        if pending is not None and pending.key == key and pending.accepts(msg):
            pending.feed(msg)
            return []
        out = self._settle(proc)
        if msg.startswith("[shutdown]"):
            out += self._stopping(line, ts)
        new = PendingError(key, proc, line, ts, raw=False)
        new.feed(msg)
        held = self._pending
        if held is None:
            self._pending = new
            return out
        # Another process's traceback is still open (interleaved): this record is reported on its own.
        self._pending = new
        out += self._finish()
        self._pending = held
        return out

    def _message(self, msg: str, line: int, ts: datetime | None) -> list[Event] | None:
        """A message's events; None when it is none of the known messages."""
        first = msg[:1]
        if first in ("E", "A") or first.isdigit():
            found = stats_event(msg, line, ts)
            if found is not None:
                self._saw(2 if found[1] else 1)
                return [found[0]]
        if first == "P" and (prefix := v0_prefix_rate_event(msg, line, ts)) is not None:
            self._saw(1)
            return [prefix]
        if first == "[" and msg.startswith("[shutdown]"):
            self._saw(3)
            return self._stopping(line, ts)
        events = request_events(msg, line, ts)
        if events is not None:
            return events
        if "is preempted" in msg and (p := preemption_event(msg, line, ts)) is not None:
            self._saw(1 if msg.startswith("Sequence group") else 2)
            return [p]
        facts = su.startup_facts(msg)
        return self._facts(facts, line, ts) if facts is not None else None

    def _facts(self, facts: list[su.Fact], line: int, ts: datetime | None) -> list[Event]:
        out: list[Event] = []
        for key, value in facts:
            if key == su.ERA:
                self._saw(int(value))
            elif key == su.NEW_SERVER:
                if self._load and not self._shutdown:
                    out.append(ServerStop(line, ts))  # the server before it left no shutdown lines (killed)
                self._load, self._announced, self._shutdown, self._served = "", False, False, None
            elif key == su.LOAD_START:
                if self._load != "started":  # every tensor-parallel worker says it
                    self._load, self._load_ts = "started", ts
                    # The model as clients, /v1/models and /metrics name it, not the path it loads from.
                    out.append(LoadStart(line, ts, self._served or str(value), "vllm"))
            elif key == su.ENGINE_READY:
                if self._load != "done":  # every data-parallel engine says it
                    out.append(LoadDone(line, ts, self._load_duration(float(value), ts)))
                    self._load = "done"
            elif key == su.LISTEN:
                out += self._listen(str(value), line, ts)
            else:
                if key == "version":
                    self.version = str(value)
                elif key == "served_model":
                    self._served = str(value)
                out.append(StartupFact(line, ts, key, value))
        return out

    def _load_duration(self, init_s: float, ts: datetime | None) -> float:
        """`init engine` times profiling, KV cache set-up and warm-up only; from `Starting to load model`
        the load also read the weights (and compiled). The longer of the two is the load."""
        start = self._load_ts if self._load == "started" else None
        if start is None or ts is None:
            return init_s
        return max(init_s, (ts - start).total_seconds())

    def _listen(self, url: str, line: int, ts: datetime | None) -> list[Event]:
        if self._announced:
            return []
        self._announced = True
        return [ServerStart(line, ts, self.version, url), StartupFact(line, ts, "listen", url)]

    # ---- lines outside vLLM's logging -------------------------------------------------------------------

    def _raw(self, line: int, text: str, ts: datetime | None) -> list[Event]:
        if text[0] in " \t":
            # Traceback frames and source, a warning's source line, nanobind's lists.
            return [] if self._raw_tb or self._ctx else [Unparsed(line, ts)]
        text = text.rstrip()
        if text.startswith("Traceback (most recent call last)"):
            pending = self._pending
            out = [] if pending is not None and pending.raw and not pending.excs else self._finish()
            if self._pending is None:
                self._pending = PendingError("", "", line, ts, raw=True)
            self._pending.feed(text)
            self._raw_tb = True
            return out
        if text[0] in "DIWECT" and (u := UVICORN_RE.match(text)) is not None:
            return self._uvicorn(line, ts, u.group(1), text[u.end():])
        noise = noise_kind(text)
        if noise is not None:
            out = self._finish_raw()
            self._ctx = True
            if noise == "c10-error":
                out.append(ErrorEvent(line, ts, "other", clip(text)))
            return out
        if self._raw_tb:
            if text.startswith(TB_MARKERS):
                return []
            self._raw_tb = False
            self._ctx = True
            pending = self._pending
            if pending is None or not pending.raw:
                out = self._finish()
                pending = self._pending = PendingError("", "", line, ts, raw=True)
            else:
                out = []
            pending.add_exc(text)
            return out
        if _PROCESS_RE.fullmatch(text) is not None:
            out = self._finish()
            self._pending = PendingError("", "", line, ts, raw=True)
            self._pending.header = text[:-1]
            self._pending.quiet = True  # says nothing unless a traceback follows
            self._ctx = True
            return out
        if EXC_LINE_RE.fullmatch(text) is not None:
            out = self._finish_raw()
            self._pending = PendingError("", "", line, ts, raw=True)
            self._pending.add_exc(text)
            self._ctx = True
            return out
        events = self._message(text, line, ts)
        if events is not None:
            return self._finish_raw() + events
        pending = self._pending
        if pending is not None and pending.raw and pending.after_exc:
            pending.feed(text)  # the exception's message goes on (or was wrapped by a paste, sample 021)
            return []
        found = classify(text)
        if found is not None:
            return [*self._finish_raw(), ErrorEvent(line, ts, *found)]
        return [Unparsed(line, ts)]

    def _uvicorn(self, line: int, ts: datetime | None, level: str, rest: str) -> list[Event]:
        out = self._finish_raw()
        self._ctx = False
        if level == "INFO":
            if (access := access_event(rest, line, ts)) is not None:
                return [*out, access]
            if (url := uvicorn_listen(rest)) is not None:
                return out + self._listen(url, line, ts)
            if rest.startswith("Shutting down"):
                out += self._stopping(line, ts)
        elif level in ("ERROR", "CRITICAL"):
            # `Exception in ASGI application`: its traceback follows, unprefixed.
            out += self._finish()
            self._pending = PendingError("", "", line, ts, raw=True)
            self._pending.header = rest
        return out

    # ---- pending errors ------------------------------------------------------------------------------

    def _settle(self, proc: str) -> list[Event]:
        """A record arrived: the pending error is complete, unless it is a traceback whose lines are still
        coming from another process (or from a child's stderr), interleaved with this one's records."""
        pending = self._pending
        if pending is None or (pending.in_tb and (pending.raw or pending.proc != proc)):
            return []
        return self._finish()

    def _finish_raw(self) -> list[Event]:
        """A structured line ended a raw exception's message; a raw traceback still waiting for its
        exception line is left open (other writers' lines interleave with it)."""
        pending = self._pending
        return self._finish() if pending is not None and pending.raw and not pending.in_tb else []

    def _finish(self) -> list[Event]:
        pending, self._pending = self._pending, None
        if pending is None:
            return []
        event = pending.event()
        if event is None:
            return []
        main = pending.main()
        if pending.raw:
            if main in self._reported:
                self._reported.remove(main)
                return []  # a child's stderr copy of a traceback its logger already reported
        elif pending.excs:
            self._reported.append(main)
        if event.kind == "engine_dead" and self._shutdown:
            return [ErrorEvent(event.line, event.ts, "other", "shutdown")]
        return [event]

    def _saw(self, era: int) -> None:
        if era > self._era:
            self._era = era
