"""Row builders for the snapshot: residency, the residency timeline, events and latency windows.

Pure functions of store state and records; `now` is passed in.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from ietop.model.config import configured_context
from ietop.model.records import Load, Simple, Unload
from ietop.model.snapshot import EventRow, Interval, LatencyRow, ResidentRow
from ietop.model.store import Store

SPARK_BUCKETS = 24


def _short(model: str) -> str:
    return model.replace("\\", "/").rsplit("/", 1)[-1]


# -- timeline ----------------------------------------------------------------------------------
Names = Callable[[str | None], str | None]
"""Blob → model name where a line has told us (records finalized before the alias was learned)."""


def _as_is(model: str | None) -> str | None:
    return model


def build_timeline(loads: Sequence[Load], unloads: Sequence[Unload], names: Names = _as_is) -> tuple[Interval, ...]:
    """Residency intervals, oldest first: a completed load opens one; an unload of that model (or the
    next load of it, or a crash of its engine) closes it."""
    steps: list[tuple[float, int, Load | Unload]] = []
    for ld in loads:
        if ld.ok and ld.model is not None and ld.t_end is not None:
            steps.append((ld.t_end, 1, ld))
    for u in unloads:
        steps.append((u.t, 0, u))
    steps.sort(key=lambda s: (s[0], s[1]))
    open_: dict[str, tuple[Load, float]] = {}
    out: list[Interval] = []

    def close(key: str, t: float, by: str, for_model: str | None) -> None:
        load, start = open_.pop(key)
        out.append(Interval(load.engine, names(load.model) or "?", start, t, load.duration_s, by, names(for_model),
                            load.ref))

    for t, _order, item in steps:
        if isinstance(item, Load):
            key = _short(names(item.model) or "?")
            if key in open_:
                close(key, t, "reloaded", None)
            open_[key] = (item, t)
            continue
        victims = [k for k in open_ if item.model is not None and k == _short(names(item.model) or "")]
        if item.model is None:
            # An unload that names no model: certain only when one model of that engine is resident.
            same_engine = [k for k, (ld, _s) in open_.items() if ld.engine == item.engine]
            victims = same_engine if len(same_engine) == 1 or item.reason == "crashed" else []
        for key in victims:
            close(key, t, item.reason, item.for_model)
    for _key, (load, start) in open_.items():
        out.append(Interval(load.engine, names(load.model) or "?", start, None, load.duration_s, None, None, load.ref))
    out.sort(key=lambda i: i.start)
    return tuple(out)


# -- events ------------------------------------------------------------------------------------
def _secs(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}s"


def _load_row(ld: Load, names: Names) -> EventRow:
    model = names(ld.model) or "a model"
    if ld.ok:
        text = f"loaded {model} in {_secs(ld.duration_s)}"
        if ld.waiters:
            text += f" ({ld.waiters} request(s) waited)"
        kind = "load"
    elif ld.status == "failed":
        text, kind = f"load of {model} failed", "load_failed"
    else:
        text, kind = f"loading {model}", "load"
    t = ld.t_end if ld.t_end is not None else ld.t_begin
    # A row is placed by when it happened, and says so: a load that ended (loaded, failed) at its end, in the
    # log's own clock (its start's time moved on by the same seconds); one still going at its start.
    time = ld.time + timedelta(seconds=t - ld.t_begin) if ld.time is not None else None
    refs = (ld.ref,) if ld.done_ref is None else (ld.ref, ld.done_ref)
    return EventRow(t, time, kind, ld.engine, names(ld.model), text, refs)


_UNLOAD_TEXT = {
    "expired": ("expire", "{m} expired (keep-alive)"),
    "switched": ("switch", "{m} unloaded: switched to {f}"),
    "crashed": ("crash", "{m} lost: runner crashed"),
    "switch_failed": ("unload", "{m} dropped: the switch to {f} failed"),
}


def _unload_row(u: Unload, names: Names) -> EventRow:
    m = names(u.model) or "a model"
    for_model = names(u.for_model)
    if u.reason == "evicted":
        kind = "evict"
        text = f"evicted {m} to load {for_model}" if for_model else f"evicted {m}"
    elif u.reason in _UNLOAD_TEXT:
        kind, fmt = _UNLOAD_TEXT[u.reason]
        text = fmt.format(m=m, f=for_model or "another model")
    elif u.server_stopped:
        kind, text = "unload", f"{m} unloaded: its server stopped"
    else:
        kind, text = "unload", f"unloaded {m}"
    if u.vram_wait_s:
        text += f"; VRAM took {max(u.vram_wait_s):.1f}s to recover"
    return EventRow(u.t, u.time, kind, u.engine, names(u.model), text, tuple(u.evidence) or (u.ref,))


def _simple_row(s: Simple, engine_of: Callable[[int], str]) -> EventRow:
    d = s.data
    time = _parse_time(d.get("time"))
    # The record names no engine (analyze's JSON keeps to its contract): the log it came from does.
    engine = d.get("engine") or engine_of(s.ref.src)
    if s.kind == "truncation":
        prompt, kept = d.get("prompt"), d.get("new") or d.get("limit")
        text = f"prompt truncated: {prompt} → {kept} tokens" if prompt is not None else "prompt truncated"
        return EventRow(s.t or 0.0, time, "truncation", engine, d.get("model"), text, (s.ref,))
    message = str(d.get("message", ""))
    text = f"{d.get('kind', 'error')}: {message}"
    # Line 0 is no log line (a source that failed says so itself): no evidence to look up.
    return EventRow(s.t or 0.0, time, "error", engine, d.get("model"), text, (s.ref,) if s.ref.line else ())


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def event_rows(loads: Iterable[Load], unloads: Iterable[Unload], simple: Iterable[Simple],
               names: Names = _as_is, limit: int = 500,
               engine_of: Callable[[int], str] = lambda _src: "") -> tuple[EventRow, ...]:
    """The newest `limit` rows. Rows are built only for the records that can be among them: of each kind, those
    at or after the time of its `limit`-th newest (ties kept), as the full sort would pick them."""
    # Sorted as the rows would be (by time, newest first, stable: loads, then unloads, then the rest), then
    # only the first `limit` become rows.
    picked: list[tuple[float, Callable[[], EventRow]]] = []
    picked += [(_load_t(ld), partial(_load_row, ld, names)) for ld in _newest(loads, limit, _load_t)]
    picked += [(u.t, partial(_unload_row, u, names)) for u in _newest(unloads, limit, _unload_t)]
    picked += [(_simple_t(s), partial(_simple_row, s, engine_of)) for s in _newest(simple, limit, _simple_t)]
    picked.sort(key=lambda p: p[0], reverse=True)
    return tuple(make() for _t, make in picked[:limit])


def _load_t(ld: Load) -> float:
    return ld.t_end if ld.t_end is not None else ld.t_begin


def _unload_t(u: Unload) -> float:
    return u.t


def _simple_t(s: Simple) -> float:
    return s.t or 0.0


def _newest(records: Iterable[Any], limit: int, when: Callable[[Any], float]) -> list[Any]:
    """The records whose row time is at or after the `limit`-th newest one, in their order."""
    items = list(records)
    if len(items) <= limit:
        return items
    cut = sorted(map(when, items), reverse=True)[limit - 1]
    return [r for r in items if when(r) >= cut]


# -- residency ---------------------------------------------------------------------------------
_THIS_HOST = frozenset({"localhost", "::1", "0.0.0.0", "::"})
_WILDCARD = frozenset({"0.0.0.0", "::"})


def host_port(address: str | None, *, listen: bool = False) -> str | None:
    """`host:port` of a polled URL or of a listen address a log gave (`127.0.0.1:11434`, `[::]:11434`,
    `http://0.0.0.0:8000`). This host's other names read 127.0.0.1, so `--ollama localhost:11434` and `--vllm
    127.0.0.1:8000` are one host. A wildcard the engine *listens* on names no machine (the log may come from
    any): None; a URL polled at 0.0.0.0 reaches this one."""
    if not address:
        return None
    try:
        parts = urlsplit(address if "://" in address else f"//{address}")
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host or (listen and host in _WILDCARD):
        return None
    host = "127.0.0.1" if host in _THIS_HOST else host
    port = port or (443 if parts.scheme == "https" else 80)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def resident_rows(store: Store, loads: Sequence[Load], unloads: Sequence[Unload]) -> tuple[ResidentRow, ...]:
    ctx_claim = configured_context(store.settings.configured)
    rows: list[ResidentRow] = []

    # Each model's last good load, load count and evictions, in one pass over the records (a lookup per
    # resident model then; comparing every record with every model cost a snapshot ~40 ms on a full view).
    canon = store.loads.name
    last_ok: dict[str, Load] = {}
    n_ok: dict[str, int] = {}
    n_evicted: dict[str, int] = {}
    for ld in loads:
        if ld.model and ld.ok:
            key = _short(canon(ld.model))
            last_ok[key] = ld
            n_ok[key] = n_ok.get(key, 0) + 1
    for u in unloads:
        if u.model and u.is_eviction:
            key = _short(canon(u.model))
            n_evicted[key] = n_evicted.get(key, 0) + 1

    def history(model: str) -> tuple[Load | None, int, int]:
        key = _short(canon(model)) if model else None
        if key is None:
            return None, 0, 0
        return last_ok.get(key), n_ok.get(key, 0), n_evicted.get(key, 0)

    def listen(src: int | None) -> str | None:
        """Where the server that wrote log `src` listens (its own start-up line), when the store kept it."""
        if src is None:
            return None
        said = store.vllm_startup(src).get("listen")
        ref = store.settings.effective_ref.get("listen")
        if not isinstance(said, str) and ref is not None and ref.src == src:
            said = store.settings.effective.get("listen")  # one value for all logs: only the log that said it
        return host_port(said if isinstance(said, str) else None, listen=True)

    def per_slot(ld: Load | None) -> int | None:
        if ld is None or ld.ctx is None:
            return None
        return ld.ctx // ld.parallel if ld.parallel else ld.ctx

    seen: set[str] = set()
    # /api/ps says what an Ollama server holds now; its log adds the history. Once a server has answered, a
    # model its log loaded is not shown from the log: at INFO Ollama logs no unload when a keep-alive expires,
    # so such a row would outlive the model. The last answer of a server that is down now vouches for nothing.
    ps_answered = bool(store.residency)
    for endpoint, residency in store.residency.items():
        server = store.engines.get(endpoint)
        if server is not None and server.state == "down":
            continue
        engine = server.engine if server is not None else "ollama"
        host = host_port(endpoint)
        for m in residency.models:
            last, n, ev = history(m.name)
            expires = m.expires_at.timestamp() if m.expires_at is not None else None
            rows.append(ResidentRow(engine, m.name, "api/ps", m.size, m.size_vram, m.context_length or per_slot(last),
                                    ctx_claim, last.parallel if last else None,
                                    last.t_end if last else None, expires, n, ev,
                                    last.duration_s if last else None, last.ref if last else None, host))
            seen.add(_short(m.name))
    for model, since in store.loads.resident.items():
        if _short(model) in seen:
            continue
        last, n, ev = history(model)
        engine = last.engine if last else "ollama"
        if engine == "ollama" and ps_answered:
            continue
        seen.add(_short(model))
        size, vram, expires = store.loads.runners.get(store.loads.name(model), (None, None, None))
        ctx = per_slot(last)
        claim = ctx_claim
        if engine == "vllm":
            size, vllm_ctx, claim = vllm_figures(store.vllm_startup(last.ref.src if last else None))
            ctx = ctx or vllm_ctx
        # Named as the Events rows name it (a blob by its alias, a path by its last element).
        rows.append(ResidentRow(engine, store.loads.name(model), "log", size, vram, expires_at=expires,
                                ctx=ctx,
                                ctx_configured=claim, parallel=last.parallel if last else None,
                                loaded_since=since, loads=n, evictions=ev,
                                last_load_s=last.duration_s if last else None, ref=last.ref if last else None,
                                host=listen(last.ref.src if last else None)))
    for src, model, state in store.mlx_processes():
        if not model or _short(model) in seen or state in ("dead", "down"):
            continue
        seen.add(_short(model))
        name = model if model != "default" else f"default model ({_short(store.sources[src].path)})"
        rows.append(ResidentRow("mlx", name, "process", host=listen(src)))
    for st in store.engines.values():
        if st.engine == "vllm" and st.state == "up" and st.models:
            for model in st.models:
                if _short(model) not in seen:
                    seen.add(_short(model))
                    size, ctx, claim = vllm_figures(store.vllm_startup())
                    rows.append(ResidentRow("vllm", model, "models", size, ctx=st.context or ctx, ctx_configured=claim,
                                            loaded_since=st.since, host=host_port(st.endpoint)))
    return tuple(rows)


_VLLM_PARTS = ("model_memory_gib", "kv_available_gib", "cudagraph_gib")
"""What a vLLM server holds once started, as its log says: the weights (`Model loading took X GiB`), the KV
cache it allocated (`Available KV cache memory`, or the CPU backend's explicit size) and CUDA graphs."""


def vllm_figures(facts: Mapping[str, float | str]) -> tuple[int | None, int | None, int | None]:
    """From one vLLM server's start-up facts: the bytes it holds (None when no line said), the context in
    effect (`Maximum concurrency for N tokens per request`) and the configured max_model_len (the claim)."""
    parts = [v for key in _VLLM_PARTS if isinstance(v := facts.get(key), (int, float))]
    ctx, claim = facts.get("max_concurrency_tokens"), facts.get("max_model_len")
    return (round(sum(parts) * (1 << 30)) if parts else None, ctx if isinstance(ctx, int) else None,
            claim if isinstance(claim, int) else None)


# -- latency -----------------------------------------------------------------------------------
def nearest_rank(sorted_values: Sequence[float], q: float) -> float | None:
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, int(-(-q * len(sorted_values) // 1)) - 1))
    return sorted_values[k]


def _spark(points: Sequence[tuple[float, float]], start: float, window_s: float) -> tuple[float, ...]:
    buckets: list[list[float]] = [[] for _ in range(SPARK_BUCKETS)]
    width = window_s / SPARK_BUCKETS
    for t, v in points:
        i = min(SPARK_BUCKETS - 1, max(0, int((t - start) / width)))
        buckets[i].append(v)
    return tuple(sorted(b)[len(b) // 2] if b else 0.0 for b in buckets)


Sample = tuple[float, float | None, float | None, float | None]
"""(t_end, ttft, itl, e2e) of an inference request."""


def sample_time(sample: Sample) -> float:
    return sample[0]


EARLIER_LOOK = 1000
"""Samples before the window looked at for a figure (bounded: a snapshot is taken several times a second)."""


def latency_rows(samples: Sequence[Sample], store: Store, now: float, window_s: float) -> tuple[LatencyRow, ...]:
    """`samples` sorted by time (the order within the window changes no figure: percentiles and spark buckets
    sort their values): the window is found by bisection, not a pass over every sample kept."""
    start = now - window_s
    first = bisect_left(samples, start, key=sample_time)
    inside = samples[first : bisect_right(samples, now, key=sample_time)]
    series: list[list[tuple[float, float]]] = [
        [(s[0], v) for s in inside if (v := s[i]) is not None] for i in (1, 2, 3)]
    rows: list[LatencyRow] = []
    for i, name, points, attr in zip((1, 2, 3), ("TTFT", "ITL", "E2E"), series, ("ttft", "itl", "e2e"), strict=True):
        if points:
            ordered = sorted(v for _t, v in points)
            rows.append(LatencyRow(name, len(points), nearest_rank(ordered, 0.5), nearest_rank(ordered, 0.9),
                                   nearest_rank(ordered, 0.99), _spark(points, start, window_s), "requests"))
            continue
        row = _metrics_row(store, name, attr, now, window_s)
        if row.source == "none" and any(s[i] is not None for s in samples[max(0, first - EARLIER_LOOK):first]):
            row = LatencyRow(name, 0, None, None, None, (), "earlier")
        rows.append(row)
    return tuple(rows)


def _metrics_row(store: Store, name: str, attr: str, now: float, window_s: float) -> LatencyRow:
    """vLLM's own histograms over the window, when no per-request figure is known."""
    at = datetime.fromtimestamp(now, tz=timezone.utc)
    scraped = False
    for endpoint in store.metrics.endpoints():
        window = store.metrics.window(endpoint, at, window_s)
        scraped = scraped or window is not None
        stats = getattr(window.total.histograms, attr) if window is not None else None
        if stats is not None and stats.count:
            return LatencyRow(name, int(stats.count), stats.p50, stats.p90, stats.p99, (), "metrics")
    # Scrapes that span the window and count no request: the histograms say none finished, not that there
    # are no timings to be had.
    return LatencyRow(name, 0, None, None, None, (), "metrics" if scraped else "none")
