"""`ietop compare`'s terminal report: the `ietop.compare/1` document as plain aligned text.

Plain text, not Rich: model names, paths and settings come from the logs, and no markup may be read into them;
every such value goes through `parsers.text.inert.visible` (control characters shown, never sent).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ietop.analyze.compare import METRICS
from parsers.text.inert import visible

_LABEL_W = 20
_COL_W = 12


def render(doc: Mapping[str, Any]) -> str:
    out: list[str] = []
    if doc.get("split_at"):
        out.append(f"split at {doc['split_at']}: before is what precedes it, after the rest")
    for i, comp in enumerate(doc["comparisons"]):
        if i:
            out.append("")
            out.append("─" * 78)
        out += _comparison(comp)
    return "\n".join(out) + "\n"


def _where(side: Mapping[str, Any]) -> str:
    paths = ", ".join(visible(p) for p in side.get("paths") or [])
    parts = [f"{side['label']}: {paths}"]
    if side.get("run_line") is not None:
        parts.append(f"started at line {side['run_line']}")
    elif side.get("run") is not None:
        parts.append("the log's start, before any server start")
    if side.get("start") or side.get("end"):
        parts.append(f"{side.get('start') or 'start'} → {side.get('end') or 'end'}")
    parts.append(f"{side.get('requests', 0)} inference requests")
    return ", ".join(parts)


def _comparison(comp: Mapping[str, Any]) -> list[str]:
    b, a = comp["before"], comp["after"]
    out = [_where(b), _where(a), ""]
    out.append(_header(b["label"], a["label"]))
    out.append("overall")
    out += _rows(comp["overall"]["metrics"])
    out.append(f"  why: {comp['overall']['why']['text']}")
    for m in comp["models"]:
        out.append("")
        name = visible(m["model"] or "(model unknown)")
        out.append(f"{name} ({visible(m['engine'])}): {m['requests_before']} → {m['requests_after']} requests")
        out += _rows(m["metrics"])
        out.append(f"  why: {m['why']['text']}")
    out.append("")
    out += _config(comp["config"], b["label"], a["label"])
    return out


def _header(before: str, after: str) -> str:
    return f"{'':<{_LABEL_W + 2}}{before:>{_COL_W}}{after:>{_COL_W}}{'change':>{_COL_W + 8}}{'n':>{_COL_W}}"


def _rows(metrics: Mapping[str, Mapping[str, Any]]) -> list[str]:
    rows = []
    for name, label, unit in METRICS:
        m = metrics[name]
        n = f"{m['n_before']} → {m['n_after']}"
        rows.append(f"  {label:<{_LABEL_W}}{_value(m['before'], unit):>{_COL_W}}{_value(m['after'], unit):>{_COL_W}}"
                    f"{_change(m, unit):>{_COL_W + 8}}{n:>{_COL_W}}")
    return rows


def _value(v: float | None, unit: str) -> str:
    if v is None:
        return "—"
    if unit == "s":
        return f"{v * 1000:.0f} ms" if abs(v) < 1 else f"{v:.2f} s"
    if unit == "tok/s":
        return f"{v:.1f} tok/s"
    if unit == "tok":
        return f"{v:.0f} tok"
    return f"{v:.0f}"


def _change(m: Mapping[str, Any], unit: str) -> str:
    d = m["delta"]
    if d is None:
        return "—"
    sign = "+" if d > 0 else "−" if d < 0 else "±"
    text = sign + _value(abs(d), unit)
    pct = m["delta_pct"]
    if pct is None:
        return text
    return text + (" (±0%)" if round(pct) == 0 else f" ({'+' if pct > 0 else '−'}{abs(pct):.0f}%)")


def _config(cfg: Mapping[str, list[Mapping[str, Any]]], before: str, after: str) -> list[str]:
    out = ["configuration (configured: what the server was told; in effect: what its runners did)"]
    if not cfg["changed"]:
        out.append("  no setting stated on both sides differs")
    for c in cfg["changed"]:
        kind = "configured" if c["kind"] == "configured" else "in effect "
        out.append(f"  {kind} {visible(c['name'])} {_setting(c['before'])} → {_setting(c['after'])} "
                   f"({before}: {_line(c['before_source'])}, {after}: {_line(c['after_source'])})")
    for key, side in (("only_before", before), ("only_after", after)):
        if cfg[key]:
            names = ", ".join(visible(c["name"]) for c in cfg[key])
            out.append(f"  stated on the {side} side only (the other holds no line that states it): {names}")
    return out


def _setting(v: Any) -> str:
    return "(empty)" if v == "" else visible(str(v))


def _line(src: Mapping[str, Any] | None) -> str:
    return "no line" if not src else f"line {src.get('line')}"
