"""Residency: which models are loaded now, where, how big, with what context, until when."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from rich.text import Text
from textual.coordinate import Coordinate
from textual.widgets import DataTable

from ietop.model.snapshot import ResidentRow, Snapshot
from ietop.tui.format import ago, bar, countdown, safe, secs, size

COLUMNS = ("model", "size", "VRAM", "ctx", "expires", "loads", "evict", "load", "resident", "par", "engine", "from")
"""Most telling first (a narrow terminal scrolls the rest): ctx is effective/configured when they differ
(yellow); expires: keep-alive left; load: what its last load took; resident: for how long."""


def _ctx(row: ResidentRow) -> Text:
    eff = "?" if row.ctx is None else str(row.ctx)
    if row.ctx_configured is None:
        return Text(eff)
    differs = row.ctx is not None and row.ctx != row.ctx_configured
    # A configured value is a claim; the effective one is the evidence: show both when they disagree.
    return Text(f"{eff}/{row.ctx_configured}", style="bold yellow" if differs else "")


class ResidencyTable(DataTable[object]):
    BORDER_TITLE = "Residency"

    _shown: object = None

    def on_mount(self) -> None:
        self.cursor_type = "row"

    def show(self, snap: Snapshot, started: dict[str, float] | None = None) -> None:
        """`started`: engine → its process start time, when it runs on this host."""
        rows = [self._cells(r, snap.now) for r in since_process_start(snap.resident, started or {})]
        key = [[(c.plain, c.style) for c in row] for row in rows]
        if key == self._shown:
            return  # unchanged: keep the table (and its cursor) as it is
        old, self._shown = self._shown, key
        if isinstance(old, list) and len(old) == len(key) and rows:
            # Same rows, some cells changed (the keep-alive countdown ticks): update only those cells.
            for y, (was, now_row) in enumerate(zip(old, key, strict=True)):
                for x, (a, b) in enumerate(zip(was, now_row, strict=True)):
                    if a != b:
                        self.update_cell_at(Coordinate(y, x), rows[y][x], update_width=True)
            return
        # Columns too: their widths only grow, and a long blob name seen once would keep them wide.
        self.clear(columns=True)
        self.add_columns(*COLUMNS)
        if not rows:
            self.add_row(safe("nothing resident", "dim"), *(Text("") for _ in COLUMNS[1:]))
        for row in rows:
            self.add_row(*row)

    @staticmethod
    def _cells(r: ResidentRow, now: float) -> list[Text]:
        vram = bar(r.vram_bytes, r.size_bytes, 4) + Text(f" {size(r.vram_bytes)}") if r.vram_bytes else Text("—")
        return [safe(r.model, "bold"), Text(size(r.size_bytes)), vram, _ctx(r), Text(countdown(r.expires_at, now)),
                Text(str(r.loads)), Text(str(r.evictions), style="bold red" if r.evictions else ""),
                Text(secs(r.last_load_s)), Text(ago(r.loaded_since, now) if r.loaded_since else "—"),
                Text("—" if r.parallel is None else str(r.parallel)), safe(r.engine), safe(r.source, "dim")]


def since_process_start(rows: Sequence[ResidentRow], started: Mapping[str, float]) -> list[ResidentRow]:
    """A vLLM server loads its one model as it starts: a row its API listed (ietop may have started later)
    is resident since the server process started, when that process runs on this host."""
    return [replace(r, loaded_since=started[r.engine]) if r.source == "models" and r.engine == "vllm"
            and r.engine in started else r for r in rows]
