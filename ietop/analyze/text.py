"""The terminal report of `ietop analyze`: summary, slowest requests, load/eviction timeline,
truncations, errors, configured-vs-effective settings and latency percentiles.

Every string that came from a log goes through `_lit`: wrapped in `rich.text.Text`, never passed as markup,
with the characters `parsers.text.inert` forbids (terminal controls, bidi reordering, invisible text) shown as
visible stand-ins. Log lines are untrusted (a prompt can contain `[bold]`, escape sequences or U+202E) and must
print literally, in the order they were written.
"""

from __future__ import annotations

import os
from itertools import islice
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ietop.analyze.report import Analysis
from ietop.model.durations import secs
from ietop.model.names import resolve
from ietop.model.per_model import ModelRow
from parsers.text.inert import visible

MAX_ROWS = 25


def _lit(text: str, style: str = "") -> Text:
    """Literal, inert text: Rich renders a Text as given (no markup) but would pass controls to the terminal."""
    return Text(visible(text), style=style)


def _num(value: float) -> str:
    """A number as the log wrote it: `11.12`, not `11.120`; `512`, not `512.0` (the exact value is in --json)."""
    if value.is_integer() and abs(value) < 1e15:
        return f"{value:.0f}"
    # Six significant digits keep every figure an engine logs (`14.9888`) without a float's binary noise;
    # past a million they would turn to an exponent.
    return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.0f}"


def _t(value: Any) -> Text:
    """Literal text for a cell (None shows as an em dash; a whole number without decimals)."""
    if value is None:
        return Text("—", style="dim")
    if isinstance(value, float):
        return Text(_num(value))
    return _lit(str(value))


PROMPT_CHARS = 200
"""A prompt shows as one line of at most this many characters (Rich elides it further to the terminal's width);
the whole text is in --json / --csv / --parquet."""


def _one_line(text: str, limit: int = PROMPT_CHARS) -> str:
    """`text` inert, on one line (newline as ⏎, tab as a space), cut to `limit` characters with "…"."""
    # Only what can show is made visible: a prompt can be megabytes. A stand-in is never shorter than its
    # character, so limit + 1 characters are enough to know whether the text was cut.
    shown = visible(text[:limit + 1]).replace("\n", "⏎").replace("\t", " ")
    return shown if len(shown) <= limit else shown[:limit - 1] + "…"


def _dur(seconds: float | None) -> Text:
    """A duration as the dashboard shows it: `444ms`, `12.4s`, `1h24m` (the exact seconds are in --json)."""
    return Text("—", style="dim") if seconds is None else Text(secs(seconds))


def _short_time(iso: str | None) -> str | None:
    """`2025-06-10T22:46:49+00:00` → `06-10 22:46:49` (the full time is in --json)."""
    return f"{iso[5:10]} {iso[11:19]}" if iso and len(iso) >= 19 else iso


_SOURCE_INDEX: dict[str, int] = {}


def _src(d: dict[str, Any]) -> Text:
    """`#2:118` = line 118 of source 2 (numbered in the summary); just the line with one source."""
    s = d.get("source") or {}
    n = _SOURCE_INDEX.get(str(s.get("path")))
    prefix = f"#{n}:" if n is not None and len(_SOURCE_INDEX) > 1 else ""
    return _lit(f'{prefix}{s.get("line", "?")}', style="dim")


def _table(title: str, columns: list[str]) -> Table:
    table = Table(title=title, title_justify="left", expand=False, show_edge=False, header_style="bold")
    for col in columns:
        # A model or path can be long (MLX names models by their directory): it folds onto a second line
        # rather than squeezing the short columns (a status `2…`).
        wraps = col in ("detail", "message", "event", "hint", "model", "path", "evicted for", "evicted")
        table.add_column(col, no_wrap=not wraps, overflow="fold" if wraps else "ellipsis",
                         min_width=min(len(col), 10))
    return table


