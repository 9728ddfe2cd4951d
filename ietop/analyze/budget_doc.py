"""`ietop budget`'s outputs: the `ietop.budget/1` JSON document and the terminal text (DESIGN, README).

Every size in the document carries its evidence: the log lines (path and line number) it was read from, the
endpoint that said it, or how it was estimated. Prompts never appear; model names and paths come from logs and
are untrusted text, escaped by the writer (parsers.text.inert) like every other report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ietop.model.budget import Budget, Figure, Footprint, gib, gib_number

SCHEMA = "ietop.budget/1"


def _lines(refs: Sequence[Any], paths: Sequence[str]) -> list[dict[str, Any]]:
    return [{"path": paths[r.src] if 0 <= r.src < len(paths) else None, "line": r.line} for r in refs]


def _figure(f: Figure | None, paths: Sequence[str]) -> dict[str, Any] | None:
    if f is None:
        return None
    return {"bytes": f.size, "how": f.how, "estimated": f.estimated, "endpoint": f.endpoint,
            "lines": _lines(f.refs, paths)}


def _model(m: Footprint, paths: Sequence[str]) -> dict[str, Any]:
    return {
        "engine": m.engine,
        "model": m.model,
        "weights_bytes": m.weights.size if m.weights else None,
        "kv_bytes": m.kv.size if m.kv else None,
        "total_bytes": m.total.size if m.total else None,
        "ctx": m.ctx,
        "parallel": m.parallel,
        "ctx_per_slot": m.ctx // m.parallel if m.ctx is not None and m.parallel else m.ctx,
        "load_s_median": m.load_s,
        "loads_measured": m.loads_measured,
        "on_demand": m.on_demand,
        "evidence": {"weights": _figure(m.weights, paths), "kv": _figure(m.kv, paths),
                     "total": _figure(m.total, paths)},
    }


def document(budget: Budget, paths: Sequence[str]) -> dict[str, Any]:
    """The `ietop.budget/1` document; `paths` names each source index the evidence refers to."""
    u = budget.usable
    best = budget.together
    return {
        "schema": SCHEMA,
        "usable_bytes": u.size,
        "usable_source": u.source,
        "usable_estimated": u.estimated,
        "usable_lines": _lines(u.refs, paths),
        "cards": [{"name": name, "bytes": size} for name, size in u.cards],
        "models": [_model(m, paths) for m in budget.models],
        "pairs": [{"a": p.a, "b": p.b, "fits": p.fits, "need_bytes": p.need, "margin_bytes": p.margin,
                   "swap_s": p.swap_s, "swap_loads_measured": p.swap_loads_measured, "swap_model": p.swap_model}
                  for p in budget.pairs],
        "resident_together": None if best is None else {
            "models": list(best.models), "seconds": best.seconds, "share": best.share,
            "need_bytes": best.need, "fits": best.fits},
        "rules": list(budget.rules),
    }


def _cell(f: Figure | None) -> str:
    if f is None:
        return "?"
    return ("~" if f.estimated else "") + gib_number(f.size)


def _where(f: Figure | None, paths: Sequence[str]) -> str:
    if f is None:
        return "not in the log or the endpoints"
    if f.refs:
        r = f.refs[0]
        path = paths[r.src] if 0 <= r.src < len(paths) else "?"
        more = f" (+{len(f.refs) - 1} lines)" if len(f.refs) > 1 else ""
        return f"{path.rsplit('/', 1)[-1]}:{r.line}{more} — {f.how}"
    return f"{f.endpoint} — {f.how}" if f.endpoint else f.how


def text(budget: Budget, paths: Sequence[str]) -> str:
    """The report for a terminal: usable memory, a table of footprints (GiB; ~ marks an estimate), where each
    total came from, and the rules."""
    u = budget.usable
    out = [f"usable model memory: {gib(u.size)} — {u.source}"]
    if u.refs:
        out.append("  from " + ", ".join(f"{paths[r.src].rsplit('/', 1)[-1]}:{r.line}" for r in u.refs
                                          if 0 <= r.src < len(paths)))
    out.append("")
    if not budget.models:
        out.append("no model seen: no load in the logs and no endpoint answered")
        return "\n".join(out) + "\n"
    name_w = max(5, *(len(m.model) for m in budget.models))
    out.append(f"{'model':<{name_w}}  {'weights':>8}  {'KV':>6}  {'total':>7}  {'ctx×par':>12}  {'load s':>12}")
    for m in budget.models:
        ctx = "?" if m.ctx is None else f"{m.ctx // (m.parallel or 1)}×{m.parallel or 1}"
        load = "never" if m.load_s is None else f"{m.load_s:.1f} (n={m.loads_measured})"
        out.append(f"{m.model:<{name_w}}  {_cell(m.weights):>8}  {_cell(m.kv):>6}  {_cell(m.total):>7}  "
                   f"{ctx:>12}  {load:>12}")
    out.append("")
    out.append("where each total comes from (~ = estimated)")
    for m in budget.models:
        out.append(f"  {m.model}: {_where(m.total, paths)}")
    out.append("")
    out.extend(budget.rules)
    return "\n".join(out) + "\n"
