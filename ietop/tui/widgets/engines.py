"""The header line: each engine, up or down, its version and uptime; replay state when replaying."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ietop.model.snapshot import EngineRow, Snapshot
from ietop.tui.format import clean


def uptime(seconds: float) -> str:
    """Coarse on purpose: a header that changes every second costs a redraw every second."""
    minutes = int(max(0.0, seconds) // 60)
    if minutes < 1:
        return "<1m"
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours < 48 else f"{hours // 24}d"

_STATE_STYLE = {"up": "bold green", "down": "bold red", "dead": "bold red", "log": "cyan", "unknown": "yellow"}


class EnginesBar(Static):
    """One segment per engine endpoint (or per log when nothing is polled)."""

    # One line whatever the width: a second one pushed every panel down a row and, at 80x24, Requests over
    # the Latency panel's border. The replay state comes first, so what the ellipsis takes is a log's name.
    DEFAULT_CSS = "EnginesBar { height: 1; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }"

    def __init__(self, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.status = ""
        self._shown: object = None

    def show(self, snap: Snapshot, status: str, discovered: set[str] | frozenset[str] = frozenset(),
             started: dict[str, float] | None = None) -> None:
        """`discovered`: endpoints ietop guessed (default ports); shown only once they answer.
        `started`: engine → its process start time, when the process runs on this host (the real uptime;
        otherwise the time since ietop first saw it up)."""
        self.status = status
        text = header_text(snap, discovered, started)
        if status:
            text = Text(status, style="reverse") + Text("  ") + text
        if (text.plain, text.spans) != self._shown:
            self._shown = (text.plain, text.spans)
            self.update(text)


def header_text(snap: Snapshot, discovered: set[str] | frozenset[str] = frozenset(),
                started: dict[str, float] | None = None) -> Text:
    """The engines' segments of the header (EnginesBar.show() adds the status)."""
    text = Text()
    engines = [e for e in snap.engines if e.endpoint not in discovered or e.state in ("up", "dead")]
    engines = _fold_logs(engines)
    failed = snap.failed_sources
    if not engines and not failed:
        text.append("no engine found", style="bold yellow")
        if discovered:
            tried = ", ".join(sorted(discovered))
            text.append(f" (nothing answers at {clean(tried)})", style="yellow")
        text.append(" — pass --ollama URL, --vllm URL, --mlx URL or --log [ENGINE:]PATH", style="dim")
    for i, e in enumerate(engines):
        if i:
            text.append("  │  ", style="dim")
        text.append(f"{e.engine} ", style="bold")
        text.append(e.state, style=_STATE_STYLE.get(e.state, ""))
        since = (started or {}).get(e.engine, e.up_since)
        if e.state == "up" and since is not None:
            text.append(f" {uptime(snap.now - since)}", style="dim")  # `up 5m`, as uptime(1) says it
        if e.version:
            text.append(f" v{clean(e.version)}")
        text.append(f" {clean(e.endpoint)}", style="dim")
        if e.state in ("down", "dead", "unknown") and e.detail:
            text.append(f" ({clean(e.detail)})", style="red")
    # A source that gave up stays named until ietop exits (its toast fades); what it said is in Events.
    for i, s in enumerate(failed):
        if i or engines:
            text.append("  │  ", style="dim")
        text.append(f"{clean(s.path)} failed", style="bold red")
        text.append(f" ({clean(s.failed)})", style="red")
    return text


def requests_note(snap: Snapshot) -> str | None:
    """What the empty Requests panel says when nothing followed can give a request (only endpoints polled,
    or every log followed failed); None when requests can come, or have."""
    if snap.requests or snap.requests_can_come:
        return None
    failed = ", ".join(clean(s.path) for s in snap.failed_sources)
    why = f"{failed} failed (see Events)" if failed else "no log followed"
    return (f"{why}: requests come from the engine's log — add --log PATH, --journal UNIT or --docker NAME"
            " (or --proxy PORT)")


def _fold_logs(rows: list[EngineRow]) -> list[EngineRow]:
    """Engines known only from logs: one segment per engine, not per file."""
    out = [r for r in rows if r.state != "log"]
    logs: dict[str, list[EngineRow]] = {}
    for r in rows:
        if r.state == "log":
            logs.setdefault(r.engine, []).append(r)
    for engine, group in logs.items():
        where = group[0].endpoint if len(group) == 1 else f"{len(group)} log files"
        version = next((r.version for r in group if r.version), None)
        out.append(EngineRow(engine, where, "log", "", version, None))
    return out