def render(an: Analysis) -> RenderableType:
    """Build the whole report as one renderable."""
    _SOURCE_INDEX.clear()
    _SOURCE_INDEX.update({p: i for i, p in enumerate(an.source_paths, 1)})
    parts: list[RenderableType] = [_summary(an), _hints(an)]
    slowest = sorted(an.digest.slowest, reverse=True)
    if slowest:
        t = _table("Slowest inference requests", ["time", "st", "latency", "model", "path", "prompt", "load", "line"])
        for _lat, _seq, req in slowest:
            r = req.as_dict(an.source_paths)
            prompt = r["prompt_tokens"]
            shown = None if prompt is None else f"{prompt} (cut)" if r["truncated"] else str(prompt)
            t.add_row(_t((r["time"] or "")[11:19] or None), _t(r["status"]), _dur(r["latency_s"]),
                      _t(resolve(r["model"], an.spool.aliases)), _t(r["path"]), _t(shown),
                      _dur(r["load_s"] if r["cold_load"] else None), _src(r))
        parts.append(t)
    parts.append(_models(an.model_rows()))
    parts.append(_timeline(an))
    _maybe(parts, an, "truncation", "Truncations (prompt longer than the context)",
           ["time", "limit", "prompt", "keep", "new", "line"], ["time", "limit", "prompt", "keep", "new"])
    _maybe(parts, an, "error", "Errors", ["time", "kind", "message", "line"], ["time", "kind", "message"])
    if an.include_prompts:
        parts.append(_prompts(an))
    parts.append(_settings(an))
    parts.append(_latency(an))
    return Group(*parts)


def _summary(an: Analysis) -> RenderableType:
    d = an.digest
    c = an.spool.counts
    lines = [Text.assemble(("Sources ", "bold"))]
    for i, s in enumerate(an.sources(), 1):
        name = os.path.basename(s["path"])
        lines.append(_lit(f'  #{i} {name}: {s["engine"]}, {s["format"]}, version {s["version"] or "unknown"}, '
                          f'{s["lines"]} lines, {s["unparsed_lines"]} unparsed'))
    inference = an.store.counts.get("inference_requests", 0)
    lines.append(_lit(f'Window: {d.first_time or "?"} → {d.last_time or "?"}'))
    cold = str(d.cold) if not d.cold_unknown else (
        f"{d.cold}, unknown for {d.cold_unknown} (no switch is logged at INFO)")
    # Every access line, the health checks counted instead of listed (`probes`) included.
    total = an.store.counts.get("requests", c["request"])
    lines.append(_lit(f'Requests: {total} ({inference} inference), '
                      f'cold loads waited on: {cold}, truncated: {d.truncated}'))
    if an.probes.rows:
        # Busiest first, then by path: the rows come from polars' group_by, whose order varies run to run.
        top = sorted(an.probes.rows.items(), key=lambda kv: (-kv[1].count, kv[0][2], kv[0][1], kv[0][3], kv[0][0]))[:4]
        lines.append(_lit(f"Health checks and listings: {an.probes.total} (counted, not listed: "
                          + ", ".join(f"{m} {p} {st}×{r.count}" for (_s, m, p, st), r in top)
                          + (", …" if len(an.probes.rows) > 4 else "") + ")"))
    lines.append(_lit(f'Loads: {c["load"]}, unloads/evictions: {c["unload"]}, '
                      f'truncations: {c["truncation"]}, errors: {c["error"]}'))
    if d.statuses:
        # 0: no answer came (the proxy saw the upstream refuse, time out or reset); said in words, last.
        shown = [f"{k}×{v}" for k, v in sorted(d.statuses.items()) if k] + (
            [f"no answer×{d.statuses[0]}"] if d.statuses.get(0) else [])
        lines.append(_lit("Status: " + ", ".join(shown)))
    if an.store.counts.get("prompt_text_lines"):
        said = "shown below, --include-prompts" if an.include_prompts else "omitted; --include-prompts to show"
        lines.append(_lit(f'{an.store.counts["prompt_text_lines"]} lines carry prompt text ({said})',
                          style="yellow"))
    return Panel(Group(*lines), title="ietop analyze", title_align="left")


_SEVERITY_STYLE = {"crit": "bold red", "warn": "yellow", "info": "cyan"}


def _hints(an: Analysis) -> RenderableType:
    """Hypotheses with evidence, most severe first (ietop.model.hints)."""
    if not an.hints:
        return Text("No diagnostic hint fired.", style="dim")
    t = _table("Hints (hypotheses to verify, with the lines that raised them)", ["severity", "hint", "detail", "line"])
    for hint in an.hints:
        d = hint.as_dict(an.source_paths)
        first = {"source": d["evidence"][0]} if d["evidence"] else {}
        t.add_row(_lit(hint.severity, style=_SEVERITY_STYLE.get(hint.severity, "")), _lit(hint.id),
                  _lit(f"{hint.detail}. Next: {hint.next}"), _src(first) if first else _t(None))
    return t


def _pair(a: Text, b: Text) -> Text:
    """`p50/p90` in one cell (one value when both are the same, or unknown)."""
    return a if b.plain == a.plain else Text.assemble(a, "/", b)


