"""Per-model figures (`ietop analyze`'s `models`, the dashboard's Models screen): for each engine and model, what
its inference requests, loads and unloads say — the operator's "record TTFT and tokens/s per model".

Streaming and bounded: `PerModel` is a store sink hook (`(kind, record)`, as `ietop.analyze.report.Digest`)
that keeps, per model, counters and `Sketch`es (exact percentiles up to `EXACT_LIMIT` samples, within the
sketch's stated relative error beyond). Residency needs the loads and unloads in time order (the store
finalizes a load after the request that triggered it, out of order), so it keeps one stripped copy of each
load and unload: those are a few per model switch, not per request.

The figures, each null where the records do not give it:

- `requests`: inference requests (probes and management calls are not: `Request.inference`).
- `cold_load_share`: requests that waited for a load over those where that is known (`cold_load` not None:
  MLX at INFO logs no switch).
- `ttft_*`: `ttft_s` as each source states it — Ollama/llama-server runner timings: the prompt-eval time (no
  queueing, no load); MLX DEBUG: first token minus arrival; `ietop proxy`: first content byte. vLLM logs none.
- `decode_tps_p50`: per request 1 / `itl_s`. `itl_s` is, per source, the mean time per generated token from the
  runner's `eval time = X ms / N tokens` line (Ollama, llama-server); the mean gap between streamed tokens after
  the first (MLX DEBUG); the mean gap between content chunks after the first (`ietop proxy`: a chunk can hold
  more than one token, so a rate from it is a lower bound).
- `prefill_tps_p50`: per request `prefill_tokens` / `ttft_s`, only where one line states both the tokens
  evaluated and the time that took (llama.cpp's `prompt eval time = X ms / N tokens`: the two facts cite the
  same line, which is not the access line). Elsewhere `ttft_s` includes waiting, routing or a load, and no
  line states a prefill time: such a request gives no prefill rate rather than a wrong one.
- `prompt_tokens_*`: the real prompt size (`prompt_tokens`: before any truncation cut it), `output_tokens_*`.
- `loads` (completed), `loads_failed`, `load_s_median` (completed loads' `duration_s`).
- `evictions_suffered`: its unloads that made room for another model (`Unload.is_eviction`), with `evicted_for`
  (the models they made room for, and how often); `evictions_caused` and `evicted_by_this`: the evictions
  whose `for_model` is this model, and which models they evicted.
- `truncations`: its requests whose prompt was cut (`truncated` True).
- `resident_s` / `resident_share`: time resident inside the window over the window's length. Residency is the
  dashboard's timeline (`ietop.model.timeline.build_timeline`): from a completed load to the unload, eviction,
  reload or crash that ends it, or to the window's end. A model already resident when the logs begin is counted
  only from its first load in them; with no completed load of it in the window the share is null (unknown,
  not 0). The window: `analyze` — from the earliest to the latest time any record carries (request start and
  end, load begin and end, unload); the dashboard — from its oldest kept request or residency to its clock.

Every percentile is nearest-rank (`Sketch.quantile`): p50 is the smallest value with half the samples at or
below it, a value that was observed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ietop.model.probes import is_probe
from ietop.model.records import EVICTION_REASONS, Load, Request, Unload
from ietop.model.sketch import Sketch
from ietop.model.snapshot import Interval, Snapshot
from ietop.model.timeline import build_timeline

Names = Callable[[str | None], str | None]
"""A recorded model → the name to show (`ietop.model.names.resolve` with the logs' aliases)."""
Key = tuple[str, str | None]
"""(engine, model)."""


def _as_is(model: str | None) -> str | None:
    return model


@dataclass(slots=True)
class _Acc:
    """One model's running figures."""

    requests: int = 0
    cold: int = 0
    cold_known: int = 0
    truncations: int = 0
    ttft: Sketch = field(default_factory=Sketch)
    decode: Sketch = field(default_factory=Sketch)
    prefill: Sketch = field(default_factory=Sketch)
    prompt: Sketch = field(default_factory=Sketch)
    output: Sketch = field(default_factory=Sketch)
    loads: int = 0
    loads_failed: int = 0
    load_s: Sketch = field(default_factory=Sketch)
    evicted_for: Counter[str | None] = field(default_factory=Counter)
    evicted_by_this: Counter[str | None] = field(default_factory=Counter)

    def merge(self, other: _Acc) -> None:
        """Fold another model's figures in (a blob and the name the logs later gave it are one model)."""
        for name in ("requests", "cold", "cold_known", "truncations", "loads", "loads_failed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("ttft", "decode", "prefill", "prompt", "output", "load_s"):
            getattr(self, name).merge(getattr(other, name))
        self.evicted_for.update(other.evicted_for)
        self.evicted_by_this.update(other.evicted_by_this)


@dataclass(frozen=True, slots=True)
class ModelRow:
    """One engine and model's figures (see the module doc for each); `as_dict` is the `models` JSON shape."""

    engine: str
    model: str | None
    requests: int
    cold_loads: int
    cold_load_share: float | None
    ttft_p50_s: float | None
    ttft_p90_s: float | None
    decode_tps_p50: float | None
    prefill_tps_p50: float | None
    prompt_tokens_p50: float | None
    prompt_tokens_p90: float | None
    output_tokens_p50: float | None
    output_tokens_p90: float | None
    loads: int
    loads_failed: int
    load_s_median: float | None
    evictions_suffered: int
    evicted_for: tuple[tuple[str | None, int], ...]
    """(model it made room for, times), most first."""
    evictions_caused: int
    evicted_by_this: tuple[tuple[str | None, int], ...]
    """(model evicted to make room for this one, times), most first."""
    truncations: int
    resident_s: float | None
    resident_share: float | None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.__slots__:
            value = getattr(self, name)
            if name in ("evicted_for", "evicted_by_this"):
                value = [{"model": m, "count": n} for m, n in value]
            out[name] = value
        return out


COLUMNS = tuple(ModelRow.__slots__)
"""The `models` keys, in order (the CSV/Parquet table's columns)."""


def _ranked(counts: Counter[str | None]) -> tuple[tuple[str | None, int], ...]:
    return tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0] or "")))


