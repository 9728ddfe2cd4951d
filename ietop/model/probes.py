"""Successful probes, counted rather than listed: the `probes` table of `ietop.analyze/2`.

Health checks and listing calls (`HEAD /`, `GET /api/tags`, `/api/ps`, `/health`, `/metrics`, `/v1/models`) are
most lines of a busy server's log and say one thing each: the server answered. A report that lists them one by
one is bigger than the log and buries the requests that matter, so each (source, method, path, status) becomes
one row: how many, first and last time, latency mean and max. They come from two places that must agree: the
columnar reader's folded lines (`add_group`) and requests the store finished one by one (`add_request`, e.g. a
probe inside a journald envelope).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from ietop.model.records import Request

PROBE_METHODS = ("GET", "HEAD")


def is_probe(method: str, status: int, inference: bool) -> bool:
    """A successful read-only call that is not inference: what `ietop.analyze/2` counts instead of listing.
    POST management calls (`/api/show`, `/api/pull`) stay listed: they change or explain state."""
    return not inference and 100 <= status < 400 and method in PROBE_METHODS  # 0: no answer, not a success


@dataclass(slots=True)
class ProbeRow:
    count: int = 0
    first_t: float = float("inf")
    first: str | None = None
    last_t: float = float("-inf")
    last: str | None = None
    latency_sum: float = 0.0
    latency_n: int = 0
    latency_max: float | None = None


_EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001 - naive on purpose: the wall clock a line shows


def iso_at(t: float, offset: timedelta | None) -> str | None:
    """The ISO time of epoch `t` on a clock `offset` from UTC; without an offset, the naive wall time (as
    ietop.model's `epoch` reads a zone-less time: as if it were UTC). None when that clock would show a year
    outside 1–9999 (a line stamped 0001/01/01 read three hours east of UTC)."""
    try:
        # Built on the wall clock, not through UTC: 9999-12-31 23:00 three hours west of UTC is a time a
        # line can show, its UTC (year 10000) is not one datetime can hold.
        wall = _EPOCH + timedelta(seconds=t + (offset.total_seconds() if offset is not None else 0.0))
    except OverflowError:
        return None
    return (wall if offset is None else wall.replace(tzinfo=timezone(offset))).isoformat()


class ProbeTable:
    """(source, method, path, status) → ProbeRow."""

    def __init__(self) -> None:
        self.rows: dict[tuple[int, str, str, int], ProbeRow] = {}

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def total(self) -> int:
        return sum(r.count for r in self.rows.values())

    def add_group(self, src: int, method: str, path: str, status: int, count: int, first_t: float,
                  last_t: float, offset: timedelta | None, latency_sum: float, latency_n: int,
                  latency_max: float | None) -> None:
        row = self.rows.get((src, method, path, status))
        if row is None:
            row = self.rows[(src, method, path, status)] = ProbeRow()
        row.count += count
        # A time is infinite when none of the group's lines had one (a vLLM log before its first record).
        if first_t < row.first_t:
            row.first_t, row.first = first_t, iso_at(first_t, offset)
        if last_t >= row.last_t and last_t > float("-inf"):
            row.last_t, row.last = last_t, iso_at(last_t, offset)
        row.latency_sum += latency_sum
        row.latency_n += latency_n
        if latency_max is not None and (row.latency_max is None or latency_max > row.latency_max):
            row.latency_max = latency_max

    def add_request(self, req: Request) -> None:
        src = req.ref.src
        row = self.rows.get((src, req.method, req.path, req.status))
        if row is None:
            row = self.rows[(src, req.method, req.path, req.status)] = ProbeRow()
        row.count += 1
        stamp = req.time.isoformat() if req.time is not None else None
        t = req.t_end
        if t < row.first_t:
            row.first_t, row.first = t, stamp
        if t >= row.last_t:
            row.last_t, row.last = t, stamp
        lat = req.latency_s
        if lat is not None:
            row.latency_sum += lat
            row.latency_n += 1
            if row.latency_max is None or lat > row.latency_max:
                row.latency_max = lat

    def merge(self, other: ProbeTable) -> None:
        for (src, method, path, status), row in other.rows.items():
            mine = self.rows.get((src, method, path, status))
            if mine is None:
                self.rows[(src, method, path, status)] = ProbeRow(*(getattr(row, f) for f in ProbeRow.__slots__))
                continue
            mine.count += row.count
            if row.first_t < mine.first_t:
                mine.first_t, mine.first = row.first_t, row.first
            if row.last_t >= mine.last_t:
                mine.last_t, mine.last = row.last_t, row.last
            mine.latency_sum += row.latency_sum
            mine.latency_n += row.latency_n
            if row.latency_max is not None and (mine.latency_max is None or row.latency_max > mine.latency_max):
                mine.latency_max = row.latency_max

    def statuses(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for (_src, _method, _path, status), row in self.rows.items():
            out[status] = out.get(status, 0) + row.count
        return out

    def as_list(self, paths: Any) -> list[dict[str, Any]]:
        """The rows, per source, busiest first (`paths`: source index → path)."""
        items = sorted(self.rows.items(), key=lambda kv: (kv[0][0], -kv[1].count, kv[0][2], kv[0][1], kv[0][3]))
        return [
            {"source": paths[src], "method": method, "path": path, "status": status, "count": row.count,
             "first": row.first, "last": row.last,
             "latency_s": {"mean": row.latency_sum / row.latency_n if row.latency_n else None,
                           "max": row.latency_max, "count": row.latency_n}}
            for (src, method, path, status), row in items
        ]
