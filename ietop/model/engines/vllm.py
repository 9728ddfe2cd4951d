"""vLLM from its log: start-up facts (configured vs effective), the periodic stats lines as a time
series, request logging (the real prompt size, when `--enable-log-requests` and DEBUG give token ids),
V0 preemption warnings. The `/metrics` side lives in `ietop.model.counters`.

Access lines (uvicorn) carry no time and no request id; request-logging lines carry ids but no access
status. They are joined first in, first out per source, without a time bound: the access line of a
non-streaming request is written when its response is, which may be long after the request arrived.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ietop.model.config import Settings
from ietop.model.facts import RequestFacts
from ietop.model.records import Ref, Simple
from parsers import events as ev

CONFIGURED_KEYS = frozenset({"max_model_len", "served_model", "version"})
"""Start-up facts that restate the configuration (the claim); the others are measured (evidence)."""


class VllmTracker:
    """Per-source state for one vLLM server log."""

    def __init__(self, src: int, sink: Callable[[str, Any], None], settings: Settings, facts: RequestFacts) -> None:
        self.src = src
        self.sink = sink
        self.settings = settings
        self.facts = facts
        self._prompt_seen: set[str] = set()
        self.startup_facts: dict[str, float | str] = {}
        """This server's start-up facts by key (the store's settings are one map for all its logs)."""

    def stats(self, t: float, e: ev.EngineStats, ref: Ref) -> None:
        self.sink("stats", Simple("stats", {
            "time": e.ts.isoformat() if e.ts else None, "engine": e.engine, "prompt_tps": e.prompt_tps,
            "gen_tps": e.gen_tps, "running": e.running, "waiting": e.waiting, "swapped": e.swapped,
            "kv_usage": e.kv_usage, "prefix_hit_rate": e.prefix_hit_rate, **dict(e.extra),
        }, ref, t))

    def startup(self, e: ev.StartupFact, ref: Ref) -> None:
        self.startup_facts[e.key] = e.value
        if e.key in CONFIGURED_KEYS:
            self.settings.claim(e.key, e.value, ref)
        if e.key != "max_model_len":
            self.settings.observe(e.key, e.value, ref)

    def request_logged(self, t: float, e: ev.RequestLogged, ref: Ref) -> None:
        # `received` (≤ 0.11.1, INFO) and `details` (DEBUG) may both carry the token ids: count once.
        # /tokenize calls are logged like requests but never reach the access log as inference.
        if e.prompt_tokens is None or e.request_id in self._prompt_seen or e.request_id.startswith("tokenize-"):
            return
        self._prompt_seen.add(e.request_id)
        if len(self._prompt_seen) > 65536:
            self._prompt_seen.clear()
        self.facts.push(self.src, t, {"prompt_tokens": e.prompt_tokens, "prompt_tokens_source": "log"},
                        merge_with_truncation=False, refs={"prompt_tokens": ref})

    def preemption(self, t: float, e: ev.Preemption, ref: Ref) -> None:
        self.sink("preemption", Simple("preemption", {
            "time": e.ts.isoformat() if e.ts else None, "request_id": e.request_id, "mode": e.mode,
            "cumulative": e.cumulative,
        }, ref, t))
