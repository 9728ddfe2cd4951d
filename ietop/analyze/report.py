"""`ietop analyze`: run saved logs through the pipeline into a store, then write the report.

The `--json` document follows the `ietop.analyze/2` contract (README, "The JSON report"): `/1` listed every
request; `/2` counts successful probes per source, method, path and status (`probes`) unless
`--all-requests`. It is written by streaming the spooled records, so a report of millions of requests
never sits in memory as one object.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from itertools import islice
from typing import IO, TYPE_CHECKING, Any

from ietop.analyze.spool import Spool, json_dumps
from ietop.model.counters import Histograms, Window, since_start
from ietop.model.hints import HintContext, HintEngine
from ietop.model.names import resolve
from ietop.model.per_model import ModelRow, PerModel, stated
from ietop.model.probes import ProbeTable
from ietop.model.records import Ref, Request, iso
from ietop.model.store import SourcePaths, Store
from ietop.pipeline.ingest import FileInput, Item, Stream, file_events, run_files
from parsers.text.inert import escape_json

if TYPE_CHECKING:  # polars stays out of the import until a log is read
    from ietop.pipeline.bulk.stream import Bounds

SCHEMA = "ietop.analyze/2"
LIST_KEYS = (("requests", "request"), ("loads", "load"), ("unloads", "unload"),
             ("truncations", "truncation"), ("errors", "error"), ("tasks", "task"),
             ("engine_stats", "stats"), ("preemptions", "preemption"))
JSON_BATCH = 1024
"""Spooled records joined into one write of the JSON document: ~0.5 MB of requests, checked at once."""


@dataclass(slots=True)
class Digest:
    """Small, bounded summaries collected while records stream past (for the terminal report)."""

    slowest: list[tuple[float, int, Request]] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    first: datetime | None = None
    last: datetime | None = None
    first_t: float = float("inf")
    last_t: float = float("-inf")
    cold: int = 0
    cold_unknown: int = 0
    """Inference requests whether they waited for a load cannot be known (MLX at INFO)."""
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
            self.first_t = min(self.first_t, req.t_end)
            self.last_t = max(self.last_t, req.t_end)
        if not req.inference:
            return
        self.cold += bool(req.cold_load)
        self.cold_unknown += req.cold_load is None
        self.truncated += bool(req.truncated)
        lat = req.latency_s
        if lat is not None:
            # Keep the record itself (bounded: ten of them) to show in the terminal report.
            item = (lat, -self.seq, req)
            if len(self.slowest) < 10:
                heapq.heappush(self.slowest, item)
            elif lat > self.slowest[0][0]:
                heapq.heapreplace(self.slowest, item)

    first_folded: str | None = None
    last_folded: str | None = None
    folded_times: list[str] = field(default_factory=list)
    """Every folded probe row's first and last time, as stated (the per-model window)."""

    def fold(self, probes: ProbeTable) -> None:
        """Count probes that never became records (the columnar reader's)."""
        self.statuses.update(probes.statuses())
        self.folded_times = [t for row in probes.rows.values() for t in (row.first, row.last) if t is not None]
        for row in probes.rows.values():
            if row.first is not None and row.first_t < self.first_t:
                self.first_t, self.first_folded = row.first_t, row.first
            if row.last is not None and row.last_t > self.last_t:
                self.last_t, self.last_folded = row.last_t, row.last

    @property
    def first_time(self) -> str | None:
        return self.first_folded or iso(self.first)

    @property
    def last_time(self) -> str | None:
        return self.last_folded or iso(self.last)


