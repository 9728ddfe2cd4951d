"""The memory budget (DESIGN `ietop budget`; the seeds' step 01): usable model memory, each model's footprint
with the line or endpoint every number rests on, and for every pair whether the two fit together and what a
swap costs in seconds.

Pure: `BudgetInputs` (gathered from a store by `ietop.model.budget_inputs`) in, `Budget` out. A number the
log or an endpoint does not give is None, or, where it can be derived, a `Figure` marked estimated that says
how. Fits is None when a size is unknown: a budget that guesses is the budget.txt this replaces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from statistics import median

from ietop.model.records import Ref
from ietop.model.snapshot import Interval

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class Figure:
    """One size in bytes and what it rests on: log lines (`refs`), an endpoint, or an estimate (`how` says)."""

    size: int
    how: str
    refs: tuple[Ref, ...] = ()
    endpoint: str | None = None
    estimated: bool = False


@dataclass(slots=True)
class ModelSizes:
    """What the inputs say about one model's memory (before the budget picks among the sources)."""

    engine: str
    model: str
    weights: list[Figure] = field(default_factory=list)
    kv: list[Figure] = field(default_factory=list)
    graph: list[Figure] = field(default_factory=list)
    total: list[Figure] = field(default_factory=list)
    """Each list best evidence first: allocated lines, then the scheduler's estimate, then endpoints."""
    ctx: int | None = None
    parallel: int | None = None
    load_seconds: list[float] = field(default_factory=list)
    loads: int = 0
    on_demand_paths: dict[str, int] = field(default_factory=dict)
    """Inference paths of the requests that made it load (an embedder loads for `/api/embed`)."""
    evicted: list[tuple[str, Ref]] = field(default_factory=list)
    """Models unloaded to make room for this one, with the line that says so."""


@dataclass(frozen=True, slots=True)
class Usable:
    size: int | None
    source: str
    refs: tuple[Ref, ...] = ()
    cards: tuple[tuple[str, int], ...] = ()
    estimated: bool = False


@dataclass(frozen=True, slots=True)
class BudgetInputs:
    models: Sequence[ModelSizes]
    usable: Usable
    intervals: Sequence[Interval] = ()
    max_loaded: int | None = None
    """The loaded-model cap in effect or claimed (OLLAMA_MAX_LOADED_MODELS), for what can evict what."""
    paths: Sequence[str] = ()
    """Each source's path, by index: how a rule names the line it rests on."""


@dataclass(frozen=True, slots=True)
class Footprint:
    engine: str
    model: str
    weights: Figure | None
    kv: Figure | None
    total: Figure | None
    ctx: int | None
    parallel: int | None
    load_s: float | None
    """Median of the measured loads; None when none was measured."""
    loads_measured: int
    on_demand: str | None
    """Why the model is called out as loading on demand and able to evict a chat model, or None."""


@dataclass(frozen=True, slots=True)
class Pair:
    a: str
    b: str
    fits: bool | None
    need: int | None
    margin: int | None
    swap_s: float | None
    swap_loads_measured: int
    swap_model: str | None
    """The model whose load the swap cost is (the slower of the two to load)."""


@dataclass(frozen=True, slots=True)
class Together:
    models: tuple[str, ...]
    seconds: float
    share: float
    need: int | None
    fits: bool | None


@dataclass(frozen=True, slots=True)
class Budget:
    usable: Usable
    models: tuple[Footprint, ...]
    pairs: tuple[Pair, ...]
    together: Together | None
    rules: tuple[str, ...]


def gib(size: int | None) -> str:
    return "?" if size is None else f"{size / GIB:.1f} GiB"


def gib_number(size: int) -> str:
    """GiB for a table: under 1 GiB with two decimals (an embedder's 0.3 GiB, a 0.02 GB prompt cache is not 0.0)."""
    return f"{size / GIB:.1f}" if size >= GIB else f"{size / GIB:.2f}"


def _sum(parts: Sequence[Figure | None], how: str) -> Figure | None:
    if any(p is None for p in parts):
        return None
    known = [p for p in parts if p is not None]
    refs = tuple(r for p in known for r in p.refs)
    return Figure(sum(p.size for p in known), how, refs, estimated=True)


