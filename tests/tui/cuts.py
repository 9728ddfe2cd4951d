"""The cut-number walker: every cell a table draws is its whole value, or text elided with "…" at a word or
between digits, never a number cut short ("TT", "1." for "TTFT", "1.0s" at 80 columns was the defect)."""

from __future__ import annotations

from ietop.tui.widgets.hints import HintsTable, hint_text
from ietop.tui.widgets.rowtable import RowTable


def cut(shown: str, full: str) -> str | None:
    """Why `shown` is not an acceptable rendering of `full` (None: it is)."""
    shown, full = shown.strip(), full.strip()
    if shown == full:
        return None
    if not shown.endswith("…"):
        return f"{full!r} drawn as {shown!r}: cut without an ellipsis"
    head = shown[:-1].rstrip()
    if not full.startswith(head):
        return f"{full!r} drawn as {shown!r}: not its beginning"
    if head and head[-1].isdigit() and full[len(head)].isdigit():
        return f"{full!r} drawn as {shown!r}: elided inside a number"
    return None


def table_cuts(table: RowTable) -> list[str]:
    """Each visible cell of `table` as drawn (its columns sliced from the rendered lines) against its value."""
    problems = []
    width = table.scrollable_content_region.width
    height = table.scrollable_content_region.height
    scroll_x, scroll_y = int(table.scroll_x), int(table.scroll_y)
    spans = table.column_spans()
    for y in range(height):
        index = scroll_y + y - 1
        if y and index >= len(table.rows):
            break
        strip = table.render_line(y)
        cells = table._header if y == 0 else table.rows[index]
        for i, name, x, w in spans:
            lo, hi = x - scroll_x, x - scroll_x + w
            if hi <= 0 or lo >= width:
                continue  # scrolled out of view whole: not drawn, not cut
            if lo < 0 or hi > width:
                problems.append(f"{table.BORDER_TITLE}: column {name!r} only partly in view")
                continue
            why = cut(strip.crop(lo, hi).text, cells[i][0])
            if why:
                problems.append(f"{table.BORDER_TITLE} row {index} {name}: {why}")
    return problems


def hint_cuts(hints: HintsTable) -> list[str]:
    problems = []
    for i, h in enumerate(hints.hints):
        prompt = hints.get_option_at_index(i).prompt
        shown = getattr(prompt, "plain", str(prompt))
        why = cut(shown, hint_text(h).plain)
        if why:
            problems.append(f"Hints {i}: {why}")
    return problems
