"""Which engine wrote a log, from its first lines (after envelope stripping).

Strong markers decide at once (vLLM's `INFO MM-DD hh:mm:ss [file.py:N]` envelope, mlx_lm's
`YYYY-MM-DD hh:mm:ss,mmm - LEVEL -` records, Ollama's `[GIN]` and slog lines); otherwise the Ollama
parser is tried and the log is Ollama's when it recognises enough of it (raw llama.cpp output pasted
from an Ollama log has no Ollama-specific line at all). A paste with no envelope at all that names
mlx_lm's own source files or MLX's Metal allocator is MLX's (a failure pasted from a traceback).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from parsers.events import Event, Unparsed
from parsers.ollama.log import OllamaParser

# vLLM: optional `(Proc pid=N) `, level, `MM-DD hh:mm:ss` (or a full date with a custom format), then the
# Python file (`[loggers.py:335]`, V0 without the bracket, relative paths at DEBUG). TUI borders `│ ` too.
_VLLM_RE = re.compile(
    r"(?:[│|]\s*)?(?:\([^)]*\) )?(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) (?:\d{2}-\d{2}|\d{4}-\d{2}-\d{2}) "
    r"\d{2}:\d{2}:\d{2}(?:[.,]\d+)? \[?[\w./-]+\.py:\d+\]"
)
_MLX_RE = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:,\d{3})? - (?:INFO|DEBUG|WARNING|ERROR) - ")
_OLLAMA_STRONG = ("[GIN] ", "time=", "llama runner started", "llama-server started")
# Only mlx_lm prints these: its own files (traceback frames, `…/mlx_lm/server.py:1894: UserWarning`) and
# MLX's allocator error. Every engine's parser reads a bare Python traceback alike, so without them a
# pasted MLX failure ties with vLLM, or Ollama wins on frame lines it skips.
_MLX_MARK_RE = re.compile(r"\bmlx_lm[/\\][\w/\\]*\.py\b|\[metal::malloc\]")


def detect_engine(lines: Iterable[str]) -> str | None:
    """'ollama', 'vllm', 'mlx' or None when the lines do not look like any engine's log.

    A line in an engine's own envelope decides at once. Otherwise every engine's parser reads the lines
    and the one that draws facts (events other than Unparsed) from the most lines wins: raw pastes
    (stripped prefixes, tracebacks, llama.cpp output) carry no envelope but still carry that engine's
    messages.
    """
    from parsers.mlx.log import MlxParser
    from parsers.vllm.log import VllmParser

    parsers: dict[str, _Parser] = {"ollama": OllamaParser(), "vllm": VllmParser(), "mlx": MlxParser()}
    score = dict.fromkeys(parsers, 0)
    known = dict.fromkeys(parsers, 0)  # lines recognised, with or without a fact: the tie-breaker
    total = 0
    mlx_marks = 0
    for n, text in enumerate(lines, 1):
        if not text.strip():
            continue
        total += 1
        if _VLLM_RE.match(text):
            return "vllm"
        if _MLX_RE.match(text):
            return "mlx"
        if text.startswith(_OLLAMA_STRONG) and _facts(parsers["ollama"].parse(n, text)):
            return "ollama"
        mlx_marks += _MLX_MARK_RE.search(text) is not None
        for name, parser in parsers.items():
            events = parser.parse(n, text)
            score[name] += _facts(events)
            known[name] += not any(isinstance(e, Unparsed) for e in events)
    for name, parser in parsers.items():
        flush = getattr(parser, "flush", None)
        if flush is not None:  # a traceback becomes one fact only when it ends
            score[name] += _facts(flush())
    if mlx_marks:
        # Checked only here, once no line had an envelope: an envelope anywhere in the head decides first.
        return "mlx"
    for table in (score, known):
        best = max(table.values(), default=0)
        winners = [name for name, value in table.items() if value == best]
        if best > 0 and len(winners) == 1 and (table is score or best * 2 >= total):
            return winners[0]
    return None


class _Parser(Protocol):
    def parse(self, line: int, text: str, env_ts: datetime | None = None) -> list[Event]: ...


def _facts(events: list[Event]) -> bool:
    return any(not isinstance(e, Unparsed) for e in events)
