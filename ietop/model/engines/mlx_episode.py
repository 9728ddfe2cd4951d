"""One mlx_lm.server request as the log shows it (its arrival, its admitted generation) and the facts it can
state: what the tracker (ietop.model.engines.mlx) assembles, and the rules that say which lines a request owns."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ietop.model.records import Load, Ref, Request
from parsers import events as ev


@dataclass(slots=True)
class Arrival:
    t: float
    ts: datetime | None
    ref: Ref
    model: str
    stream: bool | None
    load: Load | None = None
    max_tokens: int | None = None
    path: str | None = None


@dataclass(slots=True)
class Episode:
    """One admitted generation, and the access-line record it feeds."""

    admitted_t: float
    arrival: Arrival | None
    request: Request | None = None
    total: int | None = None
    last_p: int = -1
    prefill_done_t: float | None = None
    first_token_t: float | None = None
    last_token_t: float | None = None
    tokens: int = 0
    tokens_ambiguous: bool = False
    usage: ev.Usage | None = None
    end_t: float | None = None
    last_t: float = 0.0
    done: bool = False
    facts: dict[str, object] = field(default_factory=dict)
    refs: dict[str, Ref] = field(default_factory=dict)
    """The line each fact rests on: `prefill` (its `N/N`), `first`/`last` token, `usage`."""
    why: dict[str, str] = field(default_factory=dict)
    """Why a fact the log speaks of stays unknown for this request."""


def same_path(path: str | None, arrival: Arrival | None) -> bool:
    """Could a line naming `path` be this arrival's? Unknown on either side (INFO has no bodies) allows it."""
    return path is None or arrival is None or arrival.path is None or arrival.path == path


@dataclass(slots=True)
class Group:
    """Admitted requests whose progress lines cannot be told apart (admitted together, no id)."""

    members: list[Episode] = field(default_factory=list)
    totals: dict[int, int] = field(default_factory=dict)
    """Denominator → how many of its `N/N` lines were seen."""
    finished: int = 0


def usage_fits(e: Episode, event: ev.Usage) -> bool:
    """Could this usage block be this request's? mlx_lm logs `Outgoing Response` for non-stream requests
    only; its counts must match what the log already says of the request."""
    arrival, out = e.arrival, event.completion_tokens
    if arrival is not None and (arrival.stream or (arrival.max_tokens and out is not None
                                                   and out > arrival.max_tokens)):
        return False
    if event.path is not None and not same_path(event.path, arrival):
        return False
    if (event.prompt_tokens is not None and e.total is not None
            and event.prompt_tokens - (event.cached_tokens or 0) != e.total):
        return False
    return not (not e.tokens_ambiguous and e.tokens and out is not None and e.tokens != out)


def full(e: Episode) -> bool:
    """It produced the max_tokens its body asked for, counted unambiguously, and its access line (a
    stream's comes first) is bound to it."""
    limit = e.arrival.max_tokens if e.arrival is not None else None
    if not limit or e.request is None or e.tokens_ambiguous or e.usage is not None:
        return False
    return e.tokens >= limit


def apply_facts(req: Request, e: Episode, debug: bool) -> None:
    """What the episode's lines prove, set on its request, each fact citing the line it rests on."""
    n = e.facts.get("prefill_tokens")
    req.prefill_tokens = n if isinstance(n, int) else None
    refs = e.refs
    if req.prefill_tokens is not None and "prefill" in refs:
        req.cite("prefill_tokens", refs["prefill"])
    arrival = e.arrival
    arrival_t = arrival.t if arrival is not None else None
    if e.usage is not None:
        req.prompt_tokens = e.usage.prompt_tokens
        req.prompt_tokens_source = "log"
        req.cached_tokens = e.usage.cached_tokens
        req.output_tokens = e.usage.completion_tokens
        for fact in ("prompt_tokens", "cached_tokens", "output_tokens"):
            req.cite(fact, refs["usage"])
    elif not e.tokens_ambiguous and e.tokens and e.end_t is not None:
        req.output_tokens = e.tokens
        req.cite("output_tokens", refs["last"])
    if req.prompt_tokens is not None and req.prefill_tokens is not None and req.cached_tokens is None:
        req.cached_tokens = max(0, req.prompt_tokens - req.prefill_tokens)
        req.cite("cached_tokens", refs["usage"])
    if not e.tokens_ambiguous and e.first_token_t is not None and arrival_t is not None:
        req.ttft_s = round(e.first_token_t - arrival_t, 6)
        req.cite("ttft_s", refs["first"])
        if e.tokens >= 2 and e.last_token_t is not None:
            req.itl_s = round((e.last_token_t - e.first_token_t) / (e.tokens - 1), 6)
            req.cite("itl_s", refs["last"])
    if e.end_t is not None and arrival_t is not None and not e.tokens_ambiguous:
        req.latency_s = round(e.end_t - arrival_t, 6)
        req.cite("latency_s", refs.get("usage") or refs["last"])
    say_why(req, e, debug)


def say_why(req: Request, e: Episode, debug: bool) -> None:
    """Why each fact the log could have given stays null (shown beside the fact, and in `--json`)."""
    for fact, why in e.why.items():
        if getattr(req, fact) is None:
            req.unknown_because(fact, why)
    if not debug:
        for fact in ("prompt_tokens", "output_tokens", "ttft_s", "latency_s"):
            req.unknown_because(fact, "not logged at INFO (DEBUG logs bodies, tokens and usage)")
        # A switch is silent at INFO (no body names the model): a wait behind one is not "no wait".
        req.cold_load = None
        req.unknown_because("cold_load", "not logged at INFO: a model switch leaves no line without DEBUG")
        return
    shared = "ambiguous: its token lines could be another open request's"
    if e.tokens_ambiguous:
        for fact in ("output_tokens", "ttft_s", "itl_s", "latency_s"):
            if getattr(req, fact) is None:
                req.unknown_because(fact, shared)
    elif req.latency_s is None:
        req.unknown_because("latency_s", "its end is not in the log (a stream's last token was never seen)")
    if req.prompt_tokens is None and "prompt_tokens" not in e.why:
        stream = e.arrival is not None and e.arrival.stream
        req.unknown_because("prompt_tokens", "not logged for a stream (mlx_lm logs the usage of non-stream "
                            "responses only)" if stream else "no usage block could be this request's")
