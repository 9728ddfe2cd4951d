"""Errors in vLLM logs (reference/vllm-formats.md §6): what an error text says (`classify`), and a Python
traceback being collected into one event (`PendingError`). Stateless apart from the pending traceback
itself; `parsers.vllm.log` decides when a traceback is over.
"""

from __future__ import annotations

import re
from datetime import datetime

from parsers.events import ErrorEvent

_NUM = r"-?\d+(?:\.\d+)?"
_CLIP = 500
_MAX_EXC_CHARS = 2000

_KV_V1_RE = re.compile(rf"max seq len \((\d+)\), \(({_NUM}) GiB KV cache is needed, which is larger than the "
                       rf"available KV cache memory \(({_NUM}) GiB\)(?:\. Based on the available memory, the "
                       r"estimated maximum model length is (\d+))?")
_KV_V0_RE = re.compile(r"max seq len \((\d+)\) is larger than the maximum number of tokens that can be stored in "
                       r"KV cache \((\d+)\)")
_OOM_RE = re.compile(r"OutOfMemoryError|out of memory", re.IGNORECASE)
_DEAD_RE = re.compile(r"EngineDeadError|AsyncEngineDeadError|Engine background task failed|"
                      r"EngineCore encountered an issue")
_LOAD_FAILED = ("Engine core initialization failed", "EngineCore failed to start",
                "No available memory for the cache blocks")
# Ordered by how much an error says: the most telling piece of a traceback names the whole event.
RANK = {"other": 0, "engine_dead": 1, "load_failed": 2, "oom": 3}
# An exception line outside a traceback (a paste, or a bare `(Proc pid=N)` line): only well-known names.
EXC_LINE_RE = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure)(?:\([\w.]*\))?"
                         r"(?::.*)?")
TB_MARKERS = ("During handling of the above exception", "The above exception was the direct cause")


def clip(text: str) -> str:
    """Error messages are for a status line, not an archive."""
    return text if len(text) <= _CLIP else text[: _CLIP - 1] + "…"


def classify(text: str) -> tuple[str, str] | None:
    """(kind, message) for an error text that says what went wrong, else None. The KV-too-small message
    is rewritten to its numbers (the log's is long and often cut before the estimate)."""
    if "max seq len" in text:
        if (m := _KV_V1_RE.search(text)) is not None:
            est = f"; estimated maximum model length {m.group(4)}" if m.group(4) else ""
            return "load_failed", (f"KV cache too small: max seq len {m.group(1)} needs {m.group(2)} GiB of KV cache, "
                                   f"{m.group(3)} GiB available{est}")
        if (m := _KV_V0_RE.search(text)) is not None:
            return "load_failed", (f"KV cache too small: max seq len {m.group(1)} > {m.group(2)} tokens "
                                   "the KV cache can hold")
    if _OOM_RE.search(text) is not None:
        return "oom", clip(text)
    if any(s in text for s in _LOAD_FAILED):
        return "load_failed", clip(text)
    if _DEAD_RE.search(text) is not None:
        return "engine_dead", clip(text)
    return None


class PendingError:
    """A traceback (or an error record that may be followed by one) still being read."""

    __slots__ = ("after_exc", "excs", "header", "in_tb", "key", "line", "proc", "quiet", "raw", "ts")

    def __init__(self, key: str, proc: str, line: int, ts: datetime | None, raw: bool) -> None:
        self.key = key  # the record header shared by all lines of one record ("" for raw lines)
        self.proc = proc
        self.line = line
        self.ts = ts
        self.raw = raw
        self.header: str | None = None
        self.excs: list[str] = []
        self.in_tb = False
        self.after_exc = False
        self.quiet = False

    def accepts(self, msg: str) -> bool:
        """Whether a line with the same header continues this record rather than starting another."""
        return self.in_tb or self.after_exc or not msg or msg[0] in " \t" or msg.startswith(
            ("Traceback (most recent call last)", *TB_MARKERS))

    def feed(self, msg: str) -> None:
        if msg.startswith("Traceback (most recent call last)"):
            self.in_tb, self.after_exc = True, False
        elif not msg.strip() or msg[0] in " \t":
            if not self.excs and self.header is None:
                self.in_tb = True  # an excerpt that starts inside the frames
        elif msg.startswith(TB_MARKERS):
            self.after_exc = False
        elif self.in_tb or EXC_LINE_RE.fullmatch(msg) is not None:
            self.add_exc(msg)  # Python's rule: a traceback's first unindented line is its exception
        elif self.after_exc and self.excs:
            if len(self.excs[-1]) < _MAX_EXC_CHARS:
                self.excs[-1] += " " + msg  # a message wrapped onto more lines
        elif self.header is None:
            self.header = msg

    def add_exc(self, msg: str) -> None:
        self.excs.append(msg[:_MAX_EXC_CHARS])
        self.in_tb, self.after_exc = False, True

    def main(self) -> str:
        return self.excs[-1] if self.excs else self.header or ""

    def event(self) -> ErrorEvent | None:
        texts = [t for t in (self.header, *self.excs) if t]
        if not texts or (self.quiet and not self.excs):
            return None
        kind, message = "other", ""
        for text in texts:
            found = classify(text)
            # Ties go to the later text: the exception says more than the record announcing it.
            if found is not None and RANK[found[0]] >= RANK[kind]:
                kind, message = found
        if kind == "other":
            header, exc = self.header, self.excs[-1] if self.excs else None
            message = clip(f"{header}: {exc}" if header and exc else header or exc or "")
        return ErrorEvent(self.line, self.ts, kind, message)
