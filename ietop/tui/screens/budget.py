"""The Budget screen (`b`): `ietop budget` over what the dashboard holds — usable memory and where it comes from,
each model's footprint, which pairs fit together (the margin) and what a swap costs, and the rules in words.

The snapshot's budget rests on the logs alone; when they name no device and this is the host the dashboard
samples, the usable size is this host's (`budget_here`), as `ietop budget` falls back to it too.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from ietop.model.budget import GIB, Budget, BudgetInputs, Figure, Footprint, Pair, build, gib, gib_number, where
from ietop.model.budget_inputs import Machine, machine, on_machine
from ietop.model.snapshot import Snapshot
from ietop.pipeline.hardware import Hardware
from ietop.tui.format import clean, secs

REFRESH_S = 0.5
"""How often the open screen looks for a newer budget (the app's redraw timer keeps `app.snap` current)."""
_APPLE_SILICON = sys.platform == "darwin" and platform.machine() == "arm64"
_MARK = {True: ("✓", "green"), False: ("✗", "red"), None: ("?", "dim")}


def machine_of(hw: Hardware | None) -> Machine | None:
    """This host as the budget counts it, from the dashboard's last hardware sample."""
    if hw is None:
        return None
    gpus = tuple((g.name or f"GPU {g.index}", g.memory_total) for g in hw.gpus if g.memory_total)
    return machine(gpus, hw.host.total if hw.host is not None else None, hw.wired_limit, _APPLE_SILICON)


class _Rebuilt:
    """The last budget rebuilt with this host's memory: the panel and the screen ask on every redraw."""

    inputs: BudgetInputs | None = None
    machine: Machine | None = None
    budget: Budget | None = None


_rebuilt = _Rebuilt()


def budget_here(snap: Snapshot | None, hw: Hardware | None) -> Budget | None:
    """The snapshot's budget; with this host's memory as the usable size when the logs give none and `hw`
    (a sample of this host) is known."""
    if snap is None or snap.budget is None or snap.budget.usable.size is not None or snap.budget_inputs is None:
        return None if snap is None else snap.budget
    machine = machine_of(hw)
    if machine is None:
        return snap.budget
    if _rebuilt.inputs is not snap.budget_inputs or _rebuilt.machine != machine:
        _rebuilt.inputs, _rebuilt.machine = snap.budget_inputs, machine
        _rebuilt.budget = build(on_machine(snap.budget_inputs, machine))
    return _rebuilt.budget


def _size(f: Figure | None) -> Text:
    if f is None:
        return Text("?", style="dim")
    return Text(("~" if f.estimated else "") + gib_number(f.size))


def _usable(budget: Budget, paths: Sequence[str]) -> Text:
    u = budget.usable
    line = Text("usable model memory: ", style="bold") + Text(gib(u.size), style="bold" if u.size else "yellow")
    line += Text(f" — {clean(u.source)}")
    if u.refs:
        line += Text(" (" + ", ".join(clean(where(r, paths)) for r in u.refs) + ")", style="dim")
    return line


def _footprints(models: Sequence[Footprint]) -> Table:
    table = Table(title="Models (GiB; ~ estimated, ? unknown)", title_justify="left", box=None,
                  padding=(0, 1), header_style="bold")
    table.add_column("model", overflow="fold", min_width=10)
    for col in ("weights", "KV", "total", "ctx×par", "load s"):
        table.add_column(col, justify="right", no_wrap=True)
    for m in models:
        ctx = Text("?", style="dim") if m.ctx is None else Text(f"{m.ctx // (m.parallel or 1)}×{m.parallel or 1}")
        load = Text("never", style="dim") if m.load_s is None else Text(f"{m.load_s:.1f} (n={m.loads_measured})")
        table.add_row(Text(clean(m.model)), _size(m.weights), _size(m.kv), _size(m.total), ctx, load)
    return table


def _cell(p: Pair) -> Text:
    mark, style = _MARK[p.fits]
    if p.margin is None:
        return Text(mark, style=style)
    return Text(f"{mark} {p.margin / GIB:.1f}", style=style)


def _matrix(names: Sequence[str], pairs: dict[tuple[str, str], Pair]) -> Table:
    table = Table(box=None, padding=(0, 1), header_style="bold")
    table.add_column("", no_wrap=True)
    for name in names:
        table.add_column(Text(clean(name)), justify="right", no_wrap=True)
    for a in names:
        row = [Text(clean(a), style="bold")]
        row.extend(Text("—", style="dim") if a == b else _cell(pairs[a, b]) for b in names)
        table.add_row(*row)
    return table


def _pair_line(p: Pair, models: Sequence[Footprint]) -> Text:
    mark, style = _MARK[p.fits]
    line = Text(clean(f"{p.a} + {p.b}: ")) + Text(mark, style=style)
    if p.need is None:
        missing = [m.model for m in models if m.model in (p.a, p.b) and m.total is None]
        return line + Text(clean(f" no size for {', '.join(missing)}"), style="dim")
    if p.margin is None:
        return line + Text(f" need {gib(p.need)}, usable memory unknown", style="dim")
    if p.fits:
        return line + Text(f" {gib(p.margin)} spare")
    swap = "never measured" if p.swap_s is None else secs(p.swap_s)
    return line + Text(f" {gib(-p.margin)} short · swap {swap}")


def _width(names: Sequence[str], pairs: Sequence[Pair]) -> int:
    """The matrix's width in cells: each column its widest text plus one cell of padding either side."""
    widest = max((_cell(p).cell_len for p in pairs), default=1)
    heads = [cell_len(clean(n)) for n in names]
    return sum(max(h, widest) + 2 for h in heads) + max(heads, default=0) + 2


def budget_view(budget: Budget | None, paths: Sequence[str], width: int) -> RenderableType:
    """The whole screen's text at `width` cells: the pair matrix, or a list of pairs when it is wider."""
    if budget is None:
        return Text("no budget yet", style="dim")
    parts: list[RenderableType] = [_usable(budget, paths), Text("")]
    if not budget.models:
        parts.append(Text("no model load seen yet: the budget needs a load's memory lines", style="dim"))
        return Group(*parts)
    parts.append(_footprints(budget.models))
    if budget.pairs:
        names = [m.model for m in budget.models]
        lookup = {(p.a, p.b): p for p in budget.pairs} | {(p.b, p.a): p for p in budget.pairs}
        parts.append(Text(""))
        if _width(names, budget.pairs) <= width:
            parts.append(Text("Pairs: ✓ fit together, ✗ do not; GiB to spare (negative: short)", style="bold"))
            parts.append(_matrix(names, lookup))
        else:  # a narrow screen: one line per pair instead
            parts.append(Text("Pairs: ✓ fit together, ✗ do not", style="bold"))
            parts.extend(_pair_line(p, budget.models) for p in budget.pairs)
    if budget.rules:
        parts.append(Text(""))
        parts.append(Text("Rules", style="bold"))
        parts.extend(Text(clean(rule)) for rule in budget.rules)
    return Group(*parts)


class _Fitted:
    """The budget laid out for the width Rich gives it (known only when it renders)."""

    def __init__(self, budget: Budget | None, paths: Sequence[str]) -> None:
        self.budget, self.paths = budget, paths

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield budget_view(self.budget, self.paths, options.max_width)


Source = Callable[[], tuple[Snapshot | None, Hardware | None]]
"""What the screen redraws from: the app's newest snapshot and hardware sample."""


class BudgetScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,b", "dismiss", "close")]
    DEFAULT_CSS = """
    BudgetScreen { align: center middle; }
    BudgetScreen > VerticalScroll { width: 95%; height: 85%; border: thick $accent; background: $surface; }
    """

    def __init__(self, source: Source) -> None:
        super().__init__()
        self.source = source
        self.budget: Budget | None = None
        self._paths: tuple[str, ...] = ()

    def _current(self) -> tuple[Budget | None, tuple[str, ...]]:
        snap, hw = self.source()
        return budget_here(snap, hw), tuple(s.path for s in snap.sources) if snap is not None else ()

    def compose(self) -> ComposeResult:
        self.budget, self._paths = self._current()
        scroll = VerticalScroll(Static(_Fitted(self.budget, self._paths), id="budget-body"))
        scroll.border_title = "Budget"
        scroll.border_subtitle = "the loads the dashboard holds; ietop budget: the whole log"
        yield scroll
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(REFRESH_S, self.redraw)

    def redraw(self) -> None:
        """New loads, sizes or a first sample of this host: the screen follows while open."""
        budget, paths = self._current()
        if budget == self.budget and paths == self._paths:
            return
        self.budget, self._paths = budget, paths
        self.query_one("#budget-body", Static).update(_Fitted(budget, paths))

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