def _rate(value: float | None) -> Text:
    return Text("—", style="dim") if value is None else Text(f"{value:.0f}" if value >= 10 else f"{value:.1f}")


def _share(value: float | None) -> Text:
    return Text("—", style="dim") if value is None else Text(f"{value:.0%}")


def _who(pairs: tuple[tuple[str | None, int], ...]) -> str:
    return ", ".join(f"{m or '?'}×{n}" if n > 1 else (m or "?") for m, n in pairs)


def _models(rows: list[ModelRow]) -> RenderableType:
    """Per engine and model (`--json` `models`), as two tables that fit 80 columns: what its requests took, then
    what its loads cost. The engine prefixes the model only when the logs hold several."""
    if not rows:
        return Text("No inference requests or model loads to break down per model.", style="dim")
    several = len({r.engine for r in rows}) > 1
    shown = rows[:MAX_ROWS]

    def name(row: ModelRow) -> Text:
        return _lit(f"{row.engine}:{row.model or '?'}" if several else row.model or "?")

    served = _table("Models: requests (p50/p90; decode and prefill tokens/s: median per request)",
                    ["model", "req", "cold", "TTFT", "dec t/s", "pre t/s", "prompt", "output"])
    for r in shown:
        served.add_row(name(r), _t(r.requests), _share(r.cold_load_share),
                       _pair(_dur(r.ttft_p50_s), _dur(r.ttft_p90_s)), _rate(r.decode_tps_p50),
                       _rate(r.prefill_tps_p50), _pair(_t(r.prompt_tokens_p50), _t(r.prompt_tokens_p90)),
                       _pair(_t(r.output_tokens_p50), _t(r.output_tokens_p90)))
    held = _table("Models: loads, evictions, truncations, residency (share of the window)",
                  ["model", "loads", "median", "evicted for", "evicted", "cut", "resident"])
    for r in shown:
        loads = Text(str(r.loads))
        if r.loads_failed:
            loads.append(f" +{r.loads_failed} failed", style="red")
        held.add_row(name(r), loads, _dur(r.load_s_median),
                     _lit(f"{r.evictions_suffered}" + (f": {_who(r.evicted_for)}" if r.evicted_for else "")),
                     _lit(f"{r.evictions_caused}" + (f": {_who(r.evicted_by_this)}" if r.evicted_by_this else "")),
                     _t(r.truncations), _share(r.resident_share))
    if len(rows) > MAX_ROWS:
        held.caption = f"{len(rows) - MAX_ROWS} more models in --json / --csv"
    return Group(served, held)


def _timeline(an: Analysis) -> RenderableType:
    events: list[tuple[str, Text, Text, Text]] = []
    for load in islice(an.spool.records("load"), 500):
        trig = load["trigger_request"]
        what = f'load {load["model"] or "?"} [{load["status"]}]'
        bits = [f'{load["duration_s"]} s' if load["duration_s"] is not None else ""]
        bits.append(f'ctx {load["ctx"]}' if load["ctx"] else "")
        bits.append(f'parallel {load["parallel"]}' if load["parallel"] else "")
        bits.append(f'for {trig["path"]} at {_short_time(trig["time"])}' if trig else "")
        detail = ", ".join(b for b in bits if b)
        events.append((load["time"] or "", _lit(what), _lit(detail), _src(load)))
    for un in islice(an.spool.records("unload"), 500):
        what_text = f'unload {un["model"] or "?"} ({un["reason"]})'
        detail = f'to load {un["for_model"]}' if un["for_model"] else ""
        events.append((un["time"] or "", _lit(what_text), _lit(detail), _src(un)))
    t = _table("Loads and evictions", ["time", "event", "detail", "line"])
    events.sort(key=lambda e: e[0])
    for time, what_cell, detail_cell, src in events[:MAX_ROWS]:
        t.add_row(_t(_short_time(time) or None), what_cell, detail_cell, src)
    if len(events) > MAX_ROWS:
        t.caption = f"{len(events) - MAX_ROWS} more in --json / --csv"
    if not events:
        return Text("No model loads or unloads in these logs.", style="dim")
    return t


def _maybe(parts: list[RenderableType], an: Analysis, kind: str, title: str, cols: list[str],
           keys: list[str]) -> None:
    rows = list(islice(an.spool.records(kind), MAX_ROWS))
    if not rows:
        return
    t = _table(title, cols)
    for r in rows:
        t.add_row(*[_t(_short_time(r.get(k)) if k == "time" else r.get(k)) for k in keys], _src(r))
    if an.spool.counts.get(kind, 0) > MAX_ROWS:
        t.caption = f"{an.spool.counts[kind] - MAX_ROWS} more in --json / --csv"
    parts.append(t)


