"""Residency: which models are loaded now, where, how big, with what context, until when."""

from __future__ import annotations

from rich.text import Text
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

    def on_mount(self) -> None:
        self.cursor_type = "row"

    def show(self, snap: Snapshot) -> None:
        # Columns too: their widths only grow, and a long blob name seen once would keep them wide.
        self.clear(columns=True)
        self.add_columns(*COLUMNS)
        if not snap.resident:
            self.add_row(safe("nothing resident", "dim"), *(Text("") for _ in COLUMNS[1:]))
            return
        for r in snap.resident:
            vram = bar(r.vram_bytes, r.size_bytes, 4) + Text(f" {size(r.vram_bytes)}") if r.vram_bytes else Text("—")
            self.add_row(safe(r.model, "bold"), Text(size(r.size_bytes)), vram, _ctx(r),
                         Text(countdown(r.expires_at, snap.now)), Text(str(r.loads)),
                         Text(str(r.evictions), style="bold red" if r.evictions else ""), Text(secs(r.last_load_s)),
                         Text(ago(r.loaded_since, snap.now) if r.loaded_since else "—"),
                         Text("—" if r.parallel is None else str(r.parallel)), safe(r.engine), safe(r.source, "dim"))