def _int_or_float(value: float | None) -> float | None:
    """A token count's percentile as the count it is (Sketch keeps floats)."""
    return None if value is None else int(value) if float(value).is_integer() else value


def prefill_rate(req: Request) -> float | None:
    """Prefill tokens per second where one line states both the tokens evaluated and their time (llama.cpp's
    `prompt eval time`): `prefill_tokens` and `ttft_s` cite the same line, and it is not the access line (the
    proxy cites its own record for every fact, and its TTFT includes queueing and loads)."""
    tokens, secs, ev = req.prefill_tokens, req.ttft_s, req.evidence
    if tokens is None or not secs or secs <= 0 or ev is None:
        return None
    line = ev.get("ttft_s")
    if line is None or line != ev.get("prefill_tokens") or line == req.ref:
        return None
    return tokens / secs


def stated(ts: datetime) -> float:
    """A log's time as epoch seconds; one without a zone is UTC, as the JSON document writes it."""
    return (ts if ts.tzinfo is not None else ts.replace(tzinfo=timezone.utc)).timestamp()


class PerModel:
    """Feed every record (`agg(kind, record)`, as a `Spool` hook), or requests, loads, unloads and residency
    intervals one by one; then `rows()`."""

    def __init__(self) -> None:
        self._acc: dict[Key, _Acc] = {}
        self._loads: list[Load] = []
        self._unloads: list[Unload] = []
        self._intervals: list[Interval] = []
        self.first_t = float("inf")
        self.last_t = float("-inf")

    def _of(self, engine: str, model: str | None) -> _Acc:
        acc = self._acc.get((engine, model))
        if acc is None:
            acc = self._acc[(engine, model)] = _Acc()
        return acc

    def _seen(self, t: float | None) -> None:
        if t is not None and t == t and abs(t) != float("inf"):
            self.first_t = min(self.first_t, t)
            self.last_t = max(self.last_t, t)

    def __call__(self, kind: str, record: Any) -> None:
        if kind == "request":
            self.add_request(record)
        elif kind == "load":
            self.add_load(record)
        elif kind == "unload":
            self.add_unload(record)

    def add_request(self, req: Request) -> None:
        if req.time is not None:
            # The time the line states, not the reader's running clock (which never goes back): analyze folds
            # health checks into `probes`, which keep the stated times, and the window must not depend on
            # --all-requests (tests/pipeline/test_bulk_differential.py). A folded probe keeps no start either.
            end = stated(req.time)
            self._seen(end)
            if req.latency_s is not None and (req.status is None or not is_probe(req.method, req.status,
                                                                                  req.inference)):
                self._seen(end - req.latency_s)
        if not req.inference:
            return
        acc = self._of(req.engine, req.model)
        acc.requests += 1
        if req.cold_load is not None:
            acc.cold_known += 1
            acc.cold += req.cold_load
        acc.truncations += req.truncated is True
        if req.ttft_s is not None:
            acc.ttft.add(req.ttft_s)
        if req.itl_s is not None and req.itl_s > 0:
            acc.decode.add(1.0 / req.itl_s)
        rate = prefill_rate(req)
        if rate is not None:
            acc.prefill.add(rate)
        if req.prompt_tokens is not None:
            acc.prompt.add(req.prompt_tokens)
        if req.output_tokens is not None:
            acc.output.add(req.output_tokens)

    def add_load(self, ld: Load) -> None:
        if ld.time is not None:
            self._seen(ld.t_begin)
            self._seen(ld.t_end)
        acc = self._of(ld.engine, ld.model)
        if ld.ok:
            acc.loads += 1
            if ld.duration_s is not None:
                acc.load_s.add(ld.duration_s)
            if ld.model is not None and ld.t_end is not None:
                # What the timeline reads, without the trigger request and evidence the record holds on to.
                self._loads.append(Load(None, ld.t_begin, ld.engine, ld.ref, model=ld.model, t_end=ld.t_end,
                                        duration_s=ld.duration_s, status=ld.status))
        elif ld.status == "failed":
            acc.loads_failed += 1

    def add_unload(self, un: Unload) -> None:
        if un.time is not None:
            self._seen(un.t)
        self._unloads.append(Unload(None, un.t, un.engine, un.reason, un.ref, model=un.model,
                                    for_model=un.for_model))
        if un.is_eviction:
            self._evicted(un.engine, un.model, un.for_model)

    def _evicted(self, engine: str, model: str | None, for_model: str | None) -> None:
        self._of(engine, model).evicted_for[for_model] += 1
        if for_model is not None:
            self._of(engine, for_model).evicted_by_this[model] += 1

    def add_interval(self, iv: Interval) -> None:
        """One residency (the dashboard's snapshot holds these, not the load and unload records): a completed
        load, and an eviction when one ended it."""
        self._seen(iv.start)
        self._seen(iv.end)
        acc = self._of(iv.engine, iv.model)
        acc.loads += 1
        if iv.load_s is not None:
            acc.load_s.add(iv.load_s)
        if iv.ended_by in EVICTION_REASONS:
            self._evicted(iv.engine, iv.model, iv.for_model)
        self._intervals.append(iv)

    def span(self) -> tuple[float, float] | None:
        """The earliest and latest times seen (None before any record with a time)."""
        return (self.first_t, self.last_t) if self.first_t <= self.last_t else None

    def rows(self, names: Names = _as_is, window: tuple[float, float] | None = None) -> list[ModelRow]:
        """Every model's row, most requests first. `names`: the name each recorded model is shown under (rows
        whose models share a name are merged); `window`: the span residency is measured in (default: `span()`)."""
        merged: dict[Key, _Acc] = {}
        for (engine, model), acc in self._acc.items():
            key = (engine, names(model))
            into = merged.get(key)
            if into is None:
                into = merged[key] = _Acc()
            into.merge(acc)
        for acc in merged.values():
            acc.evicted_for = _renamed(acc.evicted_for, names)
            acc.evicted_by_this = _renamed(acc.evicted_by_this, names)
        window = window or self.span()
        resident = self._residency(names, window)
        out = [self._row(engine, model, acc, resident, window)
               for (engine, model), acc in merged.items()]
        out.sort(key=lambda r: (-r.requests, r.engine, r.model or ""))
        return out

    def _residency(self, names: Names, window: tuple[float, float] | None) -> dict[Key, float]:
        if window is None:
            return {}
        w0, w1 = window
        intervals = [*self._intervals, *build_timeline(sorted(self._loads, key=_load_end),
                                                       sorted(self._unloads, key=lambda u: u.t), names)]
        out: dict[Key, float] = {}
        for iv in intervals:
            start, end = max(iv.start, w0), min(iv.end if iv.end is not None else w1, w1)
            key = (iv.engine, names(iv.model))
            out[key] = out.get(key, 0.0) + max(0.0, end - start)
        return out

    @staticmethod
    def _row(engine: str, model: str | None, acc: _Acc, resident: dict[Key, float],
             window: tuple[float, float] | None) -> ModelRow:
        length = None if window is None else window[1] - window[0]
        held = resident.get((engine, model))
        return ModelRow(
            engine=engine, model=model, requests=acc.requests, cold_loads=acc.cold,
            cold_load_share=acc.cold / acc.cold_known if acc.cold_known else None,
            ttft_p50_s=acc.ttft.quantile(0.5), ttft_p90_s=acc.ttft.quantile(0.9),
            decode_tps_p50=acc.decode.quantile(0.5), prefill_tps_p50=acc.prefill.quantile(0.5),
            prompt_tokens_p50=_int_or_float(acc.prompt.quantile(0.5)),
            prompt_tokens_p90=_int_or_float(acc.prompt.quantile(0.9)),
            output_tokens_p50=_int_or_float(acc.output.quantile(0.5)),
            output_tokens_p90=_int_or_float(acc.output.quantile(0.9)),
            loads=acc.loads, loads_failed=acc.loads_failed, load_s_median=acc.load_s.quantile(0.5),
            evictions_suffered=sum(acc.evicted_for.values()), evicted_for=_ranked(acc.evicted_for),
            evictions_caused=sum(acc.evicted_by_this.values()), evicted_by_this=_ranked(acc.evicted_by_this),
            truncations=acc.truncations, resident_s=None if held is None else round(held, 6),
            resident_share=held / length if held is not None and length else None,
        )


