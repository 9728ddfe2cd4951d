"""Where one request's time went: queued, load wait, prefill, decode, other; the largest part with its fix;
and, for a cold start, the chain of the load it waited for, the eviction that load made, and the request that
triggered it.

A part is stated only when a line (or the proxy's measurement) states it for this request; otherwise it is
null with the reason. What a number means depends on its source:

- llama-server task lines (Ollama, llama.cpp): `ttft_s` is the prompt-eval time, so it is the prefill; `itl_s`
  is eval ms / eval tokens, so `itl_s × output_tokens` is the decode. Neither says how long the request queued.
- mlx_lm and the proxy time the first token from the request's arrival: that TTFT holds queueing, any load and
  the prefill together, which no line splits. mlx_lm's `itl_s` spans first to last token: decode is
  `itl_s × (tokens − 1)`; the proxy's decode is its end-to-end minus its TTFT.
- the load wait is the request's `load_s` (ietop.model.loads): the load's own duration for its trigger, the
  overlap of its lifetime with the load for a request that queued behind it; zero when it waited for none.

`other_s` is the latency less every other part, stated only when all of them are known: a remainder that hides
an unknown queue would be a guess. The records import this module; it reads them only (no import back).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ietop.model.records import Load, Ref, Request

PARTS = ("queued_s", "load_wait_s", "prefill_s", "decode_s", "other_s")
OVER = 0.05
"""Known parts may exceed the latency by this share (rounding, one-second access lines) before it is said."""

LABELS = {"queued_s": "queue", "load_wait_s": "load", "prefill_s": "prefill", "decode_s": "decode",
          "other_s": "other"}


@dataclass(frozen=True, slots=True)
class Step:
    """One link of a cold start's chain, with the line it rests on."""

    kind: str
    """`load` (the load waited for), `eviction` (a model unloaded to make room for it), `earlier_attempt`
    (a failed load of the same model it repeated), `trigger` (the request that set it off)."""
    ref: Ref
    model: str | None = None
    for_model: str | None = None
    status: str | None = None
    seconds: float | None = None
    time: str | None = None
    this_request: bool | None = None
    trigger: Request | None = None
    """For an earlier attempt: the request that set that one off (a client that gave up, most often)."""

    def as_dict(self, paths: Sequence[str]) -> dict[str, Any]:
        d: dict[str, Any] = {"step": self.kind}
        if self.kind in ("load", "earlier_attempt", "eviction"):
            d["model"] = self.model
        if self.kind == "eviction":
            d["for_model"] = self.for_model
            d["reason"] = self.status
        if self.kind in ("load", "earlier_attempt"):
            d["status"] = self.status
            d["seconds"] = self.seconds
        if self.kind == "trigger":
            d["time"] = self.time
            d["this_request"] = self.this_request
            d["status"] = self.status
        if self.kind == "earlier_attempt":
            by = self.trigger
            d["trigger"] = None if by is None else {
                "time": by.time.isoformat() if by.time else None, "status": by.status or None,
                "source": _where(by.ref, paths)}
        d["source"] = _where(self.ref, paths)
        return d


@dataclass(slots=True)
class Breakdown:
    latency_s: float | None
    parts: dict[str, float | None]
    evidence: dict[str, Ref] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)
    dominant: str | None = None
    chain: tuple[Step, ...] = ()
    gave_up: bool = False
    """It ended in an error while the load it waited for was still running (a client that gave up)."""
    unaccounted_s: float | None = None
    """Latency less the known parts, when some part is unknown: the time no line splits."""

    def known(self) -> dict[str, float]:
        return {k: v for k, v in self.parts.items() if v is not None}

    def as_dict(self, paths: Sequence[str]) -> dict[str, Any]:
        return {
            **self.parts,
            "dominant": self.dominant,
            "evidence": {k: _where(r, paths) for k, r in self.evidence.items()},
            "chain": [s.as_dict(paths) for s in self.chain],
            "unknown": dict(self.unknown),
        }


def _where(ref: Ref, paths: Sequence[str]) -> dict[str, Any]:
    return {"path": paths[ref.src], "line": ref.line}


def _kind(req: Request) -> str:
    """`proxy`, `mlx` or `log` (llama-server task lines, or nothing). The proxy cites its own record for every
    number it measured (ietop.model.proxied), timings included; a log's timings rest on other lines."""
    ev = req.evidence or {}
    if ev.get("ttft_s") == req.ref and ev.get("load_s") == req.ref:
        return "proxy"
    return "mlx" if req.engine == "mlx" else "log"


