"""The fourteen hint rules (DESIGN.md's table): each a small function from what was seen and the store's
state to a Hint or None. Kept apart from the engine (ietop.model.hints.engine) so each file reads in one sitting;
thresholds are the named constants in ietop.model.hints.types."""

from __future__ import annotations

import bisect
from collections.abc import Callable

from ietop.model.config import configured_context
from ietop.model.hints.types import (
    COLD_SHARE,
    EVIDENCE_MAX,
    FAILURE_KINDS,
    HEALTHY_ITL_S,
    KV_HIGH,
    LONG_PROMPT_TOKENS,
    LOOPBACK,
    LOW_HIT_RATE,
    OUTPUT_SHARE,
    OVERLAP_MIN,
    QUEUE_RATIO,
    SLOW_S,
    TAIL_MIN_REQUESTS,
    TAIL_RATIO,
    THRASH_WINDOW_S,
    Hint,
    HintContext,
    _dedupe,
    _median,
    _refs,
    _Seen,
)
from ietop.model.records import Load, Ref, Request, Unload


# -- the rules ---------------------------------------------------------------------------------
def cold_load_latency(s: _Seen, ctx: HintContext) -> Hint | None:
    slow = [r for r in s.requests if r.latency_s is not None and r.latency_s >= SLOW_S]
    waited = [r for r in slow if r.cold_load and r.load_s and r.load_s >= COLD_SHARE * (r.latency_s or 0)]
    if not waited:
        return None
    models = sorted({ctx.aliases.get(r.model, r.model) for r in waited if r.model})
    loads = [ld for ld in s.loads if ld.trigger is not None and any(ld.trigger is r for r in waited)]
    med = _median([r.load_s or 0.0 for r in waited])
    which = f" of {', '.join(models)}" if models else ""
    return Hint("cold-load-latency", "crit" if med >= 10 else "warn", "Slow requests waited for a model load",
                f"{len(waited)} of {len(slow)} slow requests waited for a load{which}, median {med:.1f} s",
                _refs(waited) + tuple(ld.done_ref or ld.ref for ld in loads[:EVIDENCE_MAX]),
                ("keep-alive too short", "model evicted by another", "too many models for the memory"),
                "raise keep-alive (OLLAMA_KEEP_ALIVE / keep_alive) or preload; cap loaded models to what fits")


def eviction_thrash(s: _Seen, ctx: HintContext) -> Hint | None:
    evictions = [u for u in s.unloads if u.is_eviction]
    if not evictions:
        return None
    pingpong: list[tuple[Unload, Load]] = []
    for u in evictions:
        for ld in s.loads:
            if (ld.status == "ok" and ld.model and u.model and _same(ld.model, u.model, ctx.aliases)
                    and ld.t_begin >= u.t and ld.t_begin - u.t <= THRASH_WINDOW_S):
                pingpong.append((u, ld))
                break
    if pingpong:
        u, back = pingpong[0]
        cost = sum(ld.duration_s or 0 for _, ld in pingpong)
        evictor = ctx.aliases.get(u.for_model or "", u.for_model)
        return Hint("eviction-thrash", "warn" if len(pingpong) < 3 else "crit", "Models evict each other",
                    f"{u.model} was evicted to load {evictor or 'another model'} and loaded again "
                    f"{back.t_begin - u.t:.0f} s later ({back.duration_s or 0:.1f} s); {len(pingpong)} reload(s) "
                    f"cost {cost:.1f} s in all",
                    tuple(r for u2, ld2 in pingpong[:EVIDENCE_MAX]
                          for r in (*_unload_refs(u2), ld2.done_ref or ld2.ref)),
                    ("max loaded models too low for the lineup", "an embedder sharing the GPU with the chat model",
                     "memory estimate too high"),
                    "raise max loaded models if memory allows; route that call elsewhere; count every model the "
                    "path can load")
    u = evictions[0]
    evictor = ctx.aliases.get(u.for_model or "", u.for_model)
    names = f"{u.model or 'a model'} to load {evictor}" if evictor else f"{u.model or 'a model'}"
    return Hint("eviction-thrash", "info", "A model was evicted",
                f"{len(evictions)} eviction(s): {names}; nothing was loaded back within {THRASH_WINDOW_S:.0f} s",
                tuple(r for u2 in evictions[:EVIDENCE_MAX] for r in _unload_refs(u2)),
                ("two models do not fit together",),
                "if the evicted model is needed again soon, raise max loaded models or keep it on another engine")