def footprint(m: ModelSizes) -> Footprint:
    """The best figure of each part; KV or total derived from the others (and marked so) where not logged."""
    weights = m.weights[0] if m.weights else None
    kv = m.kv[0] if m.kv else None
    graph = m.graph[0] if m.graph else None
    total = m.total[0] if m.total else None
    if kv is None and total is not None and weights is not None and not total.estimated and total.size >= weights.size:
        rest = total.size - weights.size - (graph.size if graph is not None else 0)
        if rest >= 0:
            how = "estimated: total minus weights" + (" and compute graph" if graph is not None else "")
            kv = Figure(rest, how, (*total.refs, *weights.refs), estimated=True)
    if total is None and weights is not None and kv is not None:
        total = _sum((weights, kv, graph) if graph is not None else (weights, kv),
                     "estimated: weights + KV" + (" + compute graph" if graph is not None else ""))
    if total is None and weights is not None:
        total = Figure(weights.size, "estimated: weights only (no KV size known)", weights.refs, weights.endpoint,
                       estimated=True)
    loads = sorted(m.load_seconds)
    load_s = round(median(loads), 3) if loads else None
    return Footprint(m.engine, m.model, weights, kv, total, m.ctx, m.parallel, load_s, len(loads), None)


def _pair(a: Footprint, b: Footprint, usable: int | None) -> Pair:
    need = a.total.size + b.total.size if a.total is not None and b.total is not None else None
    fits = None if need is None or usable is None else need <= usable
    margin = None if need is None or usable is None else usable - need
    slower = max((a, b), key=lambda f: -1.0 if f.load_s is None else f.load_s)
    if slower.load_s is None:
        return Pair(a.model, b.model, fits, need, margin, None, 0, None)
    return Pair(a.model, b.model, fits, need, margin, slower.load_s, slower.loads_measured, slower.model)


def together(intervals: Sequence[Interval], sizes: dict[str, Footprint], usable: int | None) -> Together | None:
    """The set of two or more models resident together for the longest time (a sweep over the intervals)."""
    steps: list[tuple[float, int, str]] = []
    end_all = max((iv.end if iv.end is not None else iv.start for iv in intervals), default=None)
    for iv in intervals:
        steps.append((iv.start, 1, iv.model))
        steps.append((iv.end if iv.end is not None else (end_all or iv.start), -1, iv.model))
    steps.sort(key=lambda s: (s[0], s[1]))
    now: dict[str, int] = {}
    spans: dict[tuple[str, ...], float] = {}
    last_t: float | None = None
    any_resident = 0.0
    for t, step, model in steps:
        if last_t is not None and t > last_t and now:
            key = tuple(sorted(now))
            any_resident += t - last_t
            if len(key) >= 2:
                spans[key] = spans.get(key, 0.0) + t - last_t
        last_t = t
        now[model] = now.get(model, 0) + step
        if now[model] <= 0:
            del now[model]
    if not spans or any_resident <= 0:
        return None
    best = max(spans.items(), key=lambda kv: (kv[1], len(kv[0])))
    models, seconds = best
    totals = [sizes[m].total for m in models if m in sizes]
    need = sum(f.size for f in totals if f is not None) if len(totals) == len(models) and all(totals) else None
    fits = None if need is None or usable is None else need <= usable
    return Together(models, round(seconds, 3), round(seconds / any_resident, 3), need, fits)


def where(ref: Ref, paths: Sequence[str]) -> str:
    """`file:line` of a ref (the file's last path element), as the rules cite it."""
    path = paths[ref.src] if 0 <= ref.src < len(paths) else "line"
    return f"{path.replace(chr(92), '/').rsplit('/', 1)[-1]}:{ref.line}"


