"""vLLM from its log: start-up facts (configured vs effective), the periodic stats lines as a time
series, request logging (the real prompt size, when `--enable-log-requests` and DEBUG give token ids),
V0 preemption warnings. The `/metrics` side lives in `ietop.model.counters`.

Access lines (uvicorn) carry no time and no request id; request-logging lines carry ids but no access
status. A row gets a logged prompt size only where the log proves whose it is (`ietop.model.engines.vllm_join`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ietop.model.config import Settings
from ietop.model.engines.vllm_join import VllmJoin
from ietop.model.records import Ref, Request, Simple
from parsers import events as ev

CONFIGURED_KEYS = frozenset({"max_model_len", "served_model", "version"})
"""Start-up facts that restate the configuration (the claim); the others are measured (evidence)."""


class VllmTracker:
    """Per-source state for one vLLM server log."""

    def __init__(self, src: int, sink: Callable[[str, Any], None], settings: Settings,
                 emit: Callable[[Request], None]) -> None:
        self.src = src
        self.sink = sink
        self.settings = settings
        self.join = VllmJoin(emit)
        self.startup_facts: dict[str, float | str] = {}
        """This server's start-up facts by key (the store's settings are one map for all its logs)."""
        self.startup_refs: dict[str, Ref] = {}

    def stats(self, t: float, e: ev.EngineStats, ref: Ref) -> None:
        self.join.stats(t, e.engine, e.running, e.waiting)
        self.sink("stats", Simple("stats", {
            "time": e.ts.isoformat() if e.ts else None, "engine": e.engine, "prompt_tps": e.prompt_tps,
            "gen_tps": e.gen_tps, "running": e.running, "waiting": e.waiting, "swapped": e.swapped,
            "kv_usage": e.kv_usage, "prefix_hit_rate": e.prefix_hit_rate, **dict(e.extra),
        }, ref, t))

    def startup(self, e: ev.StartupFact, ref: Ref) -> None:
        self.startup_facts[e.key] = e.value
        self.startup_refs[e.key] = ref
        if e.key in CONFIGURED_KEYS:
            self.settings.claim(e.key, e.value, ref)
        if e.key != "max_model_len":
            self.settings.observe(e.key, e.value, ref)

    def request_logged(self, t: float, e: ev.RequestLogged, ref: Ref) -> None:
        self.join.logged(t, e.request_id, e.phase, e.prompt_tokens, e.stream, e.late, ref)

    def access(self, req: Request) -> None:
        """An access row; an inference one gets its prompt size where the log proves whose request it answers.
        Rows are finished (handed to `emit`) in the log's order, some a few lines late (see vllm_join)."""
        if req.inference:
            self.join.access(req)
        else:
            self.join.passthrough(req)

    def server(self, started: bool) -> None:
        self.join.server(started)

    def flush(self) -> None:
        self.join.flush()

    def preemption(self, t: float, e: ev.Preemption, ref: Ref) -> None:
        self.sink("preemption", Simple("preemption", {
            "time": e.ts.isoformat() if e.ts else None, "request_id": e.request_id, "mode": e.mode,
            "cumulative": e.cumulative,
        }, ref, t))
