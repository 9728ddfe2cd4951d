"""mlx_lm.server stderr (and its few stdout prints) → events, for every release since 0.10 (2024).

The log mixes four writers with no shared framing (reference/mlx-formats.md §1-§2): `logging` records
`YYYY-MM-DD hh:mm:ss,mmm - LEVEL - msg` whose message may span lines (TAB-indented JSON bodies, token
text with newlines, `logging.exception` tracebacks); http.server's access lines; Python warnings and
tracebacks with no timestamp; and stray prints (tqdm bars, deprecation notices). A line matching no
grammar therefore continues the previous record and is not an `Unparsed` — except before the first record,
where only the known stray shapes are accepted.

At DEBUG the server logs every generated token as a record whose message is the bare token text, so a
DEBUG record is a token unless its message is exactly one of the known DEBUG messages. The token text
is never kept. That path is the hot one and is decided on the message's first character.

One `MlxParser` per log; it never raises. `flush()` at end of log emits a traceback cut before its last
line.
"""

from __future__ import annotations

import re
from datetime import datetime

from parsers.events import (
    Admission,
    ErrorEvent,
    Event,
    GenerationStart,
    LoadProgress,
    PeakMemory,
    PrefillProgress,
    ServerStart,
    Throughput,
    TokenDelta,
    Unparsed,
)
from parsers.mlx.records import (
    ACCESS_RE,
    OOM_RE,
    JsonBody,
    PendingTraceback,
    access_events,
    clip,
    request_events,
    response_events,
)

_RECORD_RE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:,(\d{3}))? - (DEBUG|INFO|WARNING|ERROR|CRITICAL) -(?: |$)",
    re.ASCII,
)
_NUM = r"(\d+(?:\.\d+)?)"
_PROGRESS_RE = re.compile(r"Prompt processing progress: (\d+)/(\d+)")
_PROMPT_CACHE_RE = re.compile(rf"Prompt Cache: (\d+) sequences, {_NUM} GB")
_KV_CACHES_RE = re.compile(rf"KV Caches: (\d+) seq, {_NUM} GB(?:, latest user cache (\d+) tokens)?")
_HTTPD_RE = re.compile(r"Starting httpd at (\S+) on port (\d+)\.\.\.")
_PERF_RE = re.compile(rf"(Prompt|Generation): {_NUM} tokens-per-sec")
_PEAK_RE = re.compile(rf"Peak memory: {_NUM} GB")
_CACHE_LIMIT_RE = re.compile(rf"Setting cache limit to {_NUM} GB")
# 0.24-0.28.3 single-slot prompt cache decisions, in their exact wording (anything else is a token).
_SLOT_CACHE_RE = re.compile(
    r"\*\*\* (?:Resetting cache\.|Cache is prefix of prompt \(cache_len: \d+, prompt_len: \d+\)\. Processing suffix\."
    r"|Common prefix \(\d+\) shorter than cache \(\d+\)\. Attempting trim\.) \*\*\*"
    r"|    Trimming \d+ tokens from cache\.|    Cache cannot be trimmed\. Resetting cache\."
    r"|Returning \d+ tokens for processing\."
)
# The root logger is at DEBUG too, so libraries' records land here (urllib3/huggingface_hub during a
# model download, filelock, asyncio). Without this they would count as tokens.
_LIBRARY_DEBUG_RE = re.compile(
    r"Starting new HTTPS? connection \(\d+\): \S+|Resetting dropped connection: \S+"
    r'|https?://\S+ "[A-Z]+ \S+ HTTP/[\d.]+" \d{3} \S+'
    r"|Attempting to (?:acquire|release) lock \d+ on .+|Lock \d+ (?:acquired|released) on .+|Using selector: \w+"
)
_DEBUG_FIRST = frozenset("IOSPG*RhALU")
_SEPARATOR = "-" * 40
_REQUEST_TB_RE = re.compile(r"Exception (?:occurred|happened) during processing of request from \('([^']*)', (\d+)")
_THREAD_TB_RE = re.compile(r"Exception in thread (.+?)(?: \(([^()]*)\))?:")
_WARNING_RE = re.compile(r".+?:\d+: \w*Warning: ")
_FETCHING_RE = re.compile(r"Fetching (\d+) files:\s*(\d{1,3})%")
_EXC_OOM_RE = re.compile(r"[A-Za-z_][\w.]*: .*")
_SHELL_RE = re.compile(r"(?:zsh|bash|sh): (abort|killed|segmentation fault|bus error)\b")
_STRAY_PREFIXES = ("Calling `python -m mlx_lm", "[WARNING] Generating with a model that requires", "[transformers] ")

