"""The exporter's metric families, built from the store, the export view and the last hardware sample.

Names and labels are the README's table (DESIGN "Metrics for fleets"); every family is present, even empty, so a
dashboard's queries evaluate on a fresh exporter. Label values are log text (model names): prometheus-client
escapes them in the exposition; nothing here is interpreted.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from urllib.parse import urlsplit

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from ietop.export.view import ExportView, Hist, RunCounts
from ietop.model.config import configured_context
from ietop.model.hints import HintContext
from ietop.model.store import Store
from ietop.model.timeline import resident_rows
from ietop.pipeline.hardware import Hardware

HINT_WINDOW_S = 900.0
"""A hint is active while its evidence is in the last 15 minutes of what was read."""
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]", "*"})
SETTINGS = (
    # (setting label, configured key, effective key)
    ("context_length", None, "ctx_per_slot"),
    ("num_parallel", "OLLAMA_NUM_PARALLEL", "parallel"),
    ("kv_cache_type", "OLLAMA_KV_CACHE_TYPE", "kv_cache_type"),
)


def host_port(url: str) -> str:
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return url
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Instances:
    """Each log source's and polled endpoint's `instance`: the engine's own address."""

    def __init__(self, store: Store, view: ExportView) -> None:
        self.store = store
        self.view = view
        self.polled = {host_port(endpoint): st.engine for endpoint, st in store.engines.items()}

    def of_src(self, src: int) -> str:
        listen = self.view.listen.get(src)
        if listen and "://" in listen:
            listen = host_port(listen)  # vLLM states a URL
        if listen:
            host, _, port = listen.rpartition(":")
            if host not in WILDCARD_HOSTS:
                return listen
            # `Listening on [::]:11434`: the polled endpoint on that port is this server, seen from here.
            same = [hp for hp in self.polled if hp.rpartition(":")[2] == port]
            return same[0] if len(same) == 1 else f"localhost:{port}"
        path = self.store.sources[src].path if 0 <= src < len(self.store.sources) else "?"
        return "log:" + os.path.basename(path)

    def engine_of(self, src: int) -> str:
        return str(self.store.sources[src].engine) if 0 <= src < len(self.store.sources) else ""


def _merge(runs: dict[int, RunCounts],
           extra: dict[int, RunCounts]) -> Iterator[tuple[int, RunCounts, RunCounts | None]]:
    for src, run in runs.items():
        yield src, run, extra.get(src)


def _hist_buckets(h: Hist) -> list[tuple[str, float]]:
    out, running = [], 0
    for bound, n in zip(h.bounds, h.counts, strict=True):
        running += n
        out.append((str(bound), float(running)))
    out.append(("+Inf", float(h.n)))
    return out


