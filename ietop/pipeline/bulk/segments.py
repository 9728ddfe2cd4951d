"""What every engine's columnar window shares: the split of a window into bulk rows and parsed rows, the
*segments* (the runs of bulk rows between two parsed rows), the merge of their events back into file order,
and the probe table.

A bulk row's segment is how many parsed rows come before it in the window: segment k lies between parsed
row k and parsed row k + 1 (k counts from 1; segment 0 is before the first). Parsed rows include blank
ones, which give no event.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from itertools import chain
from operator import itemgetter

import polars as pl

from ietop.model.probes import ProbeTable
from parsers.events import Event


@dataclass(slots=True)
class Split:
    rows: list[int]
    """The parsed rows (0-based in the window), in order."""
    texts: list[str]
    segment_of: pl.Series
    """For every row of the window: its segment, were it a bulk row."""

    @classmethod
    def of(cls, lines: pl.Series, bulk_rows: pl.Series) -> Split:
        bulk = pl.repeat(False, len(lines), eager=True, dtype=pl.Boolean)
        if len(bulk_rows):
            bulk = bulk.scatter(bulk_rows, True)
        rest = pl.DataFrame({"line": lines, "bulk": bulk}).with_row_index("row").filter(~pl.col("bulk"))
        return cls(rest["row"].to_list(), rest["line"].to_list(), (~bulk).cum_sum().cast(pl.Int64))

    def segments(self, rows: pl.Series) -> pl.Series:
        return self.segment_of.gather(rows)


Keyed = tuple[float, int, list[Event]]
"""(position, tie-break, events): a parsed row k at position k; what a segment s gives, just after s."""


_POSITION = itemgetter(0, 1)


def in_file_order(*parts: list[Keyed]) -> Iterator[list[Event]]:
    """The event lists of several position-sorted parts, merged by position. One sort of the parts together:
    its merge of sorted runs is compiled code, where heapq.merge's generator ran Python for every list (a busy
    window holds ~10,000)."""
    merged = list(chain.from_iterable(parts))
    merged.sort(key=_POSITION)
    for _key, _tie, events in merged:
        yield events


def tabulate(table: ProbeTable, src: int, probe: pl.DataFrame, offsets: list[timedelta | None]) -> None:
    """Count probes into `table` per offset run, method, path and status. `probe` has the columns run (index
    into `offsets`: the UTC offset their times were read under), method, path, status, t (epoch seconds, may
    be null) and latency (seconds, may be null)."""
    add_groups(table, src, probe_groups(probe), offsets)


def probe_groups(probe: pl.DataFrame) -> pl.DataFrame:
    """`probe` (as `tabulate` takes it) per run, method, path and status: n, first, last, lat_sum, lat_n, lat_max."""
    # In the order the groups first occur: several runs' groups add their float sums to one row, and a float
    # sum depends on its order (group_by's own is its threads': the same log gave means differing in the last
    # digit from run to run, a change `ietop compare` would show).
    return probe.group_by("run", "method", "path", "status", maintain_order=True).agg(
        pl.len().alias("n"), pl.col("t").min().alias("first"), pl.col("t").max().alias("last"),
        pl.col("latency").sum().alias("lat_sum"), pl.col("latency").count().alias("lat_n"),
        pl.col("latency").max().alias("lat_max"),
    )


def add_groups(table: ProbeTable, src: int, groups: pl.DataFrame, offsets: list[timedelta | None],
               shift: float = 0.0) -> None:
    """`probe_groups`' rows into `table`; `shift` (seconds) comes off their times (groups built on times not
    yet moved to UTC: a min or max less a constant is the min or max of the differences)."""
    for g in groups.iter_rows(named=True):
        first = g["first"] - shift if g["first"] is not None else float("inf")
        last = g["last"] - shift if g["last"] is not None else float("-inf")
        table.add_group(src, g["method"], g["path"], g["status"], g["n"], first, last,
                        offsets[g["run"]], g["lat_sum"] or 0.0, g["lat_n"], g["lat_max"])