# What a line that matches no grammar continues, which decides how much of it is still looked at.
_NONE = 0  # no record yet: unknown lines are Unparsed
_PLAIN = 1  # an INFO/WARNING record, an access line or a stray line
_TOKEN = 2  # a DEBUG record: token text (short pieces) or a library message
_ERROR = 3  # an ERROR record: its logging.exception traceback, already reported with the record
_CLIENT = 4  # an ERROR record quoting a client's body: anything may follow, none of it is the server's

# Format labels from the line shapes seen, newest last (reference/mlx-formats.md §3).
ERAS = (
    None,
    "mlx_lm <=0.22 (cache limit)",
    "mlx_lm <=0.28 (tokens-per-sec)",
    "mlx_lm 0.24-0.28.3 (single-slot cache)",
    "mlx_lm 0.26.4-0.30.x (progress, no cache stats)",
    "mlx_lm 0.31.0-0.31.1 (KV Caches)",
    "mlx_lm 0.31.x dev (KV Caches, no user cache)",
    "mlx_lm 0.31.2+ (Prompt Cache)",
)
_ERA_CACHE_LIMIT, _ERA_TPS, _ERA_SLOT, _ERA_PROGRESS, _ERA_KV_USER, _ERA_KV, _ERA_PROMPT_CACHE = range(1, 8)