def _on_demand(m: ModelSizes, fp: Footprint, others: Sequence[Footprint], best_set: Together | None,
               usable: int | None, max_loaded: int | None, paths: Sequence[str]) -> str | None:
    """An embedder (or any model loaded for embedding calls) that can push a chat model out: the log shows it
    did, or the set usually resident plus it does not fit, or the loaded-model cap is already reached."""
    embed_loads = sum(n for path, n in m.on_demand_paths.items() if "embed" in path)
    if not embed_loads and "embed" not in m.model.lower():
        return None
    why = f"loads on demand ({embed_loads} load{'s' if embed_loads != 1 else ''} for embedding calls)" if embed_loads \
        else "an embedding model: loads on demand"
    chat_victims = [(v, ref) for v, ref in m.evicted if v != m.model]
    if chat_victims:
        victim, ref = chat_victims[0]
        more = f" ({len(chat_victims)} evictions)" if len(chat_victims) > 1 else ""
        return f"{why} and evicted {victim}{more}: {where(ref, paths)}"
    if best_set is not None and m.model not in best_set.models:
        if max_loaded is not None and len(best_set.models) >= max_loaded:
            return (f"{why} and can evict a chat model: {' + '.join(best_set.models)} are usually resident and "
                    f"at most {max_loaded} models may be loaded")
        if best_set.need is not None and fp.total is not None and usable is not None \
                and best_set.need + fp.total.size > usable:
            return f"{why} and can evict a chat model: {' + '.join(best_set.models)} + it need " \
                   f"{gib(best_set.need + fp.total.size)} of {gib(usable)}"
    if fp.total is not None and usable is not None:
        short = [o.model for o in others if o.total is not None and o.total.size + fp.total.size > usable]
        if short:
            return f"{why} and can evict a chat model: it does not fit beside {', '.join(short)}"
    return None


def build(inputs: BudgetInputs) -> Budget:
    usable = inputs.usable.size
    prints = [footprint(m) for m in inputs.models]
    by_name = {f.model: f for f in prints}
    best_set = together(inputs.intervals, by_name, usable)
    final: list[Footprint] = []
    for m, fp in zip(inputs.models, prints, strict=True):
        others = [o for o in prints if o.model != fp.model]
        why = _on_demand(m, fp, others, best_set, usable, inputs.max_loaded, inputs.paths)
        final.append(fp if why is None else Footprint(fp.engine, fp.model, fp.weights, fp.kv, fp.total, fp.ctx,
                                                      fp.parallel, fp.load_s, fp.loads_measured, why))
    pairs = tuple(_pair(a, b, usable) for a, b in combinations(final, 2))
    return Budget(inputs.usable, tuple(final), pairs, best_set, tuple(rules(final, pairs, best_set, usable)))


def _swap(p: Pair) -> str:
    if p.swap_s is None:
        return "swap cost never measured"
    return f"swap costs {p.swap_s:.1f} s (loading {p.swap_model}, median of {p.swap_loads_measured})"


def rules(models: Sequence[Footprint], pairs: Sequence[Pair], best: Together | None, usable: int | None) -> list[str]:
    """The budget in the seed's plain form, one statement per line."""
    out: list[str] = []
    of = f"{usable / GIB:.1f}" if usable is not None else "?"
    for p in pairs:
        if p.need is None:
            missing = [m.model for m in models if m.model in (p.a, p.b) and m.total is None]
            out.append(f"{p.a} + {p.b} fit together: unknown — no size for {', '.join(missing)}")
        elif p.fits is None:
            out.append(f"{p.a} + {p.b} need {gib(p.need)}: unknown whether they fit — usable memory unknown")
        elif p.fits:
            out.append(f"{p.a} + {p.b} fit together ({p.need / GIB:.1f} GiB of {of}): yes — "
                       f"{gib(p.margin)} to spare")
        else:
            out.append(f"{p.a} + {p.b} fit together ({p.need / GIB:.1f} GiB of {of}): no — {_swap(p)}")
    for m in models:
        partners = [p for p in pairs if m.model in (p.a, p.b)]
        if partners and all(p.fits is False for p in partners):
            out.append(f"{m.model} runs alone: it fits beside no other model")
        elif not partners and m.total is not None and usable is not None and m.total.size > usable:
            out.append(f"{m.model} does not fit at all ({gib(m.total.size)} of {of})")
    if best is not None:
        verdict = {True: "they fit", False: "they do not fit", None: "whether they fit is unknown"}[best.fits]
        out.append(f"resident together most often: {' + '.join(best.models)} ({best.share:.0%} of the time "
                   f"anything was resident): {verdict}" + (f" ({gib(best.need)} of {of})" if best.need else ""))
    for m in models:
        if m.on_demand:
            out.append(f"{m.model} {m.on_demand}")
    return out