def context_not_in_effect(s: _Seen, ctx: HintContext) -> Hint | None:
    claim = configured_context(ctx.configured)
    eff_key = next((k for k in ("ctx_per_slot", "ctx_per_slot_limit") if k in ctx.effective), None)
    effective = ctx.effective.get(eff_key) if eff_key else None
    train = ctx.effective.get("n_ctx_train")
    if claim is not None and isinstance(effective, int) and claim != effective:
        refs = tuple(r for r in (ctx.configured_ref.get("context_length") or ctx.configured_ref.get(
            "default_context_length"), ctx.effective_ref.get(eff_key or "")) if r is not None)
        return Hint("context-not-in-effect", "warn", "Configured context is not the one in effect",
                    f"configured context {claim}, but the runner uses {effective} per slot",
                    refs, ("set in the shell, not the service environment", "a Modelfile num_ctx wins",
                           "/v1 endpoints cannot pass num_ctx", "capped at the model's trained context"),
                    "set it where the server reads it (service env, Modelfile, request options); confirm here")
    if isinstance(effective, int) and isinstance(train, int) and effective < train:
        refs = tuple(r for r in (ctx.effective_ref.get(eff_key or ""), ctx.effective_ref.get("n_ctx_train"))
                     if r is not None)
        sev = "warn" if s.truncation_count else "info"
        return Hint("context-not-in-effect", sev, "Context below what the model supports",
                    f"the runner uses {effective} tokens per slot of the model's {train}"
                    + (f"; {s.truncation_count} prompt(s) were truncated" if s.truncation_count else ""),
                    refs, ("default context in effect", "a setting that did not reach the runner"),
                    "if longer prompts are expected, set the context explicitly and confirm it in this line")
    return None


def prompt_truncated(s: _Seen, ctx: HintContext) -> Hint | None:
    largest = s.largest_truncation
    if not s.truncation_count or largest is None:
        return None
    limit = largest.data.get("limit")
    shifted = all(not r.data.get("truncated", True) for r in s.truncations)
    what = "exceeded the context and were shifted" if shifted else "were truncated"
    ok = f"; {s.truncated_ok} of the requests still returned success" if s.truncated_ok else ""
    return Hint("prompt-truncated", "warn", "Prompts cut to fit the context",
                f"{s.truncation_count} prompt(s) {what}; the largest had {largest.data.get('prompt') or 'unknown'} "
                f"tokens against a limit of {limit}{ok}",
                _dedupe((*_refs(list(s.truncations)[: EVIDENCE_MAX - 1]), largest.ref)),
                ("context too small for the prompts", "context setting not in effect"),
                "raise the context (and check it took effect) or shorten prompts")


def output_dominates(s: _Seen, ctx: HintContext) -> Hint | None:
    slow = [r for r in s.requests if r.latency_s and r.latency_s >= SLOW_S and r.output_tokens and r.itl_s]
    hits = [r for r in slow if (r.itl_s or 1) <= HEALTHY_ITL_S
            and (r.output_tokens or 0) * (r.itl_s or 0) >= OUTPUT_SHARE * (r.latency_s or 1)]
    if not hits or len(hits) * 2 < len(slow):
        return None
    toks = _median([float(r.output_tokens or 0) for r in hits])
    rate = 1.0 / _median([r.itl_s or 1.0 for r in hits])
    lat = _median([r.latency_s or 0.0 for r in hits])
    return Hint("output-dominates", "info", "Latency is output length, not model speed",
                f"{len(hits)} of {len(slow)} slow requests spent ≥{OUTPUT_SHARE:.0%} of their time decoding: "
                f"median {toks:.0f} output tokens at {rate:.0f} tokens/s = {lat:.1f} s",
                _refs(hits), ("long answers", "no max_tokens cap"),
                "cap max tokens, ask for shorter answers, stream")


def queueing(s: _Seen, ctx: HintContext) -> Hint | None:
    if s.stats_waiting:
        peak = max(s.stats_waiting, key=lambda r: r.data.get("waiting") or 0)
        return Hint("queueing", "warn", "Requests are waiting for a slot",
                    f"{len(s.stats_waiting)} stats line(s) show waiting requests, up to {peak.data.get('waiting')}",
                    _dedupe((peak.ref, *_refs(s.stats_waiting))), ("parallel slots / max-num-seqs too low",
                                                          "KV cache too small for the concurrency", "burst"),
                    "raise parallel slots if memory allows; admission control; separate batch from interactive")
    done = sorted((r for r in s.requests if r.latency_s is not None and r.status < 400), key=lambda r: r.t_start)
    busy: list[Request] = []
    alone: list[Request] = []
    starts = sorted(r.t_start for r in done)
    ends = sorted(r.t_end for r in done)
    for r in done:
        # Requests in flight with r: started before it ended, minus those that ended before it started.
        overlap = bisect.bisect_left(starts, r.t_end) - bisect.bisect_right(ends, r.t_start) - 1
        if overlap + 1 >= OVERLAP_MIN:
            busy.append(r)
        elif overlap == 0:
            alone.append(r)
    if busy and alone:
        b = _median([r.latency_s or 0.0 for r in busy])
        a = _median([r.latency_s or 0.0 for r in alone])
        if a > 0 and b >= QUEUE_RATIO * a:
            return Hint("queueing", "info", "Latency rises with concurrency",
                        f"{len(busy)} requests in flight together took median {b:.1f} s against {a:.1f} s alone "
                        f"({b / a:.1f}x)", _refs(busy),
                        ("requests serialised or sharing slots", "parallel too low"),
                        "raise parallel slots if memory allows; admission control")
    return None


