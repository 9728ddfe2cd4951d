"""`ietop compare`: two sides (two logs, one log split at a time, or consecutive server runs of one log), each
analyzed as `ietop analyze` does, set side by side per model and overall (issue 23, item 3).

Pure: the figures are computed from the records of the `ietop.analyze/2` document (`requests`, `unloads`,
`config`, as dicts), so a side can come from a live `Analysis` (its spool) or from a saved JSON report, and a
test can check them against its own computation over `ietop analyze --json`. The definitions are those of
analyze's `latency` and `models` (ietop.model.per_model), every percentile nearest-rank (`Sketch`):

- `e2e_p50_s`/`e2e_p90_s`: `latency_s` of inference requests with a status below 400 (as `latency.e2e_s`);
- `ttft_p50_s`/`ttft_p90_s`: `ttft_s` of inference requests (as `latency.ttft_s` and `models[].ttft_*`);
- `cold_loads`: inference requests that waited for a load (`cold_load` true); its n: those where that is known;
- `evictions`: unloads that made room for another model (`reason` evicted or switched); per model, the model's
  own (`models[].evictions_suffered`);
- `truncations`: inference requests whose prompt was cut;
- `output_tokens_p50`; `decode_tps_p50`: per request 1 / `itl_s` (as `models[].decode_tps_p50`).

The seeds' third lesson ("latency is tokens divided by rate: check the numerator first") is `why`: when the median
latency moved, which of output tokens, decode rate, cold loads and TTFT moved with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ietop.model.config import OLLAMA_KEYS
from ietop.model.records import EVICTION_REASONS
from ietop.model.sketch import Sketch

SCHEMA = "ietop.compare/1"
MOVED_PCT = 10.0
"""A median that changed by less than this (in %) is reported as unchanged: run-to-run noise of a few requests."""
COLD_MOVED = 0.10
"""The same for the share of requests that waited for a load (in share points)."""

Key = tuple[str, str | None]
METRICS: tuple[tuple[str, str, str], ...] = (
    # (name, label, unit)
    ("e2e_p50_s", "e2e p50", "s"), ("e2e_p90_s", "e2e p90", "s"),
    ("ttft_p50_s", "TTFT p50", "s"), ("ttft_p90_s", "TTFT p90", "s"),
    ("cold_loads", "cold loads", ""), ("evictions", "evictions", ""), ("truncations", "truncations", ""),
    ("output_tokens_p50", "output tokens p50", "tok"), ("decode_tps_p50", "decode p50", "tok/s"),
)
_ENV_NAMES = {v: k for k, v in OLLAMA_KEYS.items()}


@dataclass(slots=True)
class _Acc:
    requests: int = 0
    cold: int = 0
    cold_known: int = 0
    truncations: int = 0
    evictions: int = 0
    e2e: Sketch = field(default_factory=Sketch)
    ttft: Sketch = field(default_factory=Sketch)
    output: Sketch = field(default_factory=Sketch)
    decode: Sketch = field(default_factory=Sketch)

    def add(self, req: Mapping[str, Any]) -> None:
        self.requests += 1
        if (cold := req.get("cold_load")) is not None:
            self.cold_known += 1
            self.cold += bool(cold)
        self.truncations += req.get("truncated") is True
        if (lat := req.get("latency_s")) is not None and (req.get("status") or 0) < 400:
            self.e2e.add(lat)
        if (ttft := req.get("ttft_s")) is not None:
            self.ttft.add(ttft)
        if (out := req.get("output_tokens")) is not None:
            self.output.add(out)
        if (itl := req.get("itl_s")) is not None and itl > 0:
            self.decode.add(1.0 / itl)

    def figures(self) -> dict[str, tuple[float | None, int]]:
        """name → (value, n)."""
        out_p50 = self.output.quantile(0.5)
        return {
            "requests": (self.requests, self.requests),
            "e2e_p50_s": (self.e2e.quantile(0.5), self.e2e.count),
            "e2e_p90_s": (self.e2e.quantile(0.9), self.e2e.count),
            "ttft_p50_s": (self.ttft.quantile(0.5), self.ttft.count),
            "ttft_p90_s": (self.ttft.quantile(0.9), self.ttft.count),
            "cold_loads": (self.cold if self.cold_known else None, self.cold_known),
            "evictions": (self.evictions, self.requests), "truncations": (self.truncations, self.requests),
            "output_tokens_p50": (None if out_p50 is None else round(out_p50), self.output.count),
            "decode_tps_p50": (self.decode.quantile(0.5), self.decode.count),
        }


@dataclass(frozen=True, slots=True)
class Side:
    """One side's figures: overall, per (engine, model), and its `config` section (analyze's)."""

    where: dict[str, Any]
    """How the side was cut from the logs (paths, start, end, run), its inference requests and its `config`: the
    `before`/`after` objects of the JSON."""
    requests: int
    overall: dict[str, tuple[float | None, int]]
    models: dict[Key, dict[str, tuple[float | None, int]]]
    config: Mapping[str, Any]


def side(where: dict[str, Any], requests: Iterable[Mapping[str, Any]], unloads: Iterable[Mapping[str, Any]],
         config: Mapping[str, Any]) -> Side:
    """A side from analyze's records (`requests` and `unloads` as the JSON lists them, `config` its section)."""
    overall = _Acc()
    models: dict[Key, _Acc] = {}
    for req in requests:
        if not req.get("inference"):
            continue
        overall.add(req)
        key = (req.get("engine") or "", req.get("model"))
        models.setdefault(key, _Acc()).add(req)
    for un in unloads:
        if un.get("reason") in EVICTION_REASONS:
            overall.evictions += 1
            models.setdefault((un.get("engine") or "", un.get("model")), _Acc()).evictions += 1
    return Side({**where, "requests": overall.requests, "config": dict(config)}, overall.requests, overall.figures(),
                {k: a.figures() for k, a in models.items()}, config)


