"""A request measured by `ietop proxy` (parsers.events.ProxyRequest) as the store's records.

The proxy saw the exchange itself, so these requests carry exact timings and the response's own token
counts; a failed exchange also becomes an error record.
"""

from __future__ import annotations

from datetime import timedelta

from ietop.model.records import Ref, Request, Simple, iso
from parsers.events import ProxyRequest

PROXY_COLD_LOAD_S = 0.5
"""Ollama reports load_duration on every response; under this it is the warm-model bookkeeping."""


STATED = ("prompt_tokens", "cached_tokens", "prefill_tokens", "output_tokens", "ttft_s", "itl_s", "load_s")


def proxied_request(t: float, e: ProxyRequest, ref: Ref) -> tuple[Request, Simple | None]:
    """The request, and the error record when the exchange failed. `t` is when the request began."""
    e2e = e.e2e_s or 0.0
    try:
        end = e.ts + timedelta(seconds=e2e) if e.ts is not None else None
    except OverflowError:  # a record stamped at the end of year 9999: no later time exists to end at
        end = e.ts
    engine = "ollama" if e.path.startswith("/api/") else "openai-compatible"
    req = Request(end, t + e2e, t, engine, e.method, e.path, e.status or 0, None, e.e2e_s, ref,
                  model=e.model, inference=True, prompt_tokens=e.prompt_tokens,
                  prompt_tokens_source="proxy" if e.prompt_tokens is not None else None,
                  cached_tokens=e.cached_tokens, output_tokens=e.output_tokens, ttft_s=e.ttft_s, itl_s=e.itl_s,
                  load_s=e.load_s, cold_load=bool(e.load_s and e.load_s >= PROXY_COLD_LOAD_S))
    if e.prompt_tokens is not None and e.cached_tokens is not None:
        req.prefill_tokens = e.prompt_tokens - e.cached_tokens
    # Every number here is the proxy's own measurement of this one exchange: its record is the evidence.
    req.evidence = dict.fromkeys(STATED, ref)
    error = None
    if e.error is not None:
        error = Simple("error", {"time": iso(e.ts), "kind": _error_kind(e.error), "message": f"proxy: {e.error}"},
                       ref, t)
    return req, error


def _error_kind(error: str) -> str:
    return "client_abort" if "disconnect" in error else "engine_dead" if "upstream down" in error else "other"
