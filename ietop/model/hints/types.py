"""Diagnostic hints: the symptom table (seeds/001) and the field lessons (seeds/000) as small rules.

A hint is a hypothesis with evidence, not a verdict: each names the log lines or metric windows that
fired it, the causes to verify and the next step. `HintEngine` (ietop.model.hints.engine) watches finalized
records stream past (bounded memory: counts plus the first lines of evidence) and `evaluate()` applies every
rule to what it saw and to the store's state, so hints clear when the symptom is no longer in the data it is
given. This module holds the types the rules and the engine share, and the thresholds: named constants so a
reader can argue with them.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ietop.model.records import Load, Ref, Request, Simple, Unload

SLOW_S = 5.0
"""An inference request slower than this is "slow" (and any above the p90 of a busier log)."""
COLD_SHARE = 0.3
"""cold-load-latency: the load must be at least this share of a slow request's latency."""
THRASH_WINDOW_S = 600.0
"""eviction-thrash: a model loaded again within this long after it was evicted."""
OUTPUT_SHARE = 0.7
"""output-dominates: decode time (output tokens × ITL) is at least this share of the latency."""
HEALTHY_ITL_S = 0.1
"""output-dominates: at most this per token (≥ 10 tokens/s) counts as a healthy decode rate."""
OVERLAP_MIN = 3
QUEUE_RATIO = 1.3
"""queueing: ≥ OVERLAP_MIN requests in flight together, slower by this factor than requests alone."""
KV_HIGH = 0.9
"""kv-pressure: KV-cache usage at or above this fraction."""
TAIL_RATIO = 5.0
TAIL_MIN_REQUESTS = 20
"""tail-latency: p99 ≥ TAIL_RATIO × p50 over at least TAIL_MIN_REQUESTS."""
LOW_HIT_RATE = 0.1
LONG_PROMPT_TOKENS = 512
"""low-prefix-cache-hits: hit rate below this while prompts average at least LONG_PROMPT_TOKENS."""
EVIDENCE_MAX = 8
KEEP = 5000
RECENT = 64
"""Truncations kept for evidence and windows (the count of all is kept apart)."""

LOOPBACK = ("127.", "localhost", "[::1]", "::1")
FAILURE_KINDS = ("oom", "runner_crash", "load_failed", "engine_dead")


@dataclass(frozen=True, slots=True)
class Hint:
    id: str
    severity: str
    title: str
    detail: str
    evidence: tuple[Ref, ...]
    causes: tuple[str, ...]
    next: str

    def as_dict(self, paths: Sequence[str]) -> dict[str, Any]:
        return {"id": self.id, "severity": self.severity, "title": self.title, "detail": self.detail,
                "evidence": [{"path": paths[r.src], "line": r.line} for r in self.evidence],
                "causes": list(self.causes), "next": self.next}


@dataclass(slots=True)
class _Seen:
    """What the rules need of the records that streamed past, bounded."""

    requests: deque[Request] = field(default_factory=lambda: deque(maxlen=KEEP))
    loads: deque[Load] = field(default_factory=lambda: deque(maxlen=KEEP))
    unloads: deque[Unload] = field(default_factory=lambda: deque(maxlen=KEEP))
    truncations: deque[Simple] = field(default_factory=lambda: deque(maxlen=RECENT))
    truncation_count: int = 0
    largest_truncation: Simple | None = None
    truncated_ok: int = 0
    errors: dict[str, list[Simple]] = field(default_factory=dict)
    stats_waiting: list[Simple] = field(default_factory=list)
    stats_kv: list[Simple] = field(default_factory=list)
    preemptions: list[Simple] = field(default_factory=list)
    preemption_count: int = 0

    def since(self, t: float) -> tuple[_Seen, float]:
        """A copy holding only what happened at or after `t` (records without a time are kept), and the
        earliest time it holds (inf if none): until the cut passes that time, the copy stays the same."""
        def at(r: Any) -> float | None:
            value: float | None = r.t
            return value

        truncs = _recent(self.truncations, t, at)
        largest = self.largest_truncation if self.largest_truncation is not None and (
            self.largest_truncation.t is None or self.largest_truncation.t >= t) else (truncs[-1] if truncs else None)
        errors = {k: _recent(v, t, at) for k, v in self.errors.items()}
        preempt = _recent(self.preemptions, t, at)
        requests = _recent(self.requests, t, lambda r: r.t_end)
        loads = _recent(self.loads, t, lambda ld: ld.t_end or ld.t_begin)
        unloads = _recent(self.unloads, t, at)
        waiting, kv = _recent(self.stats_waiting, t, at), _recent(self.stats_kv, t, at)
        times = [r.t_end for r in requests] + [ld.t_end or ld.t_begin for ld in loads] + [
            r.t for group in (truncs, *errors.values(), preempt, unloads, waiting, kv) for r in group]
        if largest is not None:
            times.append(largest.t)
        floor = min((x for x in times if x is not None), default=float("inf"))
        return _Seen(
            requests=deque(requests, maxlen=KEEP),
            loads=deque(loads, maxlen=KEEP),
            unloads=deque(unloads, maxlen=KEEP),
            truncations=deque(truncs, maxlen=RECENT), truncation_count=len(truncs) if largest else 0,
            largest_truncation=largest,
            truncated_ok=sum(1 for r in requests if r.truncated and r.status < 400),
            errors={k: v for k, v in errors.items() if v},
            stats_waiting=waiting, stats_kv=kv,
            preemptions=preempt, preemption_count=len(preempt),
        ), floor


def _recent(items: Sequence[Any], since: float, when: Callable[[Any], float | None]) -> list[Any]:
    return [i for i in items if (w := when(i)) is None or w >= since]




@dataclass(frozen=True, slots=True)
class HintContext:
    """Store state the rules read: settings (claims and evidence), metric windows, listen addresses."""

    configured: dict[str, Any]
    configured_ref: dict[str, Ref]
    effective: dict[str, Any]
    effective_ref: dict[str, Ref]
    metric_windows: tuple[Any, ...] = ()
    gpu_util: float | None = None
    p50: float | None = None
    p99: float | None = None
    latency_count: int = 0
    aliases: dict[str, str] = field(default_factory=dict)
    metric_evidence: tuple[Ref, ...] = ()
    """The saved scrapes the metric windows were computed from (a live poll has no line to cite)."""


def _dedupe(refs: Sequence[Ref]) -> tuple[Ref, ...]:
    return tuple(dict.fromkeys(refs))


def _refs(items: Sequence[Any]) -> tuple[Ref, ...]:
    return tuple(getattr(i, "ref", None) or i for i in items[:EVIDENCE_MAX])


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0