def breakdown(req: Request) -> Breakdown | None:
    """The request's breakdown; None for probes and management calls (they have no story to tell)."""
    if not req.inference:
        return None
    kind = _kind(req)
    b = Breakdown(req.latency_s, dict.fromkeys(PARTS))
    why = req.unknown or {}
    cites = req.evidence or {}
    load = req.waited_for
    b.gave_up = load is not None and not load.ok and req.status >= 400
    _load_wait(req, b, kind, load, cites, why)
    _prefill_decode(req, b, kind, cites, why)
    if kind == "log":
        b.unknown["queued_s"] = "no line times its wait for a free slot"
    _other(b)
    _dominant(b)
    b.chain = chain(req, b)
    return b


def _state(b: Breakdown, part: str, value: float | None, ref: Ref | None, why: str) -> None:
    if value is None:
        b.unknown[part] = why
        return
    b.parts[part] = value
    if ref is not None:
        b.evidence[part] = ref


def _load_wait(req: Request, b: Breakdown, kind: str, load: Load | None, cites: dict[str, Ref],
               why: dict[str, str]) -> None:
    part = "load_wait_s"
    if kind == "proxy":
        _state(b, part, req.load_s, req.ref, "the response carried no load duration")
    elif req.cold_load and req.load_s is not None:
        _state(b, part, req.load_s, cites.get("load_s"), "")
    elif b.gave_up and load is not None:
        # From the later of its start and the load's first line to its own end: it waited for nothing else.
        begin = max(req.t_start, load.t_begin if load.begin_known else req.t_start)
        waited = max(0.0, req.t_end - begin)
        if req.latency_s is not None:
            waited = min(waited, req.latency_s)
        _state(b, part, round(waited, 3), load.ref, "")
    elif req.cold_load is False:
        b.parts[part] = 0.0  # no load ended in its lifetime
    else:
        b.unknown[part] = why.get("cold_load", "no line says whether it waited for a load")


def _prefill_decode(req: Request, b: Breakdown, kind: str, cites: dict[str, Ref], why: dict[str, str]) -> None:
    if b.gave_up:
        b.parts["prefill_s"] = b.parts["decode_s"] = 0.0  # the model never came up: nothing was computed
        b.unknown.setdefault("queued_s", "no line times its wait apart from the load's")
        return
    if kind == "log":
        _state(b, "prefill_s", req.ttft_s, cites.get("ttft_s"),
               why.get("ttft_s", "no prompt-eval timing line could be its own"))
        decode = round(req.itl_s * req.output_tokens, 3) if req.itl_s is not None and req.output_tokens else None
        _state(b, "decode_s", decode, cites.get("itl_s"),
               why.get("itl_s", "no eval timing line could be its own"))
        return
    ttft = req.ttft_s
    load = b.parts["load_wait_s"]
    if ttft is None:
        spans = "no line times its first token"
        b.unknown["prefill_s"] = why.get("ttft_s", spans)
        b.unknown["queued_s"] = why.get("ttft_s", spans)
    else:
        rest = f" ({ttft - load:.3f} s once the load is taken off)" if load is not None and ttft >= load else ""
        together = (f"its TTFT of {ttft:.3f} s counts from its arrival: queueing, the prefill and any load "
                    f"together, which no line splits{rest}")
        b.unknown["prefill_s"] = together
        b.unknown["queued_s"] = together
    if kind == "proxy":
        decode = round(req.latency_s - ttft, 6) if req.latency_s is not None and ttft is not None else None
        _state(b, "decode_s", decode if decode is None or decode >= 0 else None, req.ref,
               "the proxy saw no first token" if ttft is None else "its end-to-end time is not known")
    else:
        tokens = req.output_tokens
        decode = round(req.itl_s * (tokens - 1), 3) if req.itl_s is not None and tokens else None
        _state(b, "decode_s", decode, cites.get("itl_s"),
               why.get("itl_s", "its token lines do not give a decode span it alone owns"))


def _other(b: Breakdown) -> None:
    latency = b.latency_s
    known = b.known()
    total = sum(known.values())
    if latency is None:
        b.unknown["other_s"] = "its latency is not known"
        return
    missing = [p for p in PARTS[:-1] if b.parts[p] is None]
    if total > latency * (1 + OVER):
        b.unknown["other_s"] = (f"the known parts ({total:.3f} s) exceed its latency ({latency:.3f} s) by more "
                                f"than {OVER:.0%}: their lines and its access line disagree")
        return
    if missing:
        b.unaccounted_s = round(max(0.0, latency - total), 3)
        names = " and ".join(LABELS[p] for p in missing)
        verb = "are" if len(missing) > 1 else "is"
        b.unknown["other_s"] = (f"not stated while the {names} {verb} unknown: {b.unaccounted_s:.3f} s of its "
                                f"latency lies outside the known parts ({names} and overhead together)")
        return
    b.parts["other_s"] = round(max(0.0, latency - total), 3)


