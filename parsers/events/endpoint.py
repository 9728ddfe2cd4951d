"""Events that do not come from a log line: what polling an engine's endpoint found, and the requests
`ietop proxy` measured.

Part of the event vocabulary of ``parsers.events``, which re-exports every class here; kept apart so
that neither module is too long to read in one sitting. The same conventions hold (see there).
"""

from __future__ import annotations

from dataclasses import dataclass

from parsers.events.base import Event

__all__ = ["EngineStatus", "ModelList", "ProxyRequest"]


@dataclass(slots=True)
class ProxyRequest(Event):
    """One request measured by `ietop proxy` from the bytes it forwarded (exact where logs can only
    estimate). Times in seconds: ``ttfb_s`` and ``ttft_s`` from the moment the whole request was sent
    upstream (a slow upload is not the engine's latency), ``e2e_s`` from the request's arrival at the proxy;
    token counts from the response's own usage fields (OpenAI `usage`, Ollama `prompt_eval_count`/
    `eval_count`); ``itl_s`` is the mean gap between content chunks after the first. ``error`` is one line
    (client disconnect, upstream down, upstream timeout, malformed stream) or None."""

    method: str
    path: str
    status: int | None
    model: str | None
    stream: bool
    ttfb_s: float | None
    ttft_s: float | None
    itl_s: float | None
    e2e_s: float | None
    content_chunks: int
    prompt_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    load_s: float | None
    bytes_up: int
    bytes_down: int
    error: str | None = None


@dataclass(slots=True)
class EngineStatus(Event):
    """What an engine's endpoint said when polled: ``state`` is up, down (refused, timed out),
    dead (answers but cannot serve: MLX /health 503, or its generation thread died), or unknown
    (an answer ietop cannot read). ``line`` is 0: it comes from a poll, not a log."""

    engine: str
    endpoint: str
    state: str
    detail: str


@dataclass(slots=True)
class ModelList(Event):
    """Models an engine lists (MLX `/v1/models`: available, never which one is loaded)."""

    engine: str
    endpoint: str
    models: tuple[str, ...] | None
    max_model_len: int | None = None
    """vLLM: the context the first listed model runs with (`max_model_len` in each entry)."""
