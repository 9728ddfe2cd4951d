"""Which engine wrote a log, from its first lines (after envelope stripping).

Strong markers decide at once (vLLM's `INFO MM-DD hh:mm:ss [file.py:N]` envelope, mlx_lm's
`YYYY-MM-DD hh:mm:ss,mmm - LEVEL -` records, Ollama's `[GIN]` and slog lines); otherwise the Ollama
parser is tried and the log is Ollama's when it recognises enough of it (raw llama.cpp output pasted
from an Ollama log has no Ollama-specific line at all).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from parsers.events import Unparsed
from parsers.ollama import OllamaParser

_VLLM_RE = re.compile(r"(?:\(\w+ pid=\d+\) )?(?:INFO|WARNING|ERROR|DEBUG) \d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? \[")
_MLX_RE = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:,\d{3})? - (?:INFO|DEBUG|WARNING|ERROR) - ")
_OLLAMA_STRONG = ("[GIN] ", "time=", "llama runner started", "llama-server started")


def detect_engine(lines: Iterable[str]) -> str | None:
    """'ollama', 'vllm', 'mlx' or None when the lines do not look like any engine's log."""
    parser = OllamaParser()
    recognised = 0
    total = 0
    for n, text in enumerate(lines, 1):
        if not text.strip():
            continue
        total += 1
        if _VLLM_RE.match(text):
            return "vllm"
        if _MLX_RE.match(text):
            return "mlx"
        events = parser.parse(n, text)
        parsed = not any(isinstance(e, Unparsed) for e in events)
        if parsed and text.startswith(_OLLAMA_STRONG):
            return "ollama"
        recognised += parsed
    if total and recognised / total >= 0.5:
        return "ollama"
    return None
