"""Engine API answers (status code, body bytes, or the error of a failed poll) → events.

Takes what a poller got, never a socket: `ietop.sources.http` does the I/O and hands over the pieces.
A refused connection, a timeout, an empty 200 or garbage are states of the engine, not exceptions.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from parsers.events import EngineStatus, ModelList


def _json(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None


def mlx_health(endpoint: str, ts: datetime | None, status: int | None, body: bytes,
               error: str | None) -> EngineStatus:
    """mlx_lm.server `/health`: 200 {"status": "ok"}; 503 {"status": "unavailable"} once its generation
    thread died (0.32.2+; older servers keep answering 200 then, see `MlxTracker.state`)."""
    if error is not None or status is None:
        return EngineStatus(0, ts, "mlx", endpoint, "down", error or "no answer")
    doc = _json(body)
    said = doc.get("status") if isinstance(doc, dict) else None
    if status == 200 and said == "ok":
        return EngineStatus(0, ts, "mlx", endpoint, "up", "health ok")
    if status == 503:
        return EngineStatus(0, ts, "mlx", endpoint, "dead", f"health 503 {said or ''}".strip())
    return EngineStatus(0, ts, "mlx", endpoint, "unknown", f"health answered {status} {str(said or '')[:40]}".strip())


def openai_models(engine: str, endpoint: str, ts: datetime | None, status: int | None, body: bytes,
                  error: str | None) -> ModelList:
    """OpenAI-style `/v1/models` (vLLM, MLX). MLX can answer 200 with an EMPTY body (it crashes after the
    headers when the HF cache directory is missing): that is "unknown", not an error."""
    if error is not None or status != 200:
        return ModelList(0, ts, engine, endpoint, None)
    doc = _json(body)
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        return ModelList(0, ts, engine, endpoint, None)
    ids = tuple(str(m["id"]) for m in data if isinstance(m, dict) and "id" in m)
    return ModelList(0, ts, engine, endpoint, ids)


def mlx_models(endpoint: str, ts: datetime | None, status: int | None, body: bytes,
               error: str | None) -> ModelList:
    return openai_models("mlx", endpoint, ts, status, body, error)


def metrics_status(engine: str, endpoint: str, ts: datetime | None, status: int | None, samples: int,
                   bad_lines: int, error: str | None) -> EngineStatus:
    """A `/metrics` poll: up when it answered with samples; an answer without any sample is garbage."""
    if error is not None or status is None:
        return EngineStatus(0, ts, engine, endpoint, "down", error or "no answer")
    if status != 200:
        return EngineStatus(0, ts, engine, endpoint, "unknown", f"metrics answered {status}")
    if samples == 0:
        return EngineStatus(0, ts, engine, endpoint, "unknown", f"metrics unreadable ({bad_lines} bad lines)")
    return EngineStatus(0, ts, engine, endpoint, "up", f"{samples} samples")