def _prompts(an: Analysis) -> RenderableType:
    """The prompt text the logs carry (asked for with --include-prompts), one line each, in log order."""
    rows = list(islice(an.spool.records("prompt"), MAX_ROWS))
    if not rows:
        return Text("No prompt text in these logs (engines log it at DEBUG, vLLM with request logging).",
                    style="dim")
    engines = {s.path: s.engine for s in an.store.sources}
    # The prompt alone gives way to the terminal's width (ratio, ellipsis): the other columns keep theirs.
    t = Table(title="Prompts (--include-prompts)", title_justify="left", expand=True, show_edge=False,
              header_style="bold")
    for col in ("time", "engine", "prompt", "line"):
        wide = col == "prompt"
        t.add_column(col, no_wrap=True, overflow="ellipsis", ratio=1 if wide else None, min_width=10 if wide else None)
    for r in rows:
        t.add_row(_t(_short_time(r.get("time"))), _t(engines.get(str((r.get("source") or {}).get("path")))),
                  Text(_one_line(str(r.get("text", "")))), _src(r))
    if an.spool.counts.get("prompt", 0) > MAX_ROWS:
        t.caption = f"{an.spool.counts['prompt'] - MAX_ROWS} more in --json / --csv"
    return t


def _setting(key: str, value: Any) -> Text:
    """A setting's value in the units its name says (`_s` seconds, `_gib` GiB, concurrency a multiple)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _t(value)
    if key.endswith("_s"):
        return _dur(value)
    unit = " GiB" if key.endswith("_gib") else "×" if key == "max_concurrency" else ""
    return Text((str(value) if isinstance(value, int) else _num(value)) + unit)


def _settings(an: Analysis) -> RenderableType:
    cfg = an.store.settings
    t = _table("Configured (claim) vs effective (evidence)", ["setting", "configured", "effective", "evidence"])
    pairs = [("context", "context_length", "ctx_per_slot"), ("parallel", "num_parallel", "parallel"),
             ("keep-alive", "keep_alive", "keep_alive"), ("max loaded models", "max_loaded_models", "loaded_models"),
             ("kv cache type", "kv_cache_type", "kv_cache_type"), ("listen", "host", "listen")]
    paths = an.source_paths

    def row(label: str, ckey: str, ekey: str) -> None:
        conf = cfg.configured.get(ckey)
        eff = cfg.effective.get(ekey)
        if conf is None and eff is None:
            return
        ref = cfg.effective_ref.get(ekey) or cfg.configured_ref.get(ckey)
        where = _src({"source": {"path": paths[ref.src], "line": ref.line}}) if ref else _t(None)
        t.add_row(_lit(label), _setting(ckey, conf), _setting(ekey, eff), where)

    for label, ckey, ekey in pairs:
        row(label, ckey, ekey)
    # Every other setting of the JSON's `config`, under its name there (vLLM's are all of this kind: the KV
    # cache and the concurrency it allows, the model length); a name both sides use shares one row.
    paired_c = {ckey for _, ckey, _ in pairs}
    paired_e = {ekey for _, _, ekey in pairs}
    rest = dict.fromkeys([*(k for k in cfg.configured if k not in paired_c),
                          *(k for k in cfg.effective if k not in paired_e)])
    for key in rest:
        row(key, key if key not in paired_c else "", key if key not in paired_e else "")
    # Nothing configured nor seen in effect (a proxy's JSONL): no empty table.
    return t if t.row_count else Text("No configured or effective settings in these logs.", style="dim")


_METRIC = {"e2e_s": "end to end", "ttft_s": "TTFT", "itl_s": "ITL"}


def _latency(an: Analysis) -> RenderableType:
    latency = an.latency()
    source = latency.pop("source", "requests")
    span = latency.pop("window", "")  # "since start" (one scrape: cumulative) or "between scrapes" (deltas)
    title = ("Latency (inference requests)" if source == "requests"
             else f"Latency from /metrics: {span}" if span else "Latency (from /metrics histograms)")
    t = _table(title, ["metric", "count", "p50", "p90", "p99", "max"])
    for name, summary in latency.items():
        t.add_row(_lit(_METRIC.get(name, name)), _t(summary["count"]), _dur(summary["p50"]), _dur(summary["p90"]),
                  _dur(summary["p99"]), _dur(summary["max"]))
    return t


def print_report(an: Analysis, console: Console | None = None) -> None:
    (console or Console()).print(render(an))