def _metric(before: tuple[float | None, int], after: tuple[float | None, int]) -> dict[str, Any]:
    b, a = before[0], after[0]
    delta = None if a is None or b is None else a - b
    pct = None if delta is None or not b else delta / b * 100.0
    return {"before": b, "after": a, "delta": delta, "delta_pct": pct, "n_before": before[1], "n_after": after[1]}


def _metrics(before: dict[str, tuple[float | None, int]] | None,
             after: dict[str, tuple[float | None, int]] | None) -> dict[str, dict[str, Any]]:
    empty = _Acc().figures()
    b, a = before or empty, after or empty
    return {name: _metric(b[name], a[name]) for name, _, _ in METRICS}


def compare(before: Side, after: Side) -> dict[str, Any]:
    """One `comparisons[]` object of the `ietop.compare/1` document."""
    overall = _metrics(before.overall, after.overall)
    keys = sorted(set(before.models) | set(after.models),
                  key=lambda k: (-_requests(before, k) - _requests(after, k), k[0], k[1] or ""))
    models = []
    for key in keys:
        m = _metrics(before.models.get(key), after.models.get(key))
        models.append({"engine": key[0], "model": key[1], "requests_before": _requests(before, key),
                       "requests_after": _requests(after, key), "metrics": m,
                       "why": why(m, _cold_share(before.models.get(key)), _cold_share(after.models.get(key)))})
    return {"before": before.where, "after": after.where,
            "overall": {"metrics": overall, "why": why(overall, _cold_share(before.overall),
                                                             _cold_share(after.overall))},
            "models": models, "config": config_changes(before.config, after.config)}


def _requests(s: Side, key: Key) -> int:
    figs = s.models.get(key)
    return 0 if figs is None else figs["requests"][1]


def _cold_share(figs: dict[str, tuple[float | None, int]] | None) -> float | None:
    if figs is None:
        return None
    cold, known = figs["cold_loads"]
    return None if cold is None or not known else cold / known


