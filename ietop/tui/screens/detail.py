"""Detail screens: a request, a hint or an event with the log lines it rests on (the evidence)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from ietop.model.breakdown import LABELS, PARTS, Breakdown, breakdown, fix, sentences
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


PART_STYLES = {"queued_s": "magenta", "load_wait_s": "red", "prefill_s": "yellow", "decode_s": "green",
               "other_s": "blue"}


class StoryBar:
    """One line: each known part's label and a run of blocks in proportion to its seconds, the time no line
    splits as `?`. Drawn at the width it is given, so it stays one line in a narrow terminal."""

    def __init__(self, b: Breakdown) -> None:
        self.b = b

    def segments(self) -> list[tuple[str, float, str]]:
        segs = [(LABELS[p], v, PART_STYLES[p]) for p, v in self.b.known().items() if v > 0]
        if self.b.unaccounted_s:
            segs.append(("?", self.b.unaccounted_s, "dim"))
        return segs

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        segs = self.segments()
        total = sum(v for _, v, _ in segs)
        if not segs or total <= 0:
            yield Text("no part of its time is known", style="dim")
            return
        room = options.max_width - sum(len(label) + 2 for label, _, _ in segs)
        blocks = _apportion([v for _, v, _ in segs], max(room, len(segs)))
        line = Text(no_wrap=True, overflow="crop")
        for (label, _, style), n in zip(segs, blocks, strict=True):
            line.append(label + " ", style="bold")
            line.append("█" * n + " ", style=style)
        yield line


def _apportion(values: Sequence[float], width: int) -> list[int]:
    """`width` cells shared in proportion to `values`, each at least one (largest remainder)."""
    total = sum(values)
    spare = width - len(values)
    raw = [v / total * spare for v in values]
    cells = [int(r) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: raw[i] - cells[i], reverse=True)[:spare - sum(cells)]:
        cells[i] += 1
    return [c + 1 for c in cells]


def story_view(req: Request, lookup: Lookup) -> RenderableType | None:
    """Where its time went (the bar, each part with its line or why it is unknown), the part that dominates
    with its fix, and the cold start's chain as sentences; None for a request with no story (a probe)."""
    b = breakdown(req)
    if b is None:
        return None

    def where(ref: Ref) -> str:
        return f"{clean(lookup(ref)[0])}:{ref.line}"

    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(no_wrap=True, justify="right")
    table.add_column()
    for part in PARTS:
        value = b.parts[part]
        ref = b.evidence.get(part)
        if value is None:
            table.add_row(LABELS[part], "unknown", safe(b.unknown.get(part, "not in the log"), "dim"))
            continue
        share = f" ({value / b.latency_s:.0%})" if b.latency_s else ""
        note = Text(where(ref), style="cyan") if ref is not None else Text(
            "none: " + ("no load ended in its lifetime" if part == "load_wait_s" else
                        "it gave up before the model came up" if b.gave_up else "by difference"), style="dim")
        table.add_row(LABELS[part], secs(value) + share, note)
    blocks: list[RenderableType] = [Text("Where the time went", style="bold underline"), StoryBar(b), table]
    dominant = b.dominant
    if dominant is not None:
        value = b.parts[dominant] or 0.0
        of = f" of {secs(b.latency_s)} ({value / b.latency_s:.0%})" if b.latency_s else ""
        head = Text("Most of it: ", style="bold") + Text(f"{LABELS[dominant]}, {secs(value)}{of}")
        blocks += [head, Text("Fix: ", style="bold") + safe(fix(b, req) or "—")]
    else:
        blocks.append(Text("No part dominates for sure: ", style="bold") + safe(b.unknown.get("dominant", ""), "dim"))
    told = sentences(b, where, lambda m: clean(m) if m else "a model")
    if told:
        blocks += [Text(""), Text("How the load came about", style="bold underline"),
                   *(Text("• ") + safe(line) for line in told)]
    return Group(*blocks)


def _waited(req: Request) -> str:
    load = req.waited_for
    if load is not None and not load.ok and req.status >= 400:
        return f"gave up during the load of {load.model or 'a model'} (status {req.status})"
    if req.cold_load:
        return "yes"
    return "no" if req.cold_load is not None else f"unknown: {(req.unknown or {}).get('cold_load', 'not in the log')}"


def request_view(req: Request, lookup: Lookup, model: str | None = None) -> RenderableType:
    """`model`: the request's model by name, where the log named its blob later. Each number cites its line."""
    facts = _facts([
        ("time", req.time.isoformat() if req.time else "—"), ("engine", req.engine),
        ("model", model or req.model or "unknown (no line named it)"),
        ("request", f"{req.method} {req.path}"), ("status", req.status or "none (no answer)"),
        ("client", req.client or "—"),
        ("truncated", "yes — the model did not see the whole prompt" if req.truncated else "no"
         if req.truncated is not None else f"unknown: {(req.unknown or {}).get('truncated', 'not in the log')}"),
        ("waited for a load", _waited(req)),
    ])
    story = story_view(req, lookup)
    b = breakdown(req)
    chained = [s.ref for s in b.chain] if b is not None else []
    lines = [req.ref, *sorted((set(req.facts_evidence().values()) | set(chained)) - {req.ref},
                              key=lambda r: (r.src, r.line))]
    # The story first: "why was this slow?" is what the screen is opened for.
    return Group(*((story, Text("")) if story is not None else ()),
                 Text("Request", style="bold underline"), facts, Text(""),
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
