"""The probe table's latency mean is the same number on every run of the same log.

A float sum depends on the order of its terms. The columnar reader counts probes per (offset run, method, path,
status) and several runs add to one row of the table: in group_by's order, which is its threads' unless asked,
the same busy log gave `probes[].latency_s.mean` differing in the last digit from run to run (a change
`ietop compare` would report). The groups are now taken in the order they first occur in the window.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from ietop.model.probes import ProbeTable
from ietop.pipeline.bulk.segments import tabulate

RUNS = 64


def _probes() -> tuple[pl.DataFrame, list[timedelta | None]]:
    # One probe per offset run, all the same (method, path, status): each run is a group of its own, and the
    # table's one row adds them up. Magnitudes far apart make the float sum depend on the order.
    latencies = [(10.0 ** (k % 17)) * (1.0 + k / 7.0) for k in range(RUNS)]
    frame = pl.DataFrame({
        "run": list(range(RUNS)),
        "method": ["GET"] * RUNS,
        "path": ["/api/tags"] * RUNS,
        "status": [200] * RUNS,
        "t": [1_700_000_000.0 + k for k in range(RUNS)],
        "latency": latencies,
    })
    offsets: list[timedelta | None] = [timedelta(hours=k % 3) for k in range(RUNS)]
    return frame, offsets


def test_runs_add_up_in_file_order_every_time() -> None:
    frame, offsets = _probes()
    expected = 0.0
    for lat in frame["latency"].to_list():
        expected += lat  # the order the per-line path adds them: the file's
    sums = set()
    for _ in range(20):
        table = ProbeTable()
        tabulate(table, 0, frame, offsets)
        (row,) = table.rows.values()
        assert row.count == RUNS and row.latency_n == RUNS
        sums.add(row.latency_sum)
    assert sums == {expected}
