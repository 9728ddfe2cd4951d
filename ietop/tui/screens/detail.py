"""Detail screens: a request, a hint or an event with the log lines it rests on (the evidence)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from ietop.model.hints import Hint
from ietop.model.records import Ref, Request
from ietop.model.snapshot import EventRow
from ietop.tui.format import clean, safe, secs

Lookup = Callable[[Ref], tuple[str, str | None]]
"""Ref → (source file name, the line's text or None when it is no longer kept)."""


def evidence_block(refs: Sequence[Ref], lookup: Lookup) -> RenderableType:
    if not refs:
        return Text("no log line (from a poll or the proxy)", style="dim")
    lines: list[Text] = []
    for ref in refs:
        name, text = lookup(ref)
        head = Text(f"{clean(name)}:{ref.line}  ", style="cyan")
        lines.append(head + (safe(text) if text is not None else Text("(line no longer in memory)", style="dim")))
    return Group(*lines)


def _facts(pairs: Sequence[tuple[str, object]]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for key, value in pairs:
        table.add_row(key, safe(value))
    return table


NUMBERS = (("prompt tokens", "prompt_tokens"), ("cached", "cached_tokens"), ("prefilled", "prefill_tokens"),
           ("output tokens", "output_tokens"), ("load wait", "load_s"), ("TTFT", "ttft_s"), ("ITL", "itl_s"),
           ("total", "latency_s"))
"""The per-request numbers, each shown with the line it rests on or why it is unknown."""


def _value(req: Request, attr: str) -> str:
    value = getattr(req, attr)
    if value is None:
        return "unknown"
    if attr == "prompt_tokens":
        return f"{value} (from {req.prompt_tokens_source or '?'})"
    return secs(value) if attr.endswith("_s") else str(value)


def _numbers(req: Request, lookup: Lookup) -> Table:
    cited = req.facts_evidence()
    unknown = req.unknown or {}
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column()
    for label, attr in NUMBERS:
        ref = cited.get(attr)
        if ref is not None:
            where = Text(f"{clean(lookup(ref)[0])}:{ref.line}", style="cyan")
        elif attr in unknown:
            where = Text("unknown: ", style="dim") + safe(unknown[attr], "dim")
        else:
            where = Text("not in the log", style="dim") if getattr(req, attr) is None else Text("")
        table.add_row(label, _value(req, attr), where)
    return table


def request_view(req: Request, lookup: Lookup, model: str | None = None) -> RenderableType:
    """`model`: the request's model by name, where the log named its blob later. Each number cites its line."""
    facts = _facts([
        ("time", req.time.isoformat() if req.time else "—"), ("engine", req.engine),
        ("model", model or req.model or "unknown (no line named it)"),
        ("request", f"{req.method} {req.path}"), ("status", req.status or "none (no answer)"),
        ("client", req.client or "—"),
        ("truncated", "yes — the model did not see the whole prompt" if req.truncated else "no"
         if req.truncated is not None else f"unknown: {(req.unknown or {}).get('truncated', 'not in the log')}"),
        ("waited for a load", "yes" if req.cold_load else "no" if req.cold_load is not None else
         f"unknown: {(req.unknown or {}).get('cold_load', 'not in the log')}"),
    ])
    lines = [req.ref, *sorted(set(req.facts_evidence().values()) - {req.ref}, key=lambda r: (r.src, r.line))]
    return Group(Text("Request", style="bold underline"), facts, Text(""),
                 Text("Numbers, and the line each rests on", style="bold underline"), _numbers(req, lookup), Text(""),
                 Text("Evidence", style="bold underline"), evidence_block(lines, lookup))


def hint_view(hint: Hint, lookup: Lookup) -> RenderableType:
    causes = Group(*(Text("• ") + safe(c) for c in hint.causes)) if hint.causes else Text("—")
    return Group(Text(f"[{hint.severity}] ", style="bold") + safe(hint.title, "bold"),
                 Text(f"id: {hint.id}", style="dim"), Text(""), safe(hint.detail), Text(""),
                 Text("Likely causes", style="bold underline"), causes, Text(""),
                 Text("Next step", style="bold underline"), safe(hint.next), Text(""),
                 Text("Evidence", style="bold underline"), evidence_block(hint.evidence, lookup))


def event_view(event: EventRow, lookup: Lookup) -> RenderableType:
    return Group(Text(event.kind, style="bold") + Text(" ") + safe(event.text), Text(""),
                 Text("Evidence", style="bold underline"), evidence_block(event.refs, lookup))


class DetailScreen(ModalScreen[None]):
    """A scrollable detail view; escape or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss", "close")]
    DEFAULT_CSS = """
    DetailScreen { align: center middle; }
    DetailScreen > VerticalScroll { width: 90%; height: 85%; border: thick $accent; background: $surface;
                                    padding: 0 1; }
    """

    def __init__(self, title: str, body: RenderableType) -> None:
        super().__init__()
        self._title = title
        self._body = body

    def compose(self) -> ComposeResult:
        scroll = VerticalScroll(Static(self._body, id="detail-body"))
        scroll.border_title = self._title
        yield scroll
        yield Footer()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