def _dominant(b: Breakdown) -> None:
    known = b.known()
    if not known or max(known.values()) <= 0:
        b.unknown["dominant"] = "no part of its time is known" if not known else "no known part took any time"
        return
    part = max(known, key=lambda k: known[k])
    if b.unaccounted_s is not None and b.unaccounted_s > known[part]:
        b.unknown["dominant"] = (f"the {b.unaccounted_s:.3f} s no line splits is more than its largest known "
                                 f"part ({LABELS[part]}, {known[part]:.3f} s)")
        return
    if b.latency_s is None and b.unknown.keys() & set(PARTS[:-1]):
        b.unknown["dominant"] = "its latency and some part are unknown: a larger one may hide there"
        return
    b.dominant = part


def chain(req: Request, b: Breakdown) -> tuple[Step, ...]:
    """The load it waited for, the evictions made for that load's model, the failed attempt it repeated, and
    the request that triggered it, each with its line."""
    load = req.waited_for
    if load is None:
        return ()
    steps = [Step("load", load.done_ref or load.ref, model=load.model, status=load.status,
                  seconds=load.duration_s)]
    steps += [Step("eviction", u.ref, model=u.model, for_model=u.for_model, status=u.reason) for u in load.evicted]
    prior = load.retry_of
    if prior is not None:
        steps.append(Step("earlier_attempt", prior.ref, model=prior.model, status=prior.status,
                          seconds=prior.duration_s, trigger=prior.trigger))
    trig = load.trigger
    if trig is not None:
        steps.append(Step("trigger", trig.ref, time=trig.time.isoformat() if trig.time else None,
                          this_request=trig is req, status=str(trig.status) if trig.status else None,
                          trigger=trig))
    return tuple(steps)


Where = Callable[["Ref"], str]
"""Ref → how a sentence names its line (`server.log:291`)."""


def sentences(b: Breakdown, where: Where, name: Callable[[str | None], str] = lambda m: m or "a model") \
        -> list[str]:
    """The chain as sentences: "Waited 12.4 s for the load of gemma3:27b (server.log:345), …"."""
    out: list[str] = []
    wait = b.parts["load_wait_s"]
    for step in b.chain:
        if step.kind == "load":
            took = f", which took {step.seconds:.1f} s" if step.seconds is not None and step.status == "ok" \
                and (wait is None or abs(step.seconds - wait) >= 0.05) else ""
            if b.gave_up:
                out.append(f"Gave up after {wait or 0:.1f} s during the load of {name(step.model)} "
                           f"(begun at {where(step.ref)}), which then {step.status or 'failed'}.")
            else:
                spent = f"Waited {wait:.1f} s" if wait is not None else "Waited"
                out.append(f"{spent} for the load of {name(step.model)} ({where(step.ref)}){took}.")
        elif step.kind == "eviction":
            verb = "replaced" if step.status == "switched" else "evicted"
            out.append(f"To make room it {verb} {name(step.model)} ({where(step.ref)}).")
        elif step.kind == "earlier_attempt":
            by = step.trigger
            who = (f", when the request at {_clock(by)} ({where(by.ref)}) ended with status {by.status}"
                   if by is not None else "")
            out.append(f"It repeated an earlier load of {name(step.model)} ({where(step.ref)}) that "
                       f"{'failed' if step.status == 'failed' else 'was abandoned'}{who}.")
        elif step.kind == "trigger" and step.trigger is not None:
            if step.this_request:
                out.append(f"This request triggered it ({where(step.ref)}).")
            else:
                out.append(f"The request at {_clock(step.trigger)} ({where(step.ref)}) triggered it.")
    return out


def _clock(req: Request) -> str:
    return req.time.strftime("%H:%M:%S") if req.time is not None else "an unknown time"


def fix(b: Breakdown, req: Request) -> str | None:
    """What the seeds would change for its dominant part (None when no part dominates)."""
    part = b.dominant
    if part == "load_wait_s":
        return ("keep the model resident: a keep-alive longer than the gaps between its requests "
                "(OLLAMA_KEEP_ALIVE), room for every model on the path (OLLAMA_MAX_LOADED_MODELS) or a preload, "
                "or route this model to a server that keeps it loaded")
    if part == "prefill_s":
        size = f"{req.prompt_tokens} real prompt tokens" if req.prompt_tokens is not None else "the real prompt"
        cut = "; it was truncated, so the context is also too small" if req.truncated else ""
        return (f"send less prompt ({size}): trim the history, the system prompt and the tool definitions, or "
                f"keep a shared prefix cached{cut}")
    if part == "decode_s":
        n = f"{req.output_tokens} output tokens" if req.output_tokens is not None else "the output"
        return f"cap the output ({n}): set max tokens (num_predict) and ask for shorter answers"
    if part == "queued_s":
        return "more parallel slots (OLLAMA_NUM_PARALLEL) or fewer concurrent requests"
    if part == "other_s":
        return "time the log does not split: measure the exchange with `ietop proxy`"
    return None
