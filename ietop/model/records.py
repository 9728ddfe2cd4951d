"""The records the store derives from events: requests, loads, unloads, truncations, errors.

They are mutable while the store can still join them (a load learns its trigger request after the
request's access line arrives, which is after the load completed); once the store finalizes a record it
hands it to a sink and never touches it again. ``as_dict`` gives the `ietop.analyze/2` JSON shape.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from json.encoder import JSONEncoder, encode_basestring
from typing import Any

from ietop.model.breakdown import breakdown

INFERENCE_PATHS = frozenset(
    {
        "/api/generate",
        "/api/chat",
        "/api/embed",
        "/api/embeddings",
        "/v1/chat/completions",
        "/chat/completions",
        "/v1/completions",
        "/v1/embeddings",
        "/v1/responses",
        "/v1/messages",
        "/v1/audio/transcriptions",
    }
)


def is_inference(method: str, path: str) -> bool:
    """Inference traffic, as opposed to probes and management calls (`HEAD /`, `/api/tags`, …)."""
    # The bare path first: a query string is rare, and split() built a list for every request.
    return method == "POST" and (path in INFERENCE_PATHS or ("?" in path and path.split("?", 1)[0] in INFERENCE_PATHS))


# Not frozen: a frozen dataclass sets each field through object.__setattr__ (0.54 against 0.20 us on the
# ingest path, one Ref per event); treated as immutable, and hashable by value for de-duplication.
@dataclass(slots=True, unsafe_hash=True)
class Ref:
    """Where a fact came from: source index (into the store's source list) and 1-based line."""

    src: int
    line: int


def iso(ts: datetime | None) -> str | None:
    return ts.isoformat() if ts is not None else None


_ISO_LAST: list[Any] = [None, None]


def iso_cached(ts: datetime | None) -> str | None:
    """`iso` for the access-line hot path, where consecutive requests share one timestamp object."""
    if ts is None:
        return None
    if ts is not _ISO_LAST[0]:
        _ISO_LAST[0] = ts
        _ISO_LAST[1] = ts.isoformat()
    text: str = _ISO_LAST[1]
    return text


@dataclass(slots=True)
class Request:
    time: datetime | None
    t_end: float
    t_start: float
    engine: str
    method: str
    path: str
    status: int
    client: str | None
    latency_s: float | None
    ref: Ref
    model: str | None = None
    inference: bool = False
    prompt_tokens: int | None = None
    prompt_tokens_source: str | None = None
    prefill_tokens: int | None = None
    cached_tokens: int | None = None
    output_tokens: int | None = None
    ttft_s: float | None = None
    itl_s: float | None = None
    cold_load: bool | None = False
    """Waited for a model load; None when that cannot be known (MLX at INFO logs no model switch)."""
    load_s: float | None = None
    truncated: bool | None = False
    """Its prompt was cut; None when a truncation line could be its or another open request's."""
    evidence: dict[str, Ref] | None = None
    """Fact name → the log line it rests on (None until a fact cites one: most requests are probes)."""
    unknown: dict[str, str] | None = None
    """Fact name → why it is null although the log speaks of it (e.g. its lines could be another request's)."""
    waited_for: Load | None = field(default=None, compare=False, repr=False)
    """The load it waited for (the last one, when several ended in its lifetime), or the one it gave up during
    (a client abort while the model loaded): the start of its cold-start story (ietop.model.breakdown)."""

    def cite(self, fact: str, ref: Ref) -> None:
        if self.evidence is None:
            self.evidence = {}
        self.evidence[fact] = ref
        if self.unknown is not None:
            self.unknown.pop(fact, None)

    def unknown_because(self, fact: str, why: str) -> None:
        if self.unknown is None:
            self.unknown = {}
        self.unknown[fact] = why

    def cited(self) -> dict[str, Ref]:
        """The stated facts that rest on a line other than the request's own (`ref`), and that line: what
        `--json` writes as `facts_evidence`. Most requests are probes, whose only number is on their own line."""
        if not self.evidence:
            return {}
        return {k: v for k, v in self.evidence.items() if getattr(self, k, None) is not None}

    def facts_evidence(self) -> dict[str, Ref]:
        """The line of every stated fact: what a fact cites, else, for the latency, the request's own access
        line (Ollama's GIN and the proxy print it there)."""
        cited = self.cited()
        if self.latency_s is not None and "latency_s" not in cited:
            cited["latency_s"] = self.ref
        return cited

    def as_dict(self, paths: Sequence[str]) -> dict[str, Any]:
        return {
            "time": iso_cached(self.time),
            "engine": self.engine,
            "model": self.model,
            "method": self.method,
            "path": self.path,
            "status": self.status or None,  # 0: no answer (the proxy saw the upstream fail)
            "client": self.client,
            "inference": self.inference,
            "latency_s": self.latency_s,
            "prompt_tokens": self.prompt_tokens,
            "prompt_tokens_source": self.prompt_tokens_source,
            "prefill_tokens": self.prefill_tokens,
            "cached_tokens": self.cached_tokens,
            "output_tokens": self.output_tokens,
            "ttft_s": self.ttft_s,
            "itl_s": self.itl_s,
            "cold_load": self.cold_load,
            "load_s": self.load_s,
            "truncated": self.truncated,
            "source": {"path": paths[self.ref.src], "line": self.ref.line},
            "facts_evidence": {k: {"path": paths[r.src], "line": r.line} for k, r in self.cited().items()},
            "unknown": dict(self.unknown) if self.unknown else {},
            "breakdown": _breakdown_dict(self, paths),
        }

    def json_line(self, paths: Sequence[str]) -> str:
        """`as_dict` serialized, written by hand: requests are most of a large report."""
        return (
            f'{{"time":{_js(iso_cached(self.time))},"engine":{_js(self.engine)},"model":{_js(self.model)},'
            f'"method":{_js(self.method)},"path":{_js(self.path)},"status":{self.status or "null"},'
            f'"client":{_js(self.client)},"inference":{_js(self.inference)},"latency_s":{_js(self.latency_s)},'
            f'"prompt_tokens":{_js(self.prompt_tokens)},"prompt_tokens_source":{_js(self.prompt_tokens_source)},'
            f'"prefill_tokens":{_js(self.prefill_tokens)},"cached_tokens":{_js(self.cached_tokens)},'
            f'"output_tokens":{_js(self.output_tokens)},"ttft_s":{_js(self.ttft_s)},"itl_s":{_js(self.itl_s)},'
            f'"cold_load":{_js(self.cold_load)},"load_s":{_js(self.load_s)},"truncated":{_js(self.truncated)},'
            f'"source":{{"path":{_js(paths[self.ref.src])},"line":{self.ref.line}}},'
            # Most requests (probes above all) cite nothing and know nothing unknown: no call for them.
            f'"facts_evidence":{"{}" if self.evidence is None else self._evidence_json(paths)},'
            f'"unknown":{"{}" if self.unknown is None else self._unknown_json()},'
            # Probes (most requests) have no story to tell: no call for them.
            f'"breakdown":{_breakdown_json(self, paths) if self.inference else "null"}}}'
        )

    def _evidence_json(self, paths: Sequence[str]) -> str:
        return _refs_json(self.cited(), paths)

    def _unknown_json(self) -> str:
        if not self.unknown:
            return "{}"
        return "{" + ",".join(f"{_js(k)}:{_js(v)}" for k, v in self.unknown.items()) + "}"


def _breakdown_dict(req: Request, paths: Sequence[str]) -> dict[str, Any] | None:
    b = breakdown(req)
    return None if b is None else b.as_dict(paths)


def _breakdown_json(req: Request, paths: Sequence[str]) -> str:
    """`_breakdown_dict` serialized by hand, as `json_text` would write it: a dict built to be encoded cost twice this
    line (the breakdown and its evidence are most of a request's JSON)."""
    b = breakdown(req)
    if b is None:
        return "null"
    parts = ",".join(f'"{k}":{_js(v)}' for k, v in b.parts.items())  # keys: breakdown.PARTS
    chain = json_text([s.as_dict(paths) for s in b.chain]) if b.chain else "[]"
    unknown = ",".join(f"{_js(k)}:{_js(v)}" for k, v in b.unknown.items())
    return (f'{{{parts},"dominant":{_js(b.dominant)},"evidence":{_refs_json(b.evidence, paths)},'
            f'"chain":{chain},"unknown":{{{unknown}}}}}')


_WHERE: dict[str, str] = {}
"""A source path → the start of the JSON object that cites one of its lines (`{"path":"…","line":`)."""


def _refs_json(refs: dict[str, Ref], paths: Sequence[str]) -> str:
    """{fact: {"path": …, "line": …}} as `json_text` writes it. The keys are the facts' own names (attributes)."""
    out = []
    for k, r in refs.items():
        path = paths[r.src]
        head = _WHERE.get(path)
        if head is None:
            head = _WHERE[path] = f'{{"path":{_js(path)},"line":'
        out.append(f'"{k}":{head}{r.line}}}')
    return "{" + ",".join(out) + "}"


JSON_ENCODE = JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
"""The compact JSON every report writes, by the C encoder. It refuses NaN and infinities, which no report states:
`json_text` then writes them as null."""


def finite(value: Any) -> Any:
    """`value` with every NaN or infinite float replaced by None: JSON has no such numbers (`Infinity` is not
    JSON), and a report states no number rather than an impossible one."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def json_text(value: object) -> str:
    """Any JSON value, compact, NaN and infinities as null: the C encoder, and only when it refuses an impossible
    number is the value walked once to null them (`finite`). Every report's JSON (ietop.analyze.spool.json_dumps)
    and a request's nested parts are written by it."""
    try:
        return JSON_ENCODE(value)
    except ValueError:
        return JSON_ENCODE(finite(value))


def _js(value: object) -> str:
    """One JSON scalar (the hand-written request line below avoids the generic encoder's overhead)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        text: str = encode_basestring(value)
        return text
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return "null"
    return repr(value)


@dataclass(slots=True)
class Load:
    time: datetime | None
    t_begin: float
    engine: str
    ref: Ref
    model: str | None = None
    runner: str | None = None
    t_start: float | None = None
    t_end: float | None = None
    duration_s: float | None = None
    status: str = "incomplete"
    ctx: int | None = None
    parallel: int | None = None
    gpu_layers: int | None = None
    kv_size: int | None = None
    offload: tuple[int | None, int | None] | None = None
    required: str | None = None
    available: str | None = None
    evicted: list[Unload] = field(default_factory=list)
    """The evictions made to room for it: the unloads of other models whose `for_model` is its model, since the
    last successful load of its log (an aborted attempt's evictions pass to the retry that completes)."""
    retry_of: Load | None = field(default=None, compare=False, repr=False)
    """The failed or abandoned load of the same model just before it on its log, which it repeated."""
    trigger: Request | None = None
    trigger_gap: float = float("inf")
    waiters: int = 0
    done_ref: Ref | None = None
    begin_known: bool = True
    rss_step: int | None = None
    failure: str | None = None
    """Why it failed, where the log says (`model not found`: an MLX switch answered 404)."""
    memory: dict[tuple[str, str], tuple[int, Ref, bool]] | None = field(default=None, compare=False, repr=False)
    """(part, device) → (bytes, the line, planned) from the load's memory lines (`LoadMemory`): a later line
    for the same part and device replaces an earlier one (the allocation after the estimate)."""

    def memory_part(self, part: str) -> tuple[int, tuple[Ref, ...], bool] | None:
        """A part's bytes summed over devices, the lines they rest on, and whether it was only planned.
        Allocated figures win over the estimate when the log has both."""
        if not self.memory:
            return None
        found = [(b, ref, planned) for (p, _dev), (b, ref, planned) in self.memory.items() if p == part]
        if not found:
            return None
        allocated = [f for f in found if not f[2]]
        chosen = allocated or found
        return sum(f[0] for f in chosen), tuple(f[1] for f in chosen), not allocated

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def as_dict(self, paths: Sequence[str]) -> dict[str, Any]:
        trig = self.trigger
        return {
            "time": iso(self.time),
            "engine": self.engine,
            "model": self.model,
            "duration_s": self.duration_s,
            "ok": self.ok,
            "status": self.status,
            "ctx": self.ctx,
            "parallel": self.parallel,
            "gpu_layers": self.gpu_layers,
            "kv_size": self.kv_size,
            "offload": list(self.offload) if self.offload else None,
            "required": self.required,
            "available": self.available,
            "runner": self.runner,
            "rss_step_bytes": self.rss_step,
            "failure": self.failure,
            "queued_requests": self.waiters,
            "trigger_request": None
            if trig is None
            else {
                "time": iso(trig.time),
                "method": trig.method,
                "path": trig.path,
                "latency_s": trig.latency_s,
                "source": {"path": paths[trig.ref.src], "line": trig.ref.line},
            },
            "source": {"path": paths[self.ref.src], "line": self.ref.line},
            "done_source": None
            if self.done_ref is None
            else {"path": paths[self.done_ref.src], "line": self.done_ref.line},
        }


EVICTION_REASONS = frozenset({"evicted", "switched"})


@dataclass(slots=True)
class Unload:
    time: datetime | None
    t: float
    engine: str
    reason: str
    ref: Ref
    model: str | None = None
    for_model: str | None = None
    num_ctx: int | None = None
    vram_wait_s: list[float] = field(default_factory=list)
    evidence: list[Ref] = field(default_factory=list)
    server_stopped: bool = False
    """Its server stopped (the JSON reason stays `unknown`: the contract has no word for it)."""

    @property
    def is_eviction(self) -> bool:
        """Made room for another model: the one definition the Residency, Timeline and hints all count. An MLX
        `switch_failed` is not one (the failed load dropped the model; nothing took its place)."""
        return self.reason in EVICTION_REASONS

    def as_dict(self, paths: Sequence[str]) -> dict[str, Any]:
        return {
            "time": iso(self.time),
            "engine": self.engine,
            "model": self.model,
            "reason": self.reason,
            "for_model": self.for_model,
            "num_ctx": self.num_ctx,
            "vram_wait_s": self.vram_wait_s or None,
            "source": {"path": paths[self.ref.src], "line": self.ref.line},
            "evidence": [{"path": paths[r.src], "line": r.line} for r in self.evidence],
        }


@dataclass(slots=True)
class Simple:
    """Truncations, errors and prompt tasks: finalized as soon as they are seen."""

    kind: str
    data: dict[str, Any]
    ref: Ref
    t: float | None = None
    """The sortable time of the line (hints look at a window of recent records)."""

    def as_dict(self, paths: Sequence[str]) -> dict[str, Any]:
        return {**self.data, "source": {"path": paths[self.ref.src], "line": self.ref.line}}
