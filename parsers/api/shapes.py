"""What the OpenAI-compatible and Ollama APIs look like from a proxy: which paths are inference, where a
response carries generated content, what a request body asks for, and how a body is framed and encoded.
``parsers.api.stream.StreamMeter`` measures with these.

Pure and stdlib-only, like the rest of ``parsers``.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

__all__ = [
    "EMBEDDING_PATHS",
    "INFERENCE_PATHS",
    "MALFORMED",
    "decoder_for",
    "has_content",
    "is_inference_path",
    "mode_for",
    "request_fields",
    "token_count",
]

MALFORMED = "malformed stream"
"""The error a 2xx body gets when it cannot be framed or decoded."""

EMBEDDING_PATHS = frozenset({"/v1/embeddings", "/api/embed", "/api/embeddings"})
"""Paths whose answer carries vectors, not generated text: usage only, never content."""

INFERENCE_PATHS = frozenset(
    {"/v1/chat/completions", "/v1/completions", "/chat/completions", "/api/chat", "/api/generate"}
) | EMBEDDING_PATHS
"""Paths the proxy measures (OpenAI-compatible routes of all three engines, Ollama's native ones)."""

_OLLAMA_STREAM_BY_DEFAULT = frozenset({"/api/chat", "/api/generate"})
"""Ollama's native generation routes stream unless the request says ``"stream": false``."""

_DELTA_KEYS = ("content", "reasoning_content", "reasoning", "tool_calls")
"""Fields of an OpenAI ``delta``/``message`` that hold generated output. Reasoning text and tool calls
are tokens the engine generated too, so a thinking model's TTFT is its first reasoning token, which
is what the engine's own TTFT metrics (vLLM's histogram) count."""
_OLLAMA_MESSAGE_KEYS = ("content", "thinking", "tool_calls")
_OLLAMA_TEXT_KEYS = ("response", "thinking")
"""Ollama ``/api/generate`` puts generated text at the top level."""


COUNT_LIMIT = 2**53
"""No engine writes a count or a nanosecond duration this large (JSON allows any number of digits)."""


def token_count(value: object) -> int | None:
    """A token count or duration as the engine wrote it: a non-negative integer (not a bool) below 2**53."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < COUNT_LIMIT:
        return value
    return None


def _nonempty(obj: dict[str, Any], keys: tuple[str, ...]) -> bool:
    for key in keys:
        value = obj.get(key)
        if isinstance(value, (str, list)) and value:
            return True
    return False


def has_content(obj: dict[str, Any]) -> bool:
    """True when this object (stream chunk or whole body) carries generated output."""
    choices = obj.get("choices")
    if isinstance(choices, list):
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            text = choice.get("text")
            if isinstance(text, str) and text:
                return True
            for key in ("delta", "message"):
                part = choice.get(key)
                if isinstance(part, dict) and _nonempty(part, _DELTA_KEYS):
                    return True
    message = obj.get("message")
    if isinstance(message, dict) and _nonempty(message, _OLLAMA_MESSAGE_KEYS):
        return True
    return _nonempty(obj, _OLLAMA_TEXT_KEYS)


def request_fields(path: str, body: bytes) -> tuple[str | None, bool | None]:
    """``model`` and the stream flag the client asked for; None where the body does not say."""
    try:
        obj = json.loads(body) if body else None
    except (ValueError, RecursionError):  # RecursionError: a body nested ~1,000 deep
        return None, None
    if not isinstance(obj, dict):
        return None, None
    model = obj.get("model")
    stream = obj.get("stream", path in _OLLAMA_STREAM_BY_DEFAULT)
    return (model if isinstance(model, str) else None), (stream if isinstance(stream, bool) else None)


def mode_for(content_type: str | None) -> str | None:
    """Framing from the response Content-Type; None when the bytes must tell."""
    ct = (content_type or "").lower()
    if "event-stream" in ct:
        return "sse"
    if "ndjson" in ct or "jsonl" in ct or "json-seq" in ct:
        return "ndjson"
    if "json" in ct:
        return "json"
    return None


def decoder_for(content_encoding: str | None) -> tuple[Any, bool]:
    """An incremental decoder for the response's Content-Encoding, and whether the body is readable."""
    enc = (content_encoding or "identity").strip().lower()
    if enc in ("", "identity"):
        return None, True
    if enc in ("gzip", "x-gzip", "deflate"):
        return zlib.decompressobj(47), True  # 32+15: zlib or gzip header, detected
    return None, False  # br, zstd, …: forwarded untouched, measured by time and size only


def is_inference_path(path: str) -> bool:
    """True for the request paths the proxy measures (query string and trailing slash ignored)."""
    path = path.split("?", 1)[0]
    return path in INFERENCE_PATHS or (len(path) > 1 and path.rstrip("/") in INFERENCE_PATHS)
