"""Engine API answers (status code, body bytes, or the error of a failed poll) → events.

Takes what a poller got, never a socket: `ietop.sources.http` does the I/O and hands over the pieces.
A refused connection, a timeout, an empty 200 or garbage are states of the engine, not exceptions.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from parsers.api.events import OllamaResidency, ResidentModel
from parsers.events import EngineStatus, ModelList


def _json(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: nested ~1,000 deep
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
    first = data[0] if data and isinstance(data[0], dict) else {}
    ctx = first.get("max_model_len")
    return ModelList(0, ts, engine, endpoint, ids, ctx if isinstance(ctx, int) and not isinstance(ctx, bool) else None)


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


# RFC 3339 as Go's time.RFC3339Nano writes it: 0-9 fraction digits (trailing zeros dropped), Z or ±hh:mm.
_RFC3339_RE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)
_VERSION_RE = re.compile(r"[\w.+~-]{1,64}")


def rfc3339(text: object) -> datetime | None:
    """An RFC 3339 time (Go's RFC3339Nano) as an aware datetime keeping its offset; None if unreadable.

    Written out because Python 3.10's ``fromisoformat`` accepts only 3 or 6 fraction digits and Go
    sends up to 9: the fraction is cut to microseconds.
    """
    if not isinstance(text, str):
        return None
    m = _RFC3339_RE.fullmatch(text)
    if m is None:
        return None
    y, mo, d, hh, mi, ss = (int(g) for g in m.groups()[:6])
    micro = int((m.group(7) or "").ljust(6, "0")[:6])
    try:
        if m.group(8):
            tz = timezone.utc
        else:
            sign = -1 if m.group(9) == "-" else 1
            tz = timezone(sign * timedelta(hours=int(m.group(10)), minutes=int(m.group(11))))
        return datetime(y, mo, d, hh, mi, ss, micro, tzinfo=tz)
    except ValueError:  # month 13, second 60, an offset of 24h or more...
        return None


def _count(value: object) -> int | None:
    """A non-negative JSON integer (bool is an int in Python, not in JSON)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _resident(entry: object) -> ResidentModel | None:
    if not isinstance(entry, dict):
        return None
    name = _text(entry.get("name")) or _text(entry.get("model"))
    if name is None:
        return None
    # context_length 0: the field exists (v0.10+, no omitempty) but the runner has not reported one.
    ctx = _count(entry.get("context_length")) or None
    expires = rfc3339(entry.get("expires_at"))
    if expires is not None and expires.year == 1:
        expires = None  # Go's zero time.Time: the scheduler had not set an expiry yet
    return ResidentModel(name, _count(entry.get("size")), _count(entry.get("size_vram")), expires, ctx,
                         _text(entry.get("digest")))


def ollama_ps(endpoint: str, ts: datetime | None, status: int | None, body: bytes,
              error: str | None) -> tuple[EngineStatus, OllamaResidency | None]:
    """Ollama `GET /api/ps`: the engine's state and, when the answer is readable, the resident models.

    An entry the model cannot be named from makes the whole answer "unknown" with no residency: a
    snapshot missing a model would read as that model being unloaded.
    """
    if error is not None or status is None:
        return EngineStatus(0, ts, "ollama", endpoint, "down", error or "no answer"), None
    if status != 200:
        return EngineStatus(0, ts, "ollama", endpoint, "unknown", f"ps answered {status}"), None
    doc = _json(body)
    if not isinstance(doc, dict) or "models" not in doc:
        return EngineStatus(0, ts, "ollama", endpoint, "unknown", "ps answer is not a model list"), None
    # Go marshals a nil slice as null; the handler starts from an empty one, but a null still means none.
    entries = doc["models"] if doc["models"] is not None else []
    if not isinstance(entries, list):
        return EngineStatus(0, ts, "ollama", endpoint, "unknown", "ps answer is not a model list"), None
    models = tuple(m for m in map(_resident, entries) if m is not None)
    if len(models) != len(entries):
        bad = len(entries) - len(models)
        return EngineStatus(0, ts, "ollama", endpoint, "unknown", f"ps listed {bad} unreadable model(s)"), None
    detail = f"{len(models)} model{'' if len(models) == 1 else 's'} resident" if models else "no model resident"
    return EngineStatus(0, ts, "ollama", endpoint, "up", detail), OllamaResidency(0, ts, endpoint, models)


def ollama_version(endpoint: str, ts: datetime | None, status: int | None, body: bytes,
                   error: str | None) -> EngineStatus:
    """Ollama `GET /api/version` (v0.1.14+): {"version": "0.12.3"}; dev builds say "0.0.0"."""
    if error is not None or status is None:
        return EngineStatus(0, ts, "ollama", endpoint, "down", error or "no answer")
    if status != 200:
        return EngineStatus(0, ts, "ollama", endpoint, "unknown", f"version answered {status}")
    doc = _json(body)
    version = doc.get("version") if isinstance(doc, dict) else None
    # The text goes to the screen as is: accept only what a version string is made of.
    if not isinstance(version, str) or _VERSION_RE.fullmatch(version) is None:
        return EngineStatus(0, ts, "ollama", endpoint, "unknown", "version answer unreadable")
    return EngineStatus(0, ts, "ollama", endpoint, "up", f"version {version}")


def ollama_tags(body: bytes) -> tuple[tuple[str, int | None], ...] | None:
    """Ollama `GET /api/tags`: (name, size in bytes of the model's files on disk) of each model pulled; None when
    the answer is not a model list. An entry without a name is left out (it cannot be matched with anything)."""
    doc = _json(body)
    if not isinstance(doc, dict):
        return None
    entries = doc.get("models") if doc.get("models") is not None else []
    if not isinstance(entries, list):
        return None
    out: list[tuple[str, int | None]] = []
    for entry in entries:
        if isinstance(entry, dict) and (name := _text(entry.get("name")) or _text(entry.get("model"))) is not None:
            out.append((name, _count(entry.get("size"))))
    return tuple(out)