# -- configuration ----------------------------------------------------------------------------------------
def config_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The settings that differ between the sides, configured (the claims) and effective (the evidence), each with
    the line it rests on per side. A setting stated on one side only is not called a change: the other side's part
    of the log may just not hold the line that states it (a split inside a run leaves the start-up lines before it)."""
    out: dict[str, list[dict[str, Any]]] = {"changed": [], "only_before": [], "only_after": []}
    for kind in ("configured", "effective"):
        b, a = before.get(kind) or {}, after.get(kind) or {}
        b_ev = (before.get("evidence") or {}).get(kind) or {}
        a_ev = (after.get("evidence") or {}).get(kind) or {}
        for key in sorted(set(b) | set(a)):
            entry = {"kind": kind, "key": key, "name": setting_name(kind, key), "before": b.get(key),
                     "after": a.get(key), "before_source": b_ev.get(key), "after_source": a_ev.get(key)}
            if key in b and key in a:
                if b[key] != a[key]:
                    out["changed"].append(entry)
            else:
                out["only_before" if key in b else "only_after"].append(entry)
    return out


def setting_name(kind: str, key: str) -> str:
    """What the operator set: the environment variable for Ollama's configured claims, else the contract's key."""
    return _ENV_NAMES.get(key, key) if kind == "configured" else key


# -- why it moved -------------------------------------------------------------------------------------------
def why(m: Mapping[str, Mapping[str, Any]], cold_before: float | None, cold_after: float | None) -> dict[str, Any]:
    """Whether the median latency moved, and which of its parts moved with it. Latency is output tokens over the
    decode rate, plus loads and prompt evaluation: output tokens are named first (the seeds' "check the
    numerator first"), then the rate, then cold loads and TTFT when they moved. `because` holds the parts that
    moved the way latency did (`output_tokens`, `decode_rate`, `cold_loads`, `ttft`)."""
    e2e = m["e2e_p50_s"]
    b, a = e2e["before"], e2e["after"]
    if b is None or a is None:
        missing = "before" if b is None else "after"
        return {"latency": "unknown", "because": [], "text": f"latency unknown: no e2e latency on the {missing} side"}
    latency = _direction(b, a)
    out = m["output_tokens_p50"]
    parts = [
        ("output_tokens", "output tokens", _direction(out["before"], out["after"]), 1,
         f"p50 {_tokens(out['before'])} → {_tokens(out['after'])}"),
        ("decode_rate", "decode rate", _direction(m["decode_tps_p50"]["before"], m["decode_tps_p50"]["after"]),
         -1, f"{_rate(m['decode_tps_p50']['before'])} → {_rate(m['decode_tps_p50']['after'])} tok/s"),
        ("cold_loads", "cold loads", _share_direction(cold_before, cold_after), 1,
         f"{_count(m['cold_loads'], 'before')} → {_count(m['cold_loads'], 'after')} requests"),
        ("ttft", "TTFT", _direction(m["ttft_p50_s"]["before"], m["ttft_p50_s"]["after"]), 1,
         f"p50 {_secs(m['ttft_p50_s']['before'])} → {_secs(m['ttft_p50_s']['after'])}"),
    ]
    head = f"latency {latency} (p50 {_secs(b)} → {_secs(a)})"
    if latency == "unchanged":
        return {"latency": latency, "because": [], "text": head}
    sign = 1 if latency == "rose" else -1
    because = [p for p in parts if p[2] in ("rose", "fell") and (1 if p[2] == "rose" else -1) * p[3] == sign]
    # The numerator and the rate are always stated; loads and TTFT only when they are part of the answer.
    rest = [p for p in parts[:2] if p not in because and p[2] != "unknown"]
    unknown = [p[1] for p in parts[:2] if p[2] == "unknown"]
    said = [f"{label} {state} ({detail})" for _, label, state, _, detail in because]
    others = [f"{label} {state} ({detail})" for _, label, state, _, detail in rest]
    if said:
        text = f"{head} because {_joined(said)}" + "".join(f", {o}" for o in others)
    else:
        text = f"{head}; " + ", ".join(others) + (": neither explains it" if others else "")
    if unknown:
        text += f" ({' and '.join(unknown)} not known on both sides)"
    return {"latency": latency, "because": [p[0] for p in because], "text": text}


def _joined(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _direction(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "unknown"
    if before == after or (before and abs(after - before) / abs(before) * 100.0 < MOVED_PCT):
        return "unchanged"
    return "rose" if after > before else "fell"


def _share_direction(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "unknown"
    if abs(after - before) < COLD_MOVED:
        return "unchanged"
    return "rose" if after > before else "fell"


def _secs(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v * 1000:.0f} ms" if v < 1 else f"{v:.2f} s" if v < 10 else f"{v:.1f} s"


def _tokens(v: float | None) -> str:
    return "—" if v is None else f"{v:.0f}"


def _rate(v: float | None) -> str:
    return "—" if v is None else f"{v:.0f}"


def _count(metric: Mapping[str, Any], side_name: str) -> str:
    value, n = metric[side_name], metric[f"n_{side_name}"]
    return "—" if value is None else f"{value:.0f} of {n}"


def document(mode: str, split_at: str | None, comparisons: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole `ietop.compare/1` document (README, "ietop compare")."""
    return {"schema": SCHEMA, "mode": mode, "split_at": split_at, "moved_pct": MOVED_PCT,
            "comparisons": comparisons}
