"""`bulk_file_events`: one Ollama log's (t, src, seq, event) stream, as `ingest.file_events` gives it, with
its bulk lines handled in compiled code.

Per window (ietop.pipeline.bulk.lines):
1. polars finds the bulk lines (ietop.pipeline.bulk.ollama): health checks, and llama-server lines that give
   no event. Every other line is parsed by the engine's own parser, in file order, with its line number,
   before anything reaches the store. A bulk line changes no parser state but the task id a continuation
   line inherits, which is set before the next parsed line, so this order is free.
2. A probe's time is its stamp under the UTC offset the parser held when the line came: the offset changes
   only at parsed lines, so each run of bulk lines between two parsed lines (a *segment*) has one offset.
3. Each segment's probes reach the store as one `AccessCount` at their latest time, just before the next
   parsed line's events: what the store did for each probe (count it, move its clock, let loads age) done
   once; the clock of untimed lines (llama-server's slot lines take the last time seen) is the same.
4. The probes themselves are counted per (method, path, status) into a ProbeTable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import cast

import polars as pl

from ietop.model.probes import ProbeTable
from ietop.pipeline.bulk import ollama
from ietop.pipeline.bulk.lines import window_lines, windows
from ietop.pipeline.ingest import Clock, FileInput, Item, flush_events, sequenced
from ietop.sources.files import read_chunks
from parsers.events import AccessCount, Event
from parsers.ollama.gofmt import zone
from parsers.ollama.log import OllamaParser
from parsers.text.envelope import strip_inner

_EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001 - the zone-less clock, read as UTC (gofmt.epoch)


def foldable(inp: FileInput) -> bool:
    """Whether this input has a columnar reader (the others keep the per-line one)."""
    return inp.engine == "ollama"


def bulk_file_events(inp: FileInput, table: ProbeTable, on_read: Callable[[int, int], None] | None = None,
                     ring: list[tuple[int, str] | None] | None = None) -> Iterator[Item]:
    """(t, src, seq, event) for one Ollama log; probes counted into `table` and into AccessCount events.
    `on_read(bytes, lines)`, when given, is told what each window held (progress); `ring`, when given, gets
    each parsed line that gave events at `ring[line % len(ring)] = (line, text)` (the dashboard's evidence,
    ietop.pipeline.feeds.Evidence)."""
    parser = cast(OllamaParser, inp.parser)  # foldable(): only Ollama logs come here
    clock = Clock()
    base = 0
    for data in windows(read_chunks(inp.path)):
        lines = window_lines(data)
        yield from sequenced(inp.src, _window_batches(parser, inp.src, lines, base, table, ring), clock)
        base += len(lines)
        if on_read is not None:
            on_read(len(data), len(lines))
    yield from sequenced(inp.src, iter((flush_events(parser),)), clock)
    inp.lines = base


def _window_batches(parser: OllamaParser, src: int, lines: pl.Series, base: int, table: ProbeTable,
                    ring: list[tuple[int, str] | None] | None) -> Iterator[list[Event]]:
    """The window's events in file order, one list per parsed line or per segment of probes."""
    probes = ollama.probes(lines)
    quiet = ollama.inert(lines)
    bulk = pl.repeat(False, len(lines), eager=True, dtype=pl.Boolean)
    if len(probes) or len(quiet):
        bulk = bulk.scatter(pl.concat([probes["row"], quiet["row"]]), True)
    rest = pl.DataFrame({"line": lines, "bulk": bulk}).with_row_index("row").filter(~pl.col("bulk"))
    # A bulk line's segment: how many parsed lines come before it in the window.
    segment_of = (~bulk).cum_sum().cast(pl.Int64)
    tasks = _segment_tasks(quiet, segment_of)
    if len(quiet):
        parser.era_evidence.add("E5")  # what parsing a llama-server line would have noted
    parsed: list[tuple[int, list[Event]]] = []
    offsets: list[tuple[int, timedelta | None]] = [(0, parser.offset)]
    server = parser.server
    for k, (row, raw) in enumerate(zip(rest["row"].to_list(), rest["line"].to_list(), strict=True), 1):
        task = tasks.get(k - 1)
        if task is not None:
            server.last_task = task
        text, _kind, env_ts = strip_inner(raw)
        if not text:
            continue
        events = parser.parse(base + row + 1, text, env_ts)
        parsed.append((k, events))
        if events and ring is not None:
            ring[(base + row + 1) % len(ring)] = (base + row + 1, raw)
        if parser.offset != offsets[-1][1]:
            offsets.append((k, parser.offset))
    task = tasks.get(len(rest))
    if task is not None:
        server.last_task = task
    counts = _segment_counts(probes, segment_of, offsets, base, src, table)
    j = 0
    for k, events in parsed:
        while j < len(counts) and counts[j][0] < k:
            yield [counts[j][1]]
            j += 1
        yield events
    for _seg, count in counts[j:]:
        yield [count]


def _segment_tasks(quiet: pl.DataFrame, segment_of: pl.Series) -> dict[int, int]:
    """Segment → the task id its last id-setting llama-server line leaves as the parser's last task."""
    setters = quiet.filter(pl.col("task").is_not_null())
    if not len(setters):
        return {}
    last = setters.with_columns(seg=segment_of.gather(setters["row"])).group_by("seg").agg(
        pl.col("task").sort_by("row").last())
    return dict(zip(last["seg"].to_list(), last["task"].to_list(), strict=True))


def _segment_counts(probes: pl.DataFrame, segment_of: pl.Series, offsets: list[tuple[int, timedelta | None]],
                    base: int, src: int, table: ProbeTable) -> list[tuple[int, AccessCount]]:
    """(segment, AccessCount) for each segment with probes, in order; the probes tabulated into `table`."""
    if not len(probes):
        return []
    run_starts = pl.Series([k for k, _ in offsets], dtype=pl.Int64)
    shift = [off.total_seconds() if off is not None else 0.0 for _, off in offsets]
    probe = probes.with_columns(seg=segment_of.gather(probes["row"]))
    probe = probe.with_columns(run=run_starts.search_sorted(probe["seg"], side="right") - 1)
    probe = probe.with_columns(t=pl.col("naive") - pl.col("run").replace_strict(
        list(range(len(shift))), shift, return_dtype=pl.Float64))
    _tabulate(table, src, probe, [off for _, off in offsets])
    per_seg = probe.group_by("seg", "run").agg(pl.len().alias("n"), pl.col("t").max(), pl.col("row").max())
    per_seg = per_seg.sort("seg")
    out = []
    for seg, run, n, t, row in per_seg.iter_rows():
        offset = offsets[run][1]
        ts = _EPOCH + timedelta(seconds=t) if offset is None else datetime.fromtimestamp(t, zone(offset))
        out.append((seg, AccessCount(base + row + 1, ts, n)))
    return out


def _tabulate(table: ProbeTable, src: int, probe: pl.DataFrame, offsets: list[timedelta | None]) -> None:
    """Count the window's probes per offset run, method, path and status into `table`."""
    groups = probe.group_by("run", "method", "path", "status").agg(
        pl.len().alias("n"), pl.col("t").min().alias("first"), pl.col("t").max().alias("last"),
        pl.col("latency").sum().alias("lat_sum"), pl.col("latency").count().alias("lat_n"),
        pl.col("latency").max().alias("lat_max"),
    )
    for g in groups.iter_rows(named=True):
        table.add_group(src, g["method"], g["path"], g["status"], g["n"], g["first"], g["last"],
                        offsets[g["run"]], g["lat_sum"] or 0.0, g["lat_n"], g["lat_max"])