def _plain(value: Any) -> Any:
    """dataclasses.asdict output made JSON-ready (datetimes as ISO-8601, tuples as lists)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


class Analysis:
    """The result of analyzing a set of files. Call `close()` when done (removes the spool)."""

    def __init__(self, paths: Sequence[str], engine: str | None = None, since: float | None = None,
                 until: float | None = None, include_prompts: bool = False, all_requests: bool = False,
                 on_read: Callable[[int, int], None] | None = None, names: Mapping[str, str] | None = None
                 ) -> None:
        """`on_read(bytes, lines)`: told what each window or chunk read held (a progress display). `names`: what
        to call a path read under another name (ietop.sources.inputs: a pipe copied to a temporary file)."""
        self.paths = [str(p) for p in paths]
        self.store = Store(include_prompts=include_prompts)
        self.source_paths = SourcePaths(self.store)
        self.spool = Spool(self.source_paths)
        self.digest = Digest()
        self.hint_engine = HintEngine()
        self.per_model = PerModel()
        self.spool.hooks.append(self.digest)
        self.spool.hooks.append(self.per_model)
        self.spool.hooks.append(self.hint_engine.observe)
        self.store.set_sink(self.spool)
        self.include_prompts = include_prompts
        self.probes = ProbeTable()
        folded = ProbeTable()
        if not all_requests:
            self.spool.probes = self.probes
        try:
            bounds = None if since is None and until is None else (since, until)
            stream = self._stream(folded, not all_requests, on_read, bounds)
            run_files(self.store, self.paths, engine, since, until, stream, names)
            self.digest.fold(folded)
            self.probes.merge(folded)
            self.hints = self.hint_engine.evaluate(self.hint_context())
            for hint in self.hints:
                self.spool("hint", hint)
        except BaseException:
            self.spool.cleanup()
            raise
        self.spool.close_writers()
        # Every output reads the records back through the spool: named by what the whole of the logs said,
        # as the dashboard names them (ietop.model.names.resolve).
        self.spool.aliases = self.store.loads.aliases

    @staticmethod
    def _stream(folded: ProbeTable, fold: bool, on_read: Callable[[int, int], None] | None,
                bounds: Bounds | None) -> Stream:
        """The columnar reader where an engine has one (probes folded into `folded`), else the per-line one.
        With --since/--until only Ollama's counts a window's probes (whether a probe is inside depends on the
        time of the lines before it: a line without a time takes the last one seen); a vLLM log is then read
        line by line (its probes are a smaller share of it: 1.3x the time, against 5x for a busy Ollama log)."""
        from ietop.pipeline.bulk.stream import bulk_file_events, foldable

        def stream(inp: FileInput) -> Iterator[Item]:
            if fold and foldable(inp, timed=bounds is not None):
                return bulk_file_events(inp, folded, on_read, bounds=bounds)
            return file_events(inp, on_read)

        return stream

    def sources(self) -> list[dict[str, Any]]:
        return [
            {"path": s.path, "engine": s.engine, "format": s.format, "version": s.version,
             "lines": s.lines, "unparsed_lines": s.unparsed_lines}
            for s in self.store.sources
        ]

    def windows(self) -> list[Window]:
        """Per scraped endpoint: the window from its first to its last scrape (deltas of the cumulative
        counters and histograms; percentiles interpolated inside the buckets read from the scrapes)."""
        out = []
        for endpoint in self.store.metrics.endpoints():
            scrapes = self.store.metrics.scrapes(endpoint)
            first, last = scrapes[0].ts, scrapes[-1].ts
            if first is None or last is None:
                continue
            window = self.store.metrics.window(endpoint, last, (last - first).total_seconds() + 1.0)
            if window is not None:
                out.append(window)
        return out

    def metrics(self) -> list[dict[str, Any]]:
        return [_plain(asdict(w)) for w in self.windows()]

    def hint_context(self) -> HintContext:
        st = self.store
        cfg = st.settings
        return HintContext(cfg.configured, cfg.configured_ref, cfg.effective, cfg.effective_ref,
                           tuple(self.windows()), None, st.e2e.quantile(0.5), st.e2e.quantile(0.99), st.e2e.count,
                           dict(st.loads.aliases),
                           tuple(Ref(i, 1) for i, s in enumerate(st.sources) if s.format and "scrape" in s.format))

    def latency(self) -> dict[str, Any]:
        st = self.store
        result: dict[str, Any] = {"e2e_s": st.e2e.summary(), "ttft_s": st.ttft.summary(), "itl_s": st.itl.summary(),
                                  "source": "requests"}
        if st.e2e.count == 0 and st.ttft.count == 0:
            # vLLM logs no per-request timing: the percentiles come from the scraped histograms.
            for window in self.windows():
                hists, result["window"] = self._latency_histograms(window)
                for key, name in (("e2e_s", "e2e"), ("ttft_s", "ttft"), ("itl_s", "itl")):
                    h = getattr(hists, name)
                    if h is not None and h.count:
                        result[key] = {"count": h.count, "p50": h.p50, "p90": h.p90, "p99": h.p99,
                                       "max": None, "mean": h.mean}
                result["source"] = "metrics"
                break
        return result

    def _latency_histograms(self, window: Window) -> tuple[Histograms, str]:
        """The window's histograms and what span they cover. One scrape has no baseline to difference
        against, but its cumulative histograms still count every request since the server started."""
        if window.start is not None:
            return window.total.histograms, "between scrapes"
        latest = self.store.metrics.latest(window.endpoint)
        return (since_start(latest), "since start") if latest is not None else (window.total.histograms, "")

    def model_rows(self) -> list[ModelRow]:
        """Per engine and model (`ietop.model.per_model`), models named as every output names them. Residency is
        measured over the logs' whole span: every record's times, the health checks counted in `probes` too."""
        span, d = self.per_model.span(), self.digest
        window = span
        # The folded probes' first and last times as stated (the records' own are in `span` already).
        edges = [stated(datetime.fromisoformat(t)) for t in d.folded_times]
        if edges:
            window = (min(edges), max(edges)) if span is None else (min(span[0], *edges), max(span[1], *edges))
        aliases = self.store.loads.aliases
        return self.per_model.rows(lambda m: resolve(m, aliases), window)

    def models(self) -> list[dict[str, Any]]:
        """The `models` list of the JSON document (README, "The JSON report")."""
        return [row.as_dict() for row in self.model_rows()]

    def write_json(self, out: IO[str]) -> None:
        """Write the whole `ietop.analyze/2` document to `out`.

        The encoders leave non-ASCII characters raw (`ensure_ascii=False`: a model or path in any script stays
        readable), DEL, C1 and bidi controls among them: whoever reads the document in a terminal or an editor
        would get them acted on. Every piece is written through `escape_json`, which escapes those as `\\uXXXX`:
        the values decode the same. Records go in batches: one check per batch, not per record, keeps the
        listing of millions of requests as fast as it was."""
        dumps = json_dumps()

        def write(text: str) -> None:
            out.write(escape_json(text))

        write(f'{{"schema":"{SCHEMA}","sources":')
        write(dumps(self.sources()))
        write(',"probes":')
        write(dumps(self.probes.as_list(self.source_paths)))
        for key, kind in LIST_KEYS:
            write(f',"{key}":[')
            self._write_lines(write, kind)
            write("]")
        if self.include_prompts:
            write(',"prompts":[')
            self._write_lines(write, "prompt")
            write("]")
        write(',"config":')
        write(dumps(self.store.settings.as_dict(self.source_paths)))
        write(',"metrics":')
        write(dumps(self.metrics()))
        write(',"latency":')
        write(dumps(self.latency()))
        write(',"counts":')
        write(dumps(self.store.counts))
        write(',"hints":[')
        self._write_lines(write, "hint")
        write('],"models":')
        write(dumps(self.models()))
        write("}\n")

    def _write_lines(self, write: Callable[[str], None], kind: str) -> None:
        """The spooled records of `kind`, comma-separated, about `JSON_BATCH` records to a write."""
        lines = self.spool.raw_lines(kind)
        sep = ""
        while batch := list(islice(lines, JSON_BATCH)):
            write(sep + ",".join(batch))
            sep = ","

    def close(self) -> None:
        self.spool.cleanup()
