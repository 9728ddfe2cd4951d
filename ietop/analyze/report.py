"""`ietop analyze`: run saved logs through the pipeline into a store, then write the report.

The `--json` document follows the `ietop.analyze/1` contract in DESIGN.md. It is written by streaming
the spooled records, so a report of millions of requests never sits in memory as one object.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any

from ietop.analyze.spool import Spool
from ietop.model.records import Request, iso
from ietop.model.store import SourcePaths, Store
from ietop.pipeline import run_files

SCHEMA = "ietop.analyze/1"
LIST_KEYS = (("requests", "request"), ("loads", "load"), ("unloads", "unload"),
             ("truncations", "truncation"), ("errors", "error"), ("tasks", "task"),
             ("engine_stats", "stats"), ("preemptions", "preemption"))


@dataclass(slots=True)
class Digest:
    """Small, bounded summaries collected while records stream past (for the terminal report)."""

    slowest: list[tuple[float, int, Request]] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    first: datetime | None = None
    last: datetime | None = None
    cold: int = 0
    truncated: int = 0
    seq: int = 0

    def __call__(self, kind: str, record: Any) -> None:
        if kind != "request":
            return
        req: Request = record
        self.seq += 1
        self.statuses[req.status] += 1
        if req.time is not None:
            self.first = self.first or req.time
            self.last = req.time
        if not req.inference:
            return
        self.cold += req.cold_load
        self.truncated += req.truncated
        lat = req.latency_s
        if lat is not None:
            # Keep the record itself (bounded: ten of them) to show in the terminal report.
            item = (lat, -self.seq, req)
            if len(self.slowest) < 10:
                heapq.heappush(self.slowest, item)
            elif lat > self.slowest[0][0]:
                heapq.heapreplace(self.slowest, item)

    @property
    def first_time(self) -> str | None:
        return iso(self.first)

    @property
    def last_time(self) -> str | None:
        return iso(self.last)


class Analysis:
    """The result of analyzing a set of files. Call `close()` when done (removes the spool)."""

    def __init__(self, paths: Sequence[str], engine: str | None = None, since: float | None = None,
                 until: float | None = None, include_prompts: bool = False) -> None:
        self.paths = [str(p) for p in paths]
        self.store = Store(include_prompts=include_prompts)
        self.source_paths = SourcePaths(self.store)
        self.spool = Spool(self.source_paths)
        self.digest = Digest()
        self.spool.hooks.append(self.digest)
        self.store.set_sink(self.spool)
        self.include_prompts = include_prompts
        try:
            run_files(self.store, self.paths, engine, since, until)
        except BaseException:
            self.spool.cleanup()
            raise
        self.spool.close_writers()

    def sources(self) -> list[dict[str, Any]]:
        return [
            {"path": s.path, "engine": s.engine, "format": s.format, "version": s.version,
             "lines": s.lines, "unparsed_lines": s.unparsed_lines}
            for s in self.store.sources
        ]

    def latency(self) -> dict[str, Any]:
        st = self.store
        return {"e2e_s": st.e2e.summary(), "ttft_s": st.ttft.summary(), "itl_s": st.itl.summary()}

    def write_json(self, out: IO[str]) -> None:
        """Write the whole `ietop.analyze/1` document to `out`."""
        dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
        out.write('{"schema":"ietop.analyze/1","sources":')
        out.write(dumps(self.sources()))
        for key, kind in LIST_KEYS:
            out.write(f',"{key}":[')
            first = True
            for raw in self.spool.raw_lines(kind):
                if not first:
                    out.write(",")
                out.write(raw)
                first = False
            out.write("]")
        if self.include_prompts:
            out.write(',"prompts":[')
            out.write(",".join(self.spool.raw_lines("prompt")))
            out.write("]")
        out.write(',"config":')
        out.write(dumps(self.store.settings.as_dict(self.source_paths)))
        out.write(',"latency":')
        out.write(dumps(self.latency()))
        out.write(',"counts":')
        out.write(dumps(self.store.counts))
        out.write(',"hints":[]}\n')

    def close(self) -> None:
        self.spool.cleanup()