def families(store: Store, view: ExportView, hardware: Hardware | None, counters: bool = True) -> list[Metric]:
    """Every metric family, once per scrape, on the loop that owns the store. `counters` False: the logs are still
    being read back, and the counters and histograms are left out (present only once they hold the run's total)."""
    inst = Instances(store, view)
    name = store.loads.name

    def model(m: str) -> str:
        return name(m) if m else ""

    extra, _pending = view.pending()
    c = {k: CounterMetricFamily(f"ietop_{k}", doc, labels=labels) for k, doc, labels in (
        ("model_loads", "Model loads since the engine's current run began",
         ("engine", "instance", "model", "outcome")),
        ("model_unloads", "Model unloads since the engine's current run began",
         ("engine", "instance", "model", "reason")),
        ("evictions", "Unloads that made room for another model", ("engine", "instance", "model", "for_model")),
        ("requests", "Inference requests", ("engine", "instance", "model", "status")),
        ("cold_load_requests", "Inference requests that waited for a model load", ("engine", "instance", "model")),
        ("prompt_truncations", "Prompts cut to fit the context", ("engine", "instance", "model")),
        ("errors", "Errors the logs report", ("engine", "instance", "kind")),
    )}
    h = {k: HistogramMetricFamily(f"ietop_{metric}", doc, labels=("engine", "instance", "model"), unit=unit)
         for k, metric, doc, unit in (
        ("load_seconds", "model_load_seconds", "Duration of completed model loads", ""),
        ("prompt_tokens", "request_prompt_tokens", "Prompt tokens of inference requests (known values)", ""),
        ("output_tokens", "request_output_tokens", "Output tokens of inference requests (known values)", ""),
        ("duration", "request_duration_seconds", "End-to-end latency of successful inference requests", ""),
        ("ttft", "time_to_first_token_seconds", "Time to first token (known values)", ""),
        ("itl", "inter_token_latency_seconds", "Inter-token latency (known values)", ""),
    )}
    for src, run, more in _merge(view.runs, extra) if counters else ():
        engine, instance = inst.engine_of(src), inst.of_src(src)
        # Summed after naming: a blob and the name a later line gave it are one model.
        for key, family in (("loads", "model_loads"), ("unloads", "model_unloads"), ("evictions", "evictions"),
                            ("requests", "requests"), ("cold", "cold_load_requests"),
                            ("truncations", "prompt_truncations"), ("errors", "errors")):
            totals: dict[tuple[str, ...], int] = {}
            for part in (run, more):
                for raw, n in (getattr(part, key).items() if part is not None else ()):
                    if key == "errors":
                        labels: tuple[str, ...] = (raw,)
                    elif isinstance(raw, tuple):
                        labels = (model(raw[0]), model(raw[1]) if key == "evictions" else raw[1])
                    else:
                        labels = (model(raw),)
                    totals[labels] = totals.get(labels, 0) + n
            for labels, n in sorted(totals.items()):
                c[family].add_metric((engine, instance, *labels), n, created=run.start)
        hists: dict[tuple[str, str], Hist] = {}
        for part in (run, more):
            for (metric, m), hist in (part.hists.items() if part is not None else ()):
                hkey = (metric, model(m))
                hists[hkey] = _sum_hist(hists.get(hkey), hist)
        for (metric, m), hist in sorted(hists.items()):
            h[metric].add_metric((engine, instance, m), _hist_buckets(hist), hist.total)
    out: list[Metric] = [*c.values(), *h.values()] if counters else []
    out.extend(_gauges(store, view, inst, hardware))
    return out


def _sum_hist(a: Hist | None, b: Hist) -> Hist:
    if a is None:
        return b
    return Hist(a.bounds, [x + y for x, y in zip(a.counts, b.counts, strict=True)], a.total + b.total, a.n + b.n)


def _gauges(store: Store, view: ExportView, inst: Instances, hardware: Hardware | None) -> Iterable[Metric]:
    up = GaugeMetricFamily("ietop_engine_up", "1 when the engine answers (or its log is read), else 0",
                           labels=("engine", "instance"))
    seen: set[tuple[str, str]] = set()
    for endpoint, st in store.engines.items():
        key = (st.engine, host_port(endpoint))
        seen.add(key)
        up.add_metric(key, 1.0 if st.state == "up" else 0.0)
    for src, info in enumerate(store.sources):
        key = (info.engine, inst.of_src(src))
        if info.engine != "proxy" and key not in seen:
            seen.add(key)
            up.add_metric(key, 0.0 if info.failed else 1.0)
    resident = GaugeMetricFamily("ietop_model_resident", "1 per model resident in memory",
                                 labels=("engine", "instance", "model"))
    size = GaugeMetricFamily("ietop_model_size_bytes", "A resident model's size in memory",
                             labels=("engine", "instance", "model"), unit="")
    pending_loads, pending_unloads = store.loads.pending()
    for row in resident_rows(store, [*view.loads, *pending_loads], [*view.unloads, *pending_unloads]):
        host = getattr(row, "host", None)
        instance = host if host else (inst.of_src(row.ref.src) if row.ref is not None else "")
        resident.add_metric((row.engine, instance, row.model), 1.0)
        if row.size_bytes:
            size.add_metric((row.engine, instance, row.model), float(row.size_bytes))
    yield from (up, resident, size)
    yield _mismatches(store, inst)
    yield _hints(store, view, inst)
    waiting = GaugeMetricFamily("ietop_requests_waiting", "Requests waiting for a slot, from the engine's /metrics",
                                labels=("engine", "instance"))
    now = datetime.now(timezone.utc)
    for endpoint in store.metrics.endpoints():
        window = store.metrics.window(endpoint, now, 60.0)
        if window is not None and window.total.waiting is not None:
            waiting.add_metric(("vllm", host_port(endpoint)), window.total.waiting)
    yield waiting
    yield from _hardware(hardware)
    lines = CounterMetricFamily("ietop_log_lines", "Lines read from each log source", labels=("source",))
    unparsed = CounterMetricFamily("ietop_log_unparsed_lines", "Lines no parser recognised", labels=("source",))
    for info in store.sources:
        lines.add_metric((info.path,), info.lines)
        unparsed.add_metric((info.path,), info.unparsed_lines)
    yield from (lines, unparsed)


