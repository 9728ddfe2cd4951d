"""Pieces of the mlx_lm.server parser that hold no per-log state of their own: the access-log line, the
multi-line JSON bodies of DEBUG records, and pending Python tracebacks.

See `parsers.mlx.log` for the log as a whole and reference/mlx-formats.md for the formats.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from parsers.events import ErrorEvent, Event, HttpAccess, PromptText, RequestBody, Usage

MAX_BODY_CHARS = 4 * 1024 * 1024
"""A DEBUG body that has not parsed by this size is given up: a log cut mid-body must not grow memory."""

_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                                        "Dec"), 1)}
ACCESS_RE = re.compile(r"(\S+) - - \[(\d{2})/([A-Z][a-z]{2})/(\d{4}) (\d{2}):(\d{2}):(\d{2})\] ", re.ASCII)
_REQLINE_RE = re.compile(r"([A-Z]+) (\S+)(?: HTTP/[\d.]+)?")
_FINGERPRINT_RE = re.compile(r"(\d+\.\d+(?:\.\d+)?[\w.+]*)-")
_EXC_LINE_RE = re.compile(r"[A-Za-z_][\w.]*(?::.*)?")
OOM_RE = re.compile(r"\[metal::malloc\]|Resource limit \(\d+\) exceeded|OutOfMemory|Insufficient Memory|"
                    r"[Oo]ut of memory")
_CLIENT_ABORTS = frozenset({"BrokenPipeError", "ConnectionResetError", "ConnectionAbortedError"})
# Lines that belong to a traceback without being its final exception line.
_TB_PARTS = ("Traceback (most recent call last)", "During handling of the above exception",
             "The above exception was the direct cause")
_CHAIN = ("During handling", "The above exception")
_CLIP = 500


def clip(text: str) -> str:
    """Error messages are for a status line, not an archive."""
    return text if len(text) <= _CLIP else text[: _CLIP - 1] + "…"


def access_events(line: int, m: re.Match[str], rest: str) -> list[Event]:
    """`IP - - [dd/Mon/YYYY hh:mm:ss] "REQUEST LINE" STATUS SIZE` (http.server writes it straight to
    stderr, whatever --log-level says). Its other messages (`code 501, message …`) say nothing new."""
    quoted, _, tail = rest.rpartition(" ")
    quoted, _, status = quoted.rpartition(" ")
    # rpartition, not a regex: the request line is printed verbatim and may itself contain quotes.
    status_ok = len(status) == 3 and status.isascii() and status.isdigit()
    if len(quoted) < 2 or quoted[0] != '"' or quoted[-1] != '"' or not status_ok or not tail:
        return []
    reqline = quoted[1:-1]
    rm = _REQLINE_RE.fullmatch(reqline)
    method, path = (rm.group(1), rm.group(2)) if rm is not None else ("", reqline)
    month = _MONTHS.get(m.group(3))
    ts = None
    if month is not None:
        try:
            ts = datetime(  # noqa: DTZ001 - http.server prints the local clock with no zone
                int(m.group(4)), month, int(m.group(2)), int(m.group(5)), int(m.group(6)), int(m.group(7)))
        except ValueError:
            ts = None
    return [HttpAccess(line, ts, int(status), None, "", m.group(1), method, path)]


class JsonBody:
    """A DEBUG `Incoming Request Body:` / `Outgoing Response:` being collected: the server pretty-prints
    it with TAB indentation, so it spans many lines, and it is complete when the text parses."""

    __slots__ = ("kind", "line", "parts", "size", "ts")

    def __init__(self, kind: str, line: int, ts: datetime | None, first: str) -> None:
        self.kind = kind
        self.line = line
        self.ts = ts
        self.parts = [first]
        self.size = len(first)

    def add(self, text: str) -> bool:
        """Append a line; False once the body is over the size cap."""
        self.parts.append(text)
        self.size += len(text) + 1
        return self.size <= MAX_BODY_CHARS

    def value(self) -> tuple[bool, Any]:
        """(True, the JSON value) once the collected text parses, else (False, None)."""
        try:
            return True, json.loads("\n".join(self.parts))
        except (ValueError, RecursionError):
            return False, None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _model(v: Any) -> str | None:
    # "default_model" is the server's name for its --model, i.e. no model named by the client.
    return v if isinstance(v, str) and v and v != "default_model" else None


def _prompt_text(body: dict[str, Any]) -> str:
    pieces: list[str] = []
    messages = body.get("messages")
    if isinstance(messages, list):
        for msg in messages:
            content = msg.get("content") if isinstance(msg, dict) else None
            if isinstance(content, str):
                pieces.append(content)
            elif isinstance(content, list):
                for part in content:
                    text = part.get("text") if isinstance(part, dict) else part
                    if isinstance(text, str):
                        pieces.append(text)
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        pieces.append(prompt)
    elif isinstance(prompt, list):
        pieces.extend(p for p in prompt if isinstance(p, str))
    return "\n".join(p for p in pieces if p)


CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"
_OBJECT_PATHS = {"chat.completion": CHAT_PATH, "text_completion": COMPLETIONS_PATH}


def request_events(line: int, ts: datetime | None, body: Any) -> list[Event]:
    """What a logged request body asks for. Not an object (0.31.2+ rejects those) → nothing."""
    if not isinstance(body, dict):
        return []
    stream = body.get("stream", False)
    max_tokens = _int(body.get("max_tokens"))
    if max_tokens is None:
        max_tokens = _int(body.get("max_completion_tokens"))
    path = CHAT_PATH if "messages" in body else COMPLETIONS_PATH if "prompt" in body else None
    events: list[Event] = [
        RequestBody(line, ts, _model(body.get("model")), stream if isinstance(stream, bool) else None, max_tokens,
                    path)
    ]
    text = _prompt_text(body)
    if text:
        events.append(PromptText(line, ts, text))
    return events


def response_events(line: int, ts: datetime | None, body: Any) -> tuple[list[Event], str | None]:
    """The usage of a non-stream response, and the mlx_lm version from its `system_fingerprint`
    (`{mlx_lm}-{mlx}-{platform}-{gpu arch}` since ~0.2x; older servers sent `fp_<uuid>`, no version).
    The generated text is output, never kept."""
    if not isinstance(body, dict):
        return [], None
    usage = body.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else None
    finish = None
    choices = body.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        reason = choices[0].get("finish_reason")
        finish = reason if isinstance(reason, str) else None
    fingerprint = body.get("system_fingerprint")
    fm = _FINGERPRINT_RE.match(fingerprint) if isinstance(fingerprint, str) else None
    kind = body.get("object")
    path = _OBJECT_PATHS.get(kind) if isinstance(kind, str) else None
    event = Usage(line, ts, _int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")), cached,
                  _model(body.get("model")), finish, path)
    return [event], fm.group(1) if fm is not None else None


class PendingTraceback:
    """A Python traceback that opened without a logging record (uncaught in a thread, socketserver's
    per-request handler, the main thread). Its meaning is in its last line, so the event waits for it
    and then carries the time and line of the opening line; `finish` emits it without that line."""

    __slots__ = ("chained", "emitted", "kind", "label", "line", "ts")

    def __init__(self, kind: str, line: int, ts: datetime | None, label: str) -> None:
        self.kind = kind  # "generate" (the generation thread), "thread" (another), "request", "main"
        self.line = line
        self.ts = ts
        self.label = label
        self.emitted = False
        self.chained = False

    def feed(self, text: str) -> list[Event] | None:
        """Events for a line inside the traceback, or None when the line is not part of it (only once
        the event is out: until then anything is taken as part, since other threads interleave)."""
        if not text or text[0] in " \t" or text.startswith(_TB_PARTS):
            if text.startswith(_CHAIN):
                self.chained = True
            return []
        if _EXC_LINE_RE.fullmatch(text) is not None:
            if not self.emitted:
                self.emitted = True
                return [self._event(text)]
            if self.chained:
                # One event per traceback: the first exception line already made it.
                self.chained = False
                return []
        return None if self.emitted else []

    def finish(self) -> list[Event]:
        """The event of a traceback cut before its exception line (end of log, or another one began)."""
        if self.emitted:
            return []
        self.emitted = True
        return [self._event(None)]

    def _event(self, exc: str | None) -> ErrorEvent:
        name = exc.split(":", 1)[0].rsplit(".", 1)[-1] if exc is not None else ""
        oom = exc is not None and OOM_RE.search(exc) is not None
        if self.kind == "generate":
            kind, msg = "engine_dead", f"generation thread died ({self.label})"
        elif self.kind == "thread":
            kind, msg = ("oom" if oom else "other"), f"thread {self.label} died"
        elif self.kind == "request":
            kind = "client_abort" if name in _CLIENT_ABORTS else "oom" if oom else "other"
            msg = f"request from {self.label} failed"
        else:
            kind, msg = ("oom" if oom else "other"), "uncaught exception"
        return ErrorEvent(self.line, self.ts, kind, clip(f"{msg}: {exc}" if exc is not None else msg))
