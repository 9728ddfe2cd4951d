"""Residency: which models are loaded now, where, how big, with what context, until when."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from ietop.model.snapshot import ResidentRow, Snapshot
from ietop.tui.format import ago, cell, countdown, secs, size
from ietop.tui.widgets.rowtable import Cell, RowTable

COLUMNS = ("model", "host", "size", "VRAM", "ctx", "expires", "loads", "evict", "load", "resident", "par", "engine",
           "from")
"""Most telling first: ctx is effective/configured when they differ (yellow); expires: keep-alive left; load:
what its last load took; resident: for how long. `host` is there only while models are resident on more than one
host (`--ollama` URLs on several machines); the rows are then grouped by it."""
DROP_ORDER = ("from", "engine", "par", "resident", "loads", "load", "size", "evict", "ctx", "expires", "host")
"""What a narrow panel gives up first (the model and what it holds in VRAM always stay; with several hosts, which
one a model is on goes last)."""
_NUMBERS = ("size", "VRAM", "ctx", "expires", "loads", "evict", "load", "resident", "par")
VRAM_BAR = 4
UNKNOWN_HOST = "?"
"""A row no address is known for (a log that named none, or listens on every interface)."""


def machine(host: str | None) -> str | None:
    """The machine of a row's `host:port`: two servers on one machine (Ollama and vLLM, say) are one host; its
    memory is what they share."""
    if host is None:
        return None
    try:
        return urlsplit(f"//{host}").hostname or host
    except ValueError:
        return host


def several_hosts(rows: Sequence[ResidentRow]) -> bool:
    """Whether the rows are on more than one known machine: only then is the host shown (one host: the panels
    read as they always did)."""
    return len({m for r in rows if (m := machine(r.host)) is not None}) > 1


def by_host(rows: Sequence[ResidentRow]) -> list[ResidentRow]:
    """The rows grouped by machine, the machines by name (poll answers arrive in any order), unknown last; the
    rows' own order within each."""
    def key(r: ResidentRow) -> tuple[bool, str]:
        m = machine(r.host)
        return (m is None, m or "")

    return sorted(rows, key=key)


def _ctx(row: ResidentRow) -> Cell:
    eff = "?" if row.ctx is None else str(row.ctx)
    if row.ctx_configured is None:
        return (eff, "")
    differs = row.ctx is not None and row.ctx != row.ctx_configured
    # A configured value is a claim; the effective one is the evidence: show both when they disagree.
    return (f"{eff}/{row.ctx_configured}", "bold yellow" if differs else "")


def _vram(r: ResidentRow) -> Cell:
    """The share of the model in VRAM as a short bar, then the bytes (a partial offload is the bar's point)."""
    if not r.vram_bytes:
        return ("—", "")
    frac = max(0.0, min(1.0, r.vram_bytes / r.size_bytes)) if r.size_bytes else 1.0
    filled = round(frac * VRAM_BAR)
    return ("█" * filled + "░" * (VRAM_BAR - filled) + f" {size(r.vram_bytes)}", "green" if frac >= 1 else "yellow")


class ResidencyTable(RowTable):
    BORDER_TITLE = "Residency"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(COLUMNS, right=_NUMBERS, caps={"host": 24, "model": 48, "engine": 12, "from": 12},
                         flex="model", drop_order=DROP_ORDER, **kwargs)
        self.resident: tuple[ResidentRow, ...] = ()
        self.set_absent(("host",))

    def show(self, snap: Snapshot, started: dict[str, float] | None = None) -> None:
        """`started`: engine → its process start time, when it runs on this host."""
        rows = since_process_start(snap.resident, started or {})
        several = several_hosts(rows)
        if several:
            rows = by_host(rows)
        self.resident = tuple(rows)
        cells = [self._cells(r, snap.now) for r in rows]
        if several:
            # The host on every row (a scrolled table still says where each model is), dim where it repeats the
            # row above: the groups show.
            names = [machine(r.host) or UNKNOWN_HOST for r in rows]
            cells = [(row[0], cell(name, "dim" if i and names[i - 1] == name else ""), *row[2:])
                     for i, (name, row) in enumerate(zip(names, cells, strict=True))]
        if not cells:
            cells = [(("nothing resident", "dim"), *(("", "") for _ in COLUMNS[1:]))]
        if cells == self.rows:
            return  # unchanged: no redraw
        self.set_absent(() if several else ("host",))
        self.set_rows(cells, [(r.host, r.engine, r.model) for r in rows] or None)

    @staticmethod
    def _cells(r: ResidentRow, now: float) -> tuple[Cell, ...]:
        return (cell(r.model, "bold"), ("", ""), (size(r.size_bytes), ""), _vram(r), _ctx(r),
                (countdown(r.expires_at, now), ""), (str(r.loads), ""),
                (str(r.evictions), "bold red" if r.evictions else ""), (secs(r.last_load_s), ""),
                (ago(r.loaded_since, now) if r.loaded_since else "—", ""),
                ("—" if r.parallel is None else str(r.parallel), ""), cell(r.engine), cell(r.source, "dim"))


def since_process_start(rows: Sequence[ResidentRow], started: Mapping[str, float]) -> list[ResidentRow]:
    """A vLLM server loads its one model as it starts: a row its API listed (ietop may have started later)
    is resident since the server process started, when that process runs on this host (the processes ietop
    samples are this host's: a row on another machine keeps what its API said)."""
    return [replace(r, loaded_since=started[r.engine]) if r.source == "models" and r.engine == "vllm"
            and r.engine in started and machine(r.host) in (None, "127.0.0.1") else r for r in rows]