def _mismatches(store: Store, inst: Instances) -> Metric:
    family = GaugeMetricFamily("ietop_setting_mismatch", "1 when a configured setting is not the one in effect",
                               labels=("engine", "instance", "setting"))
    cfg = store.settings
    for setting, configured_key, effective_key in SETTINGS:
        claim = configured_context(cfg.configured) if configured_key is None else cfg.configured.get(configured_key)
        effective = cfg.effective.get(effective_key)
        if claim in (None, "") or effective in (None, ""):
            continue
        if str(claim).strip().lower() != str(effective).strip().lower():
            ref = cfg.effective_ref.get(effective_key)
            src = ref.src if ref is not None else -1
            family.add_metric((inst.engine_of(src), inst.of_src(src) if src >= 0 else "", setting), 1.0)
    return family


def _hints(store: Store, view: ExportView, inst: Instances) -> Metric:
    family = GaugeMetricFamily("ietop_hint_active", "1 per diagnostic hint whose evidence is in the last 15 minutes",
                               labels=("id", "severity", "engine", "instance"))
    cfg = store.settings
    ctx = HintContext(cfg.configured, cfg.configured_ref, cfg.effective, cfg.effective_ref,
                      aliases=dict(store.loads.aliases))
    loads, unloads = store.loads.pending()
    seen: set[tuple[str, str, str, str]] = set()
    for hint in view.hints.evaluate(ctx, store.now - HINT_WINDOW_S, extra_loads=loads, extra_unloads=unloads):
        ref = hint.evidence[0] if hint.evidence else None
        key = (hint.id, hint.severity, inst.engine_of(ref.src) if ref else "", inst.of_src(ref.src) if ref else "")
        if key not in seen:
            seen.add(key)
            family.add_metric(key, 1.0)
    return family


def _hardware(hw: Hardware | None) -> Iterable[Metric]:
    total = GaugeMetricFamily("ietop_gpu_memory_total_bytes", "GPU memory (NVML)", labels=("gpu", "name"))
    used = GaugeMetricFamily("ietop_gpu_memory_used_bytes", "GPU memory in use (NVML)", labels=("gpu", "name"))
    host_total = GaugeMetricFamily("ietop_host_memory_total_bytes", "Host (or unified) memory")
    host_used = GaugeMetricFamily("ietop_host_memory_used_bytes", "Host memory in use (total minus available)")
    if hw is not None:
        for g in hw.gpus:
            if g.memory_total is not None:
                total.add_metric((str(g.index), g.name), float(g.memory_total))
            if g.memory_used is not None:
                used.add_metric((str(g.index), g.name), float(g.memory_used))
        if hw.host is not None:
            host_total.add_metric((), float(hw.host.total))
            host_used.add_metric((), float(hw.host.used))
    return (total, used, host_total, host_used)
