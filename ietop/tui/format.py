"""Formatting shared by the widgets: untrusted text made inert, sizes, durations, sparklines, bars.

Log text is untrusted: it must never reach Rich's markup parser (a `[bold]` or `[link=…]` in a prompt
would be interpreted) nor the terminal as escape sequences or bidi reordering. Every cell goes through `safe`
or `cell`; which characters are made visible is `parsers.text.inert`'s one definition, shared with
`ietop analyze`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

from rich.cells import cell_len, set_cell_size
from rich.text import Text

from ietop.model.durations import secs as secs  # re-exported: the widgets format with it
from parsers.text.inert import visible

SPARK = "▁▂▃▄▅▆▇█"


def clean(value: object) -> str:
    """The text with control characters (ESC, CSI, BEL…), bidi controls and invisible characters replaced
    by visible stand-ins (`parsers.text.inert`)."""
    return visible(str(value))


def safe(value: object, style: str = "") -> Text:
    """A literal Text: never parsed as markup, control characters shown, not sent."""
    return Text(clean(value) if value is not None else "—", style=style)


def cell(value: object, style: str = "") -> tuple[str, str]:
    """A RowTable cell: the text made inert as `safe` makes it, tabs as spaces (a cell is one line of fixed
    width), and a style definition."""
    return (clean(value).replace("\t", " ") if value is not None else "—", style)


def elide(text: str, width: int) -> str:
    """`text` in at most `width` cells, ending in "…" when cut, and never cut inside a run of digits: "GeForce
    RTX 4090" at 16 is "GeForce RTX…", not "GeForce RTX 40", which reads as another card."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return "…"[:max(0, width)]
    cut = min(len(set_cell_size(text, width - 1).rstrip(" ")), len(text))  # wide characters: cells ≠ chars
    while 0 < cut < len(text) and text[cut - 1].isdigit() and text[cut].isdigit():
        cut -= 1
    head = text[:cut]
    while cell_len(head) > width - 1:
        head = head[:-1]
    space = head.rfind(" ")
    if cut < len(text) and text[cut] != " " and space >= max(1, len(head) - 12):
        head = head[:space]  # at a word's end, when one is near: "waited for a…", not "waited for a m…"
    return head.rstrip() + "…"


def size(n: int | float | None) -> str:
    if n is None:
        return "—"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def ago(t: float | None, now: float) -> str:
    return "—" if t is None else secs(max(0.0, now - t))


def countdown(expires: float | None, now: float) -> str:
    if expires is None:
        return "—"
    left = expires - now
    if left > 100 * 365 * 86400:
        return "forever"
    return "expired" if left <= 0 else secs(left)


def clock(ts: datetime | None, t: float | None = None) -> str:
    """Wall-clock time of a record as the log wrote it (its own zone), else from `t`."""
    if ts is not None:
        return ts.strftime("%H:%M:%S")
    if t is None or t <= 0:
        return "—"
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%H:%M:%SZ")


def sparkline(values: Sequence[float]) -> str:
    top = max(values, default=0.0)
    if top <= 0:
        return " " * len(values)
    return "".join(" " if v <= 0 else SPARK[min(len(SPARK) - 1, int(v / top * (len(SPARK) - 1)))] for v in values)


def bar(used: float | None, total: float | None, width: int = 20) -> Text:
    """A filled bar; red past 90 %, yellow past 75 %."""
    if used is None or not total:
        return Text("·" * width, style="dim")
    frac = max(0.0, min(1.0, used / total))
    filled = round(frac * width)
    style = "red" if frac > 0.9 else "yellow" if frac > 0.75 else "green"
    return Text("█" * filled, style=style) + Text("░" * (width - filled), style="dim")
