"""`ietop proxy --jsonl` files → ProxyRequest events, so `analyze` and `replay` read what the proxy
measured through the same pipeline as logs. One JSON object per line, the fields of ProxyRequest plus
`time` (ISO-8601); unknown keys are ignored, a line that is not such an object is Unparsed."""

from __future__ import annotations

import json
import math
from dataclasses import fields
from datetime import datetime
from typing import Any

from parsers.events import Event, ProxyRequest, Unparsed

_FIELDS = {f.name: f for f in fields(ProxyRequest) if f.name not in ("line", "ts")}
_REQUIRED = ("method", "path")


def _num(value: Any, kind: type) -> Any:
    """A number of the record as `kind`, None when absent or not one: JSON allows `1e400` (inf as a float) and
    a 400-digit int (too large for one); neither is a measurement. The store's guard bounds the rest."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    try:
        return kind(value)
    except (OverflowError, ValueError):
        return None


def from_json(text: str, line: int = 0, env_ts: datetime | None = None) -> ProxyRequest:
    """One JSONL record → ProxyRequest (unknown keys ignored: later versions may add some).
    Raises ValueError for a line that is not such a record."""
    obj = json.loads(text)
    if not isinstance(obj, dict) or not all(isinstance(obj.get(k), str) for k in _REQUIRED):
        raise ValueError("not an ietop proxy record")
    ts = env_ts
    stamp = obj.get("ts") or obj.get("time")
    if isinstance(stamp, str):
        try:
            ts = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            ts = env_ts

    def f(key: str) -> float | None:
        value: float | None = _num(obj.get(key), float)
        return value

    def i(key: str) -> int | None:
        value: int | None = _num(obj.get(key), int)
        return value

    model, error = obj.get("model"), obj.get("error")
    return ProxyRequest(
        line, ts, obj["method"], obj["path"], status=i("status"),
        model=model if isinstance(model, str) else None, stream=bool(obj.get("stream")),
        ttfb_s=f("ttfb_s"), ttft_s=f("ttft_s"), itl_s=f("itl_s"), e2e_s=f("e2e_s"),
        content_chunks=i("content_chunks") or 0, prompt_tokens=i("prompt_tokens"),
        output_tokens=i("output_tokens"), cached_tokens=i("cached_tokens"), load_s=f("load_s"),
        bytes_up=i("bytes_up") or 0, bytes_down=i("bytes_down") or 0,
        error=error if isinstance(error, str) else None,
    )


class ProxyLogParser:
    """Same shape as the engine parsers (engine, version, era, parse)."""

    engine = "proxy"
    version: str | None = None
    era: str | None = "ietop proxy JSONL"

    def parse(self, line: int, text: str, env_ts: datetime | None = None) -> list[Event]:
        try:
            return [from_json(text, line, env_ts)]
        except (ValueError, RecursionError):
            return [Unparsed(line, env_ts)]


def to_json(event: ProxyRequest) -> str:
    """The JSONL line for one measurement (what `from_json` reads back); `ts` = arrival, ISO-8601."""
    # Not dataclasses.asdict: it deep-copies every value and costs more than the rest of the record's path.
    data: dict[str, Any] = {name: getattr(event, name) for name in _FIELDS}
    data["ts"] = event.ts.isoformat() if event.ts is not None else None
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)