def kv_pressure(s: _Seen, ctx: HintContext) -> Hint | None:
    windows = [w for w in ctx.metric_windows if (w.total.kv_cache_usage or 0) >= KV_HIGH or (w.total.preemptions or 0)]
    if not (s.stats_kv or s.preemption_count or windows):
        return None
    parts = []
    if s.stats_kv:
        parts.append(f"KV cache at {max(r.data.get('kv_usage') or 0 for r in s.stats_kv):.0%} in "
                     f"{len(s.stats_kv)} stats line(s)")
    if s.preemption_count:
        parts.append(f"{s.preemption_count} preemption warning(s)")
    for w in windows:
        parts.append(f"/metrics: KV {w.total.kv_cache_usage or 0:.0%}, {w.total.preemptions or 0:.0f} preemptions")
    return Hint("kv-pressure", "warn", "KV cache near full", "; ".join(parts),
                _refs(s.stats_kv) + _refs(s.preemptions) + (ctx.metric_evidence if windows else ()),
                ("too many slots or too long a context",
                                                           "KV cache memory too small"),
                "fewer slots or shorter context; more memory for KV; quantize the KV cache")


def partial_offload(s: _Seen, ctx: HintContext) -> Hint | None:
    partial = [ld for ld in s.loads if ld.offload and _partial(ld.offload)]
    if not partial:
        return None
    ld = partial[0]
    assert ld.offload is not None
    done, total = ld.offload
    what = f"{done} of {total} layers" if total else "no layer (a CPU fallback)"
    return Hint("partial-offload", "warn", "Layers run on the CPU",
                f"{ld.model or 'a model'} put {what} on the GPU",
                _refs(partial), ("model plus context larger than free VRAM", "other models resident"),
                "smaller quant or context; fewer resident models")


def low_util_high_latency(s: _Seen, ctx: HintContext) -> Hint | None:
    if ctx.gpu_util is None or ctx.p50 is None or ctx.gpu_util >= 0.3 or ctx.p50 < SLOW_S:
        return None
    return Hint("low-util-high-latency", "info", "GPU mostly idle while requests are slow",
                f"GPU busy {ctx.gpu_util:.0%} while median latency is {ctx.p50:.1f} s", (),
                ("CPU or tokenization bound", "offload", "network or client"),
                "look at CPU, tokenization, offload, network")


def tail_latency(s: _Seen, ctx: HintContext) -> Hint | None:
    if ctx.latency_count < TAIL_MIN_REQUESTS or not ctx.p50 or not ctx.p99 or ctx.p99 < TAIL_RATIO * ctx.p50:
        return None
    worst = sorted((r for r in s.requests if r.latency_s is not None and r.status < 400),
                   key=lambda r: -(r.latency_s or 0))
    return Hint("tail-latency", "warn", "A long tail",
                f"p99 {ctx.p99:.1f} s is {ctx.p99 / ctx.p50:.0f}x the median {ctx.p50:.1f} s "
                f"over {ctx.latency_count} requests", _refs(worst),
                ("batching or concurrency policy", "queue limits", "mixed workloads"),
                "batching/concurrency policy, queue limits, workload isolation")


def load_failure(s: _Seen, ctx: HintContext) -> Hint | None:
    # A load cancelled because the client went away is client-timeout-during-load, not a failure.
    errs = [e for kind in FAILURE_KINDS for e in s.errors.get(kind, []) if "context canceled" not in e.data["message"]]
    failed = [ld for ld in s.loads if ld.status == "failed" and not _aborted(ld)]
    if not errs and not failed:
        return None
    errs.sort(key=lambda e: (e.ref.src, e.ref.line))
    if not errs and all(ld.failure == "model not found" for ld in failed):
        # Asked for a model the engine could not find: a name, not a memory problem.
        names = ", ".join(sorted({ld.model or "?" for ld in failed}))
        return Hint("load-failure", "warn", "A requested model was not found",
                    f"{len(failed)} load(s) answered 404: model not found (name/path/hub): {names[:160]}",
                    _refs(failed), ("model name or path misspelt", "not in the local cache and the hub is "
                                    "unreachable or offline", "repo id does not exist"),
                    "check the model name, the local path or the Hugging Face repo id (and HF_HUB_OFFLINE)")
    first = errs[0].data["message"] if errs else f"load of {failed[0].model or 'a model'} failed"
    # A failed load and the error line that failed it are one failure: count lines when there are any.
    counted = (f"{len(errs)} failure line(s) ({', '.join(sorted({e.data['kind'] for e in errs}))})" if errs
               else f"{len(failed)} failed load(s)")
    return Hint("load-failure", "crit", "The engine failed to load or died", f"{counted}; first: {first[:160]}",
                _refs(errs) + _refs(failed), ("memory budget exceeded", "driver or runtime error",
                                              "generation thread died (MLX)"),
                "check the memory budget (model + KV + other resident models); see the evidence lines")


