"""The `?` screen: every key, and where each number comes from."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

KEYS = (
    ("?", "this help"), ("q", "quit"), ("tab / shift+tab", "next / previous panel"),
    ("↑ ↓ pgup pgdn home end", "move in a panel (the highlight stays on its request or event as newer ones arrive)"),
    ("enter", "open the selected request, hint or event with its evidence lines (or click the highlighted row)"),
    ("/", "filter requests (model, path, engine, client, status)"), ("escape", "clear the filter / close"),
    ("s / S", "sort requests by the next / previous column (or click a header); the heading shows ▼ or ▲"),
    ("r", "reverse the requests' sort"),
    ("c", "choose the columns of the focused table (a narrow panel hides the least telling first and says so)"),
    ("← →", "scroll a table sideways when even its kept columns do not fit"),
    ("ctrl+s", "save the screen as plain text in the current directory"),
    ("1 / 2 / 3", "latency and hint window: 1, 5 or 15 minutes"), ("t", "residency timeline"),
    ("m", "per model: requests, cold loads, TTFT, tokens/s, sizes, loads, evictions, residency"),
    ("b", "memory budget: each model's weights, KV and total, which pairs fit together (GiB to spare or short), "
          "what a swap costs, and the rules (as `ietop budget`)"),
    ("e", "the Events panel (on a small terminal it takes the place of Requests; e again swaps back)"),
    ("p", "pause (replay: stops the clock; live: freezes the screen)"), ("n", "replay: step one event while paused"),
    ("j", "replay: run to the next load, unload, truncation or error (a new Events row) and pause there"),
    ("J", "replay: back to just after the previous one (the replay starts over and runs there)"),
    ("+ / -", "replay: faster / slower"), ("ctrl+p", "command palette (themes, screenshots…)"),
)
NOTES = (
    "A configured value is a claim; the log line is the evidence. Effective/configured context in yellow: "
    "the setting did not take effect.",
    "TTFT and ITL come from per-request log timings (Ollama v0.30+, MLX DEBUG), vLLM /metrics histograms, or "
    "`ietop proxy`; where none is available the panel says so.",
)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 80%; height: 80%; border: thick $accent; background: $surface; }
    """

    def compose(self) -> ComposeResult:
        table = Table(box=None, padding=(0, 2))
        table.add_column("key", style="bold cyan", no_wrap=True)
        table.add_column("does")
        for key, what in KEYS:
            table.add_row(key, what)
        scroll = VerticalScroll(Static(table), *(Static(Text(n, style="dim")) for n in NOTES))
        scroll.border_title = "ietop — keys"
        yield scroll
        yield Footer()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
