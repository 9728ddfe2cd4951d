"""The Models screen (`m`): per engine and model, what `ietop analyze` lists under `models`, for what the dashboard
holds — its kept requests and its residency timeline (`ietop.model.per_model.snapshot_rows`)."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from ietop.model.per_model import ModelRow, snapshot_rows
from ietop.model.snapshot import Snapshot
from ietop.tui.format import clean, secs

SERVED = ("model", "req", "cold", "TTFT", "dec t/s", "pre t/s", "prompt", "output")
HELD = ("model", "loads", "median", "evicted for", "evicted", "cut", "resident")
WRAPS = ("model", "evicted for", "evicted")
"""Columns that fold onto more lines when the screen is narrow: the rest are short numbers that must stay whole."""


def _dash(text: str | None) -> Text:
    return Text("—", style="dim") if text is None else Text(clean(text))


def _num(value: float | None) -> str | None:
    if value is None:
        return None
    return f"{value:.0f}" if value >= 10 or float(value).is_integer() else f"{value:.1f}"


def _secs(value: float | None) -> str | None:
    return None if value is None else secs(value)


def _pair(p50: str | None, p90: str | None) -> Text:
    return _dash(p50 if p50 == p90 or p90 is None else f"{p50}/{p90}")


def _share(value: float | None) -> Text:
    return _dash(None if value is None else f"{value:.0%}")


def _who(count: int, pairs: tuple[tuple[str | None, int], ...]) -> Text:
    names = ", ".join(f"{m or '?'}×{n}" if n > 1 else (m or "?") for m, n in pairs)
    return Text(clean(f"{count}: {names}" if names else str(count)))


def _table(title: str, columns: tuple[str, ...]) -> Table:
    table = Table(title=title, title_justify="left", box=None, expand=False, padding=(0, 1), header_style="bold")
    for col in columns:
        wraps = col in WRAPS
        # The model keeps room for a short name: Rich would otherwise give the folding columns' share away first.
        table.add_column(col, no_wrap=not wraps, overflow="fold" if wraps else "ellipsis",
                         justify="left" if wraps else "right", min_width=10 if col == "model" else None)
    return table


def models_view(rows: list[ModelRow]) -> RenderableType:
    """The rows as two tables (requests; loads and residency) that fit an 80-column terminal; the engine
    prefixes the model only when several engines are in view. Every name is log text: made inert."""
    if not rows:
        return Text("no inference requests or model loads seen yet", style="dim")
    several = len({r.engine for r in rows}) > 1

    def name(r: ModelRow) -> Text:
        return Text(clean(f"{r.engine}:{r.model or '?'}" if several else r.model or "?"))

    served = _table("Requests (TTFT, prompt and output tokens: p50/p90; tokens/s: median per request)", SERVED)
    held = _table("Loads, evictions, truncations, residency (share of the window)", HELD)
    for r in rows:
        served.add_row(name(r), Text(str(r.requests)), _share(r.cold_load_share),
                       _pair(_secs(r.ttft_p50_s), _secs(r.ttft_p90_s)), _dash(_num(r.decode_tps_p50)),
                       _dash(_num(r.prefill_tps_p50)), _pair(_num(r.prompt_tokens_p50), _num(r.prompt_tokens_p90)),
                       _pair(_num(r.output_tokens_p50), _num(r.output_tokens_p90)))
        loads = Text(str(r.loads))
        if r.loads_failed:
            loads.append(f" +{r.loads_failed} failed", style="red")
        held.add_row(name(r), loads, _dash(_secs(r.load_s_median)), _who(r.evictions_suffered, r.evicted_for),
                     _who(r.evictions_caused, r.evicted_by_this), Text(str(r.truncations)), _share(r.resident_share))
    return Group(served, Text(""), held)


class ModelsScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,m", "dismiss", "close")]
    DEFAULT_CSS = """
    ModelsScreen { align: center middle; }
    ModelsScreen > VerticalScroll { width: 95%; height: 85%; border: thick $accent; background: $surface; }
    """

    def __init__(self, snap: Snapshot) -> None:
        super().__init__()
        self.snap = snap
        self.rows = snapshot_rows(snap)

    def compose(self) -> ComposeResult:
        scroll = VerticalScroll(Static(models_view(self.rows), id="models-body"))
        scroll.border_title = "Models"
        scroll.border_subtitle = "the requests and residencies the dashboard holds; ietop analyze: the whole log"
        yield scroll
        yield Footer()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