def client_timeout_during_load(s: _Seen, ctx: HintContext) -> Hint | None:
    # Only aborts that happened while a model was loading (the line says so, or the load failed
    # with the 499 as its trigger); a client leaving mid-generation is another story.
    aborts = [a for a in s.errors.get("client_abort", []) if "finished loading" in a.data["message"]]
    during = [ld for ld in s.loads if _aborted(ld)]
    if not during and not aborts:
        return None
    ok = [ld.duration_s for ld in s.loads if ld.status == "ok" and ld.duration_s]
    measured = f"; loads that finished took {max(ok):.1f} s" if ok else ""
    refs = _refs(aborts) + tuple(ld.trigger.ref for ld in during if ld.trigger is not None)
    return Hint("client-timeout-during-load", "warn", "Clients gave up while a model was loading",
                f"{max(len(aborts), len(during))} client abort(s) during a load{measured}", _dedupe(refs),
                ("client or gateway timeout shorter than the load",),
                "set client/gateway timeouts from the measured load time, or keep the model loaded")


def low_prefix_cache_hits(s: _Seen, ctx: HintContext) -> Hint | None:
    for w in ctx.metric_windows:
        t = w.total
        if (t.prefix_cache_queries and t.prefix_cache_hit_rate is not None and t.prefix_cache_hit_rate < LOW_HIT_RATE
                and (t.prompt_tokens_per_request or 0) >= LONG_PROMPT_TOKENS):
            return Hint("low-prefix-cache-hits", "info", "Long prompts, few prefix-cache hits",
                        f"{t.prefix_cache_hit_rate:.0%} hit rate with {t.prompt_tokens_per_request:.0f} prompt tokens "
                        f"per request ({w.endpoint})", ctx.metric_evidence,
                        ("prompts differ at the start", "no routing locality"),
                        "stable prompt prefixes (system prompt first); routing locality")
    return None


def engine_exposed(s: _Seen, ctx: HintContext) -> Hint | None:
    for key, source, ref_of in (("listen", ctx.effective, ctx.effective_ref), ("host", ctx.configured,
                                                                              ctx.configured_ref)):
        value = source.get(key)
        if not isinstance(value, str) or not value:
            continue
        host = value.split("://", 1)[-1]
        if not host.startswith(LOOPBACK):
            ref = ref_of.get(key)
            return Hint("engine-exposed", "warn", "The engine listens beyond this machine",
                        f"listening on {value}", (ref,) if ref else (), ("bound to all interfaces or a LAN address",),
                        "bind to localhost; expose only an authenticating proxy")
    return None


def _unload_refs(u: Unload) -> tuple[Ref, ...]:
    """The lines that make up one unload (the decision and the victim), at most three."""
    return tuple(u.evidence[:3]) or (u.ref,)


def _partial(offload: tuple[int | None, int | None]) -> bool:
    """x of y layers on the GPU with x < y; or, in the oldest form (no total), none at all."""
    done, total = offload
    if done is None:
        return False
    return done < total if total else done == 0


def _aborted(ld: Load) -> bool:
    return ld.status == "failed" and ld.trigger is not None and ld.trigger.status == 499


def _same(a: str, b: str, aliases: dict[str, str]) -> bool:
    def key(name: str) -> str:
        name = aliases.get(name, name)
        return name.replace("\\", "/").rsplit("/", 1)[-1]

    return key(a) == key(b)


RULES: tuple[Callable[[_Seen, HintContext], Hint | None], ...] = (
    cold_load_latency, eviction_thrash, context_not_in_effect, prompt_truncated, output_dominates, queueing,
    kv_pressure, partial_offload, low_util_high_latency, tail_latency, load_failure, client_timeout_during_load,
    low_prefix_cache_hits, engine_exposed,
)
HINT_IDS = tuple(rule.__name__.replace("_", "-") for rule in RULES)