class MlxParser:
    """Stateful-but-pure parser of one mlx_lm.server log stream."""

    engine = "mlx"

    def __init__(self) -> None:
        self.version: str | None = None
        self._era = 0
        self._cont = _NONE
        self._body: JsonBody | None = None
        self._tb: PendingTraceback | None = None
        self._after_warning = False
        self._native_abort = False
        self._stamp = ""
        self._stamp_ts: datetime | None = None
        self._second = ""
        self._fields = (0, 0, 0, 0, 0, 0)

    @property
    def era(self) -> str | None:
        """The newest format whose line shapes were seen, or None before any telling line."""
        return ERAS[self._era]

    def parse(self, line: int, text: str, env_ts: datetime | None = None) -> list[Event]:
        """Parse one physical line. Never raises."""
        try:
            return self._parse(line, text, env_ts)
        except (ValueError, IndexError, KeyError, OverflowError, RecursionError):
            self._body = None
            return [Unparsed(line, env_ts)]

    def flush(self) -> list[Event]:
        """At end of log: the event of a traceback still waiting for its last line. A body cut short is
        dropped (an incomplete request body says nothing reliable)."""
        self._body = None
        tb, self._tb = self._tb, None
        return tb.finish() if tb is not None else []

    def _parse(self, line: int, text: str, env_ts: datetime | None) -> list[Event]:
        head = _RECORD_RE.match(text) if text[:1].isdigit() else None
        access = ACCESS_RE.match(text) if head is None and " - - [" in text else None
        if self._body is not None:
            if head is None and access is None:
                return self._feed_body(text)
            self._body = None  # a new record began before the JSON closed: the body was cut
        after_warning, self._after_warning = self._after_warning, False
        self._native_abort = self._native_abort and head is None and access is None
        if head is not None or access is not None:
            if self._tb is not None and self._tb.emitted:
                self._tb = None
            if head is not None:
                return self._record(line, text, head)
            assert access is not None
            self._cont = _PLAIN
            return access_events(line, access, text[access.end() :])
        if self._cont == _CLIENT:
            return []
        strong = self._strong(line, text, env_ts)
        if strong is not None:
            self._settle()
            return strong
        if self._tb is not None:
            events = self._tb.feed(text)
            if events is not None:
                return events
            self._tb = None
        if self._cont == _ERROR or not text.strip():
            return []
        if after_warning and text.startswith("  "):
            return []  # the source line Python prints under a warning
        weak = self._stray(line, text, env_ts)
        if weak is not None:
            self._settle()
            return weak
        return [] if self._cont != _NONE else [Unparsed(line, env_ts)]

    def _ts(self, text: str, m: re.Match[str]) -> datetime | None:
        # One record per token: consecutive records mostly share a stamp, or at least its second, so the
        # fields are converted once per second (the regex has already checked the digits' places).
        stamp = text[:23]
        if stamp != self._stamp:
            self._stamp = stamp
            if text[:19] != self._second:
                self._second = text[:19]
                self._fields = (int(text[0:4]), int(text[5:7]), int(text[8:10]), int(text[11:13]),
                                int(text[14:16]), int(text[17:19]))
            ms = m.group(7)
            y, mo, d, h, mi, sec = self._fields
            try:
                self._stamp_ts = datetime(  # noqa: DTZ001 - logging prints the local clock with no zone
                    y, mo, d, h, mi, sec, int(ms) * 1000 if ms else 0)
            except ValueError:
                self._stamp_ts = None
        return self._stamp_ts

    def _record(self, line: int, text: str, m: re.Match[str]) -> list[Event]:
        ts = self._ts(text, m)
        msg = text[m.end() :]
        level = m.group(8)
        if level == "DEBUG":
            self._cont = _TOKEN
            return self._debug(line, ts, msg)
        if level == "INFO":
            self._cont = _PLAIN
            return self._info(line, ts, msg)
        if level == "WARNING":
            self._cont = _PLAIN
            return []
        return self._error(line, ts, msg)

    def _debug(self, line: int, ts: datetime | None, msg: str) -> list[Event]:
        first = msg[:1]
        if first == " ":
            if msg.startswith("    ") and _SLOT_CACHE_RE.fullmatch(msg) is not None:
                self._saw(_ERA_SLOT)
                return []
            return [TokenDelta(line, ts)]
        if first not in _DEBUG_FIRST:
            return [TokenDelta(line, ts)]
        if msg.startswith("Incoming Request Body: "):
            return self._start_body("request", line, ts, msg[23:])
        if msg.startswith("Outgoing Response: "):
            return self._start_body("response", line, ts, msg[19:])
        if msg == "Starting stream:" or msg == "Starting completion:":
            return [GenerationStart(line, ts, msg == "Starting stream:")]
        if (m := _PERF_RE.fullmatch(msg)) is not None:
            self._saw(_ERA_TPS)
            return [Throughput(line, ts, m.group(1).lower(), float(m.group(2)))]
        if (m := _PEAK_RE.fullmatch(msg)) is not None:
            self._saw(_ERA_TPS)
            return [PeakMemory(line, ts, float(m.group(1)))]
        if _CACHE_LIMIT_RE.fullmatch(msg) is not None:
            self._saw(_ERA_CACHE_LIMIT)
            return []
        if _SLOT_CACHE_RE.fullmatch(msg) is not None:
            self._saw(_ERA_SLOT)
            return []
        if _LIBRARY_DEBUG_RE.fullmatch(msg) is not None:
            return []
        # Includes the CLI's `Prompt: N tokens, X tokens-per-sec`: the server never logs it, so as a
        # DEBUG record it can only be generated text.
        return [TokenDelta(line, ts)]

    def _info(self, line: int, ts: datetime | None, msg: str) -> list[Event]:
        first = msg[:1]
        if first == "P":
            if msg.startswith("Prompt processing progress: "):
                if (m := _PROGRESS_RE.fullmatch(msg)) is not None:
                    self._saw(_ERA_PROGRESS)
                    done, total = int(m.group(1)), int(m.group(2))
                    return [PrefillProgress(line, ts, None, done, done / total if total else 0.0, None, total)]
            elif (m := _PROMPT_CACHE_RE.fullmatch(msg)) is not None:
                self._saw(_ERA_PROMPT_CACHE)
                return [Admission(line, ts, int(m.group(1)), float(m.group(2)))]
        elif first == "K":
            if (m := _KV_CACHES_RE.fullmatch(msg)) is not None:
                user = m.group(3)
                self._saw(_ERA_KV_USER if user is not None else _ERA_KV)
                return [Admission(line, ts, int(m.group(1)), float(m.group(2)), int(user) if user else None)]
        elif first == "S" and (m := _HTTPD_RE.fullmatch(msg)) is not None:
            return [ServerStart(line, ts, None, f"{m.group(1)}:{m.group(2)}")]
        # The `- assistant|user|system: …` lines after `Prompt Cache:` and anything else at INFO.
        return []

    def _error(self, line: int, ts: datetime | None, msg: str) -> list[Event]:
        self._cont = _ERROR
        if msg.startswith("mlx_lm.server generation thread died"):
            return [ErrorEvent(line, ts, "engine_dead", clip(msg[len("mlx_lm.server ") :]))]
        if msg.startswith("JSONDecodeError: "):
            # `JSONDecodeError: {e} - Raw body: {body}`: the body is the client's, keep only the error.
            self._cont = _CLIENT
            return [ErrorEvent(line, ts, "other", clip(msg.partition(" - Raw body:")[0]))]
        if msg.startswith("Invalid Request Body"):
            self._cont = _CLIENT
            return [ErrorEvent(line, ts, "other", "Invalid Request Body (not a JSON object)")]
        return [ErrorEvent(line, ts, "oom" if OOM_RE.search(msg) else "other", clip(msg))]

    def _start_body(self, kind: str, line: int, ts: datetime | None, rest: str) -> list[Event]:
        self._body = JsonBody(kind, line, ts, rest)
        if rest.strip() in ("{", "["):
            return []  # the pretty-printed form: it ends on a later line
        return self._complete_body()

    def _feed_body(self, text: str) -> list[Event]:
        body = self._body
        assert body is not None
        if not body.add(text):
            self._body = None
            return [Unparsed(body.line, body.ts)]
        if text[:1] in (" ", "\t"):
            return []  # only a line at column 0 can close the pretty-printed top level
        return self._complete_body()

    def _complete_body(self) -> list[Event]:
        body = self._body
        assert body is not None
        ok, value = body.value()
        if not ok:
            return []
        self._body = None
        if body.kind == "request":
            return request_events(body.line, body.ts, value)
        events, version = response_events(body.line, body.ts, value)
        if version is not None:
            self.version = version
        return events

    def _strong(self, line: int, text: str, env_ts: datetime | None) -> list[Event] | None:
        """Shapes that start or end a traceback or kill the process: recognised in any context but a
        client's body, since they may follow a record's continuation directly."""
        first = text[:1]
        if first == "-" and text.rstrip() == _SEPARATOR:
            # socketserver frames its per-request traceback with these; the closing one ends it.
            return self._end_tb()
        if first == "E":
            if (m := _REQUEST_TB_RE.match(text)) is not None:
                events = self._end_tb()
                self._tb = PendingTraceback("request", line, env_ts, f"{m.group(1)}:{m.group(2)}")
                return events
            if (m := _THREAD_TB_RE.fullmatch(text.rstrip())) is not None:
                events = self._end_tb()
                # Python < 3.10 names no target; the generation thread is the only one the server starts.
                kind = "generate" if m.group(2) in (None, "_generate") else "thread"
                self._tb = PendingTraceback(kind, line, env_ts, m.group(1))
                return events
        if first == "l" and text.startswith("libc++abi: "):
            self._native_abort = True
            kind = "oom" if OOM_RE.search(text) else "engine_dead"
            return [*self._end_tb(), ErrorEvent(line, env_ts, kind, clip(text[len("libc++abi: ") :]))]
        return None

    def _end_tb(self) -> list[Event]:
        tb, self._tb = self._tb, None
        return tb.finish() if tb is not None else []

    def _stray(self, line: int, text: str, env_ts: datetime | None) -> list[Event] | None:
        """Known lines outside any record (stdout prints, warnings, tqdm bars, the main thread's
        traceback). None when the line is none of them."""
        if "\r" in text:
            # tqdm redraws with carriage returns: the last state on the line is the one that counts.
            text = next((s for s in reversed(text.split("\r")) if s.strip()), "")
        if text.startswith("Traceback (most recent call last)"):
            if self._cont == _TOKEN:
                return None  # more likely generated text than a traceback with no header
            self._tb = PendingTraceback("main", line, env_ts, "")
            return []
        if (m := _FETCHING_RE.match(text)) is not None:
            return [LoadProgress(line, env_ts, min(int(m.group(2)), 100) / 100, f"fetching {m.group(1)} files")]
        if _WARNING_RE.match(text) is not None:
            self._after_warning = True
            return []
        if text.startswith(_STRAY_PREFIXES):
            return []
        if (m := _HTTPD_RE.fullmatch(text)) is not None:
            # Before 2024-04-22 the start line was a bare print; it counts as the first record.
            self._cont = _PLAIN
            return [ServerStart(line, env_ts, None, f"{m.group(1)}:{m.group(2)}")]
        if (m := _SHELL_RE.match(text)) is not None:
            if m.group(1) == "abort" and self._native_abort:
                return []  # the shell's note on the libc++abi abort already reported
            return [ErrorEvent(line, env_ts, "engine_dead", clip(f"process ended: {text}"))]
        if _EXC_OOM_RE.fullmatch(text) is not None and OOM_RE.search(text) is not None:
            # `RuntimeError: [metal::malloc] Resource limit (499000) exceeded.` outside any traceback.
            return [ErrorEvent(line, env_ts, "oom", clip(text))]
        return None

    def _settle(self) -> None:
        # A stray line ends the previous record's continuation, but not the time before any record.
        if self._cont != _NONE:
            self._cont = _PLAIN

    def _saw(self, era: int) -> None:
        if era > self._era:
            self._era = era
