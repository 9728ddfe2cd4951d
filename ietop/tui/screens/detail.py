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


def request_view(req: Request, lookup: Lookup, model: str | None = None) -> RenderableType:
    """`model`: the request's model by name, where the log named its blob later."""
    facts = _facts([
        ("time", req.time.isoformat() if req.time else "—"), ("engine", req.engine),
        ("model", model or req.model or "unknown (no line named it)"),
        ("request", f"{req.method} {req.path}"), ("status", req.status), ("client", req.client or "—"),
        ("prompt tokens", "unknown" if req.prompt_tokens is None else
         f"{req.prompt_tokens} (from {req.prompt_tokens_source or '?'})"),
        ("cached / prefilled", f"{req.cached_tokens if req.cached_tokens is not None else '—'} / "
                               f"{req.prefill_tokens if req.prefill_tokens is not None else '—'}"),
        ("truncated", "yes — the model did not see the whole prompt" if req.truncated else "no"),
        ("output tokens", "unknown" if req.output_tokens is None else req.output_tokens),
        ("waited for a load", f"yes, {secs(req.load_s)}" if req.cold_load else "no"),
        ("TTFT", secs(req.ttft_s)), ("ITL", secs(req.itl_s)), ("total", secs(req.latency_s)),
    ])
    return Group(Text("Request", style="bold underline"), facts, Text(""), Text("Evidence", style="bold underline"),
                 evidence_block((req.ref,), lookup))


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
