"""`bulk_file_events`: one Ollama log's (t, src, seq, event) stream, as `ingest.file_events` gives it, with
its health checks folded in compiled code.

Per window (ietop.pipeline.bulk.lines):
1. polars finds the probe lines (ietop.pipeline.bulk.ollama); every other line is parsed by the engine's own
   parser, in file order, with its line number, before anything reaches the store. Parsing never depends on
   a probe line (GIN lines change no parser state), so this order is free.
2. A probe's time is its stamp under the UTC offset the parser held when the line came: the offset changes
   only at parsed lines, so each run of probes between two parsed lines (a *segment*) has one offset.
3. Each segment reaches the store as one `AccessCount` at its latest time, just before the next parsed line's
   events: what the store did for each probe (count it, move its clock, let loads age) done once, and
   the clock of untimed lines (llama-server's slot lines take the last time seen) is the same.
4. The probes themselves are counted per (method, path, status) into a ProbeTable.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import cast

import polars as pl

from ietop.model.probes import ProbeTable
from ietop.pipeline.bulk.lines import window_lines, windows
from ietop.pipeline.bulk.ollama import probes as ollama_probes
from ietop.pipeline.ingest import FileInput, flush_events
from ietop.sources.files import read_chunks
from parsers.events import AccessCount, Event
from parsers.ollama.gofmt import epoch
from parsers.ollama.log import OllamaParser
from parsers.text.envelope import strip_inner

Item = tuple[float, int, int, Event]


def foldable(inp: FileInput) -> bool:
    """Whether this input has a columnar reader (the others keep the per-line one)."""
    return inp.engine == "ollama"


def _seconds(offset: timedelta | None) -> float:
    return offset.total_seconds() if offset is not None else 0.0


def bulk_file_events(inp: FileInput, table: ProbeTable, on_bytes: object = None) -> Iterator[Item]:
    """(t, src, seq, event) for one Ollama log, probes folded into `table` and into AccessCount events.
    `on_bytes(n)`, when given, is told how many bytes each window had (progress)."""
    parser = cast(OllamaParser, inp.parser)  # foldable(): only Ollama logs come here
    src = inp.src
    last_t = float("-inf")
    seq = 0
    base = 0
    for data in windows(read_chunks(inp.path)):
        lines = window_lines(data)
        found = ollama_probes(lines)
        mask = pl.repeat(False, len(lines), eager=True, dtype=pl.Boolean)
        if len(found):
            mask = mask.scatter(found["row"], True)
        rest = pl.DataFrame({"line": lines, "probe": mask}).with_row_index("row").filter(~pl.col("probe"))
        rows = rest["row"].to_list()
        texts = rest["line"].to_list()
        # 1. Parse every other line, noting the parser's offset wherever it changes (k: ordinal of the line).
        parsed: list[tuple[int, list[Event]]] = []
        offsets: list[tuple[int, timedelta | None]] = [(0, parser.offset)]
        for k, (row, raw) in enumerate(zip(rows, texts, strict=True), 1):
            text, _kind, env_ts = strip_inner(raw)
            if not text:
                continue
            parsed.append((k, parser.parse(base + row + 1, text, env_ts)))
            if parser.offset != offsets[-1][1]:
                offsets.append((k, parser.offset))
        # 2. Each probe's segment (how many other lines precede it in the window) and its time under the
        # offset of that segment.
        segments: list[tuple[int, int, float, int]] = []
        if len(found):
            ordinal = (~mask).cum_sum().cast(pl.Int64)
            probe = found.with_columns(seg=ordinal.gather(found["row"]))
            run_starts = pl.Series([k for k, _ in offsets], dtype=pl.Int64)
            run_offsets = [_seconds(off) for _, off in offsets]
            probe = probe.with_columns(run=run_starts.search_sorted(probe["seg"], side="right") - 1)
            probe = probe.with_columns(t=pl.col("naive") - pl.col("run").replace_strict(
                list(range(len(run_offsets))), run_offsets, return_dtype=pl.Float64))
            seg_frame = probe.group_by("seg").agg(pl.len().alias("n"), pl.col("t").max(), pl.col("row").max())
            segments = sorted(zip(seg_frame["seg"].to_list(), seg_frame["n"].to_list(), seg_frame["t"].to_list(),
                                  seg_frame["row"].to_list(), strict=True))
            _tabulate(table, src, probe, [off for _, off in offsets])
        # 3. Merge: a segment's count goes before the events of the line that follows it.
        j = 0
        for k, events in parsed:
            while j < len(segments) and segments[j][0] < k:
                _seg, n, t, row = segments[j]
                j += 1
                last_t = t if t > last_t else last_t
                seq += 1
                yield (last_t, src, seq, AccessCount(base + row + 1, None, n))
            for event in events:
                ts = event.ts
                if ts is not None:
                    t = epoch(ts)
                    last_t = t if t > last_t else last_t
                seq += 1
                yield (last_t, src, seq, event)
        for _seg, n, t, row in segments[j:]:
            last_t = t if t > last_t else last_t
            seq += 1
            yield (last_t, src, seq, AccessCount(base + row + 1, None, n))
        base += len(lines)
        if callable(on_bytes):
            on_bytes(len(data))
    for event in flush_events(parser):
        seq += 1
        yield (last_t, src, seq, event)
    inp.lines = base


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