def _renamed(counts: Counter[str | None], names: Names) -> Counter[str | None]:
    out: Counter[str | None] = Counter()
    for model, n in counts.items():
        out[names(model)] += n
    return out


def _load_end(ld: Load) -> float:
    return ld.t_end if ld.t_end is not None else ld.t_begin


def model_rows(requests: Iterable[Request], loads: Iterable[Load] = (), unloads: Iterable[Unload] = (),
               names: Names = _as_is, window: tuple[float, float] | None = None) -> list[ModelRow]:
    """The rows of a list of records (what `PerModel` gives when fed them)."""
    agg = PerModel()
    for req in requests:
        agg.add_request(req)
    for ld in loads:
        agg.add_load(ld)
    for un in unloads:
        agg.add_unload(un)
    return agg.rows(names, window)


def snapshot_rows(snap: Snapshot) -> list[ModelRow]:
    """The dashboard's rows: its kept requests (the newest `LiveView.keep`) and its residency timeline, which
    holds completed loads and what ended them (a failed load, or an eviction of a model whose load it never
    saw, is not in it). The window runs from the oldest kept request or residency to the snapshot's clock."""
    agg = PerModel()
    for req in snap.requests:
        agg.add_request(req)
    for iv in snap.timeline:
        agg.add_interval(iv)
    span = agg.span()
    window = None if span is None else (span[0], max(span[1], snap.now))
    return agg.rows(snap.model_name, window)
