"""`bulk_file_events`: one Ollama or vLLM log's (t, src, seq, event) stream, as `ingest.file_events` gives
it, with its bulk lines handled in compiled code.

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

What depends on the text alone (step 1, and the counts of steps 3-4 as one UTC offset would give them) is done
for the next window on a worker thread while this one's lines are parsed (`_ahead`): polars releases the GIL, so
its shapes use the other core. The parser, the offsets and the store stay on the caller's thread.

vLLM's access lines carry no time (uvicorn prints none; the parser gives them the last record's), so its
segments move no clock: they count, and the probe table takes the time the parser held there. An access line
also ends a raw error's message and an indented block: where the parser has one open, the segment's first
probe is parsed after all (VllmParser.access_acts), as the per-line path would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar, cast

import polars as pl

from ietop.model.probes import ProbeTable
from ietop.pipeline.bulk import ollama, vllm
from ietop.pipeline.bulk.lines import window_lines, windows
from ietop.pipeline.bulk.segments import Keyed, Split, add_groups, in_file_order, probe_groups, tabulate
from ietop.pipeline.ingest import Clock, FileInput, Item, flush_events, sequenced
from ietop.sources.files import read_chunks
from parsers.events import AccessCount, Event
from parsers.ollama.gofmt import epoch, zone
from parsers.ollama.log import OllamaParser
from parsers.text.envelope import strip_inner
from parsers.vllm.log import VllmParser

_EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001 - the zone-less clock, read as UTC (gofmt.epoch)


def foldable(inp: FileInput, timed: bool = False) -> bool:
    """Whether this input has a columnar reader (the others keep the per-line one); `timed`: one that can count
    only the probes of a --since/--until window (Ollama's)."""
    return inp.engine == "ollama" if timed else inp.engine in ("ollama", "vllm")


Bounds = tuple[float | None, float | None]
"""--since/--until (epoch seconds, either may be None): the reader's caller drops the events outside them."""


def bulk_file_events(inp: FileInput, table: ProbeTable, on_read: Callable[[int, int], None] | None = None,
                     ring: list[tuple[int, str] | None] | None = None, bounds: Bounds | None = None) -> Iterator[Item]:
    """(t, src, seq, event) for one Ollama or vLLM log; probes counted into `table` and into AccessCount
    events. `on_read(bytes, lines)`, when given, is told what each window held (progress); `ring`, when given,
    gets each parsed line that gave events at `ring[line % len(ring)] = (line, text)` (the dashboard's
    evidence, ietop.pipeline.feeds.Evidence). `bounds` (an Ollama log only, `foldable(inp, timed=True)`): only the
    probes inside them are counted into `table`, and their AccessCount events are split at them, as the per-line
    reader's one event per probe would be dropped (`_timed_counts`)."""
    if bounds is not None and not foldable(inp, timed=True):
        raise ValueError(f"no columnar reader counts a time window of a {inp.engine} log")
    clock = Clock()
    base = 0
    chunks = windows(read_chunks(inp.path))
    read: Iterator[tuple[int, _OllamaWindow | _VllmWindow]] = (
        _ahead(chunks, _prepare_vllm) if inp.engine == "vllm" else _ahead(chunks, _prepare_ollama))
    for size, ready in read:
        if isinstance(ready, _VllmWindow):
            batches = _vllm_batches(cast(VllmParser, inp.parser), inp.src, ready, base, table, ring)
        else:
            batches = _ollama_batches(cast(OllamaParser, inp.parser), inp.src, ready, base, table, ring,
                                      None if bounds is None else (bounds, clock))
        yield from sequenced(inp.src, batches, clock)
        base += len(ready.lines)
        if on_read is not None:
            on_read(size, len(ready.lines))
    yield from sequenced(inp.src, iter((flush_events(inp.parser),)), clock)
    inp.lines = base


@dataclass(slots=True)
class _OllamaWindow:
    """What polars finds in one window, before any line is parsed (it depends on the text alone)."""

    lines: pl.Series
    probes: pl.DataFrame
    quiet: pl.DataFrame
    split: Split
    tasks: dict[int, int]
    per_seg: pl.DataFrame
    """The probes per segment (n, naive: the latest stamp, row: the last), as one UTC offset would count them."""
    groups: pl.DataFrame
    """`probe_groups` of the probes on their stamps, as one UTC offset would count them."""
    seg_groups: pl.DataFrame
    """`probe_groups` per segment (the column `run` holds the segment): a window whose offset changes (its runs
    are runs of whole segments) regroups these few rows instead of its probes."""


@dataclass(slots=True)
class _VllmWindow:
    lines: pl.Series
    probes: pl.DataFrame
    split: Split
    first_row: dict[int, int]


def _prepare_ollama(data: bytes) -> _OllamaWindow:
    lines = window_lines(data)
    probes = ollama.probes(lines)
    quiet = ollama.inert(lines)
    split = Split.of(lines, pl.concat([probes["row"], quiet["row"]]))
    # What the counts are when the window keeps one UTC offset (nearly always): counted here, on the worker,
    # and only moved to UTC once the parsed lines have said which offset that is (_ollama_counts).
    probe = probes.with_columns(seg=split.segments(probes["row"]))
    per_seg = probe.group_by("seg").agg(pl.len().alias("n"), pl.col("naive").max(), pl.col("row").max()).sort("seg")
    stamped = probe.with_columns(t=pl.col("naive"))
    groups = probe_groups(stamped.with_columns(run=pl.lit(0)))
    seg_groups = probe_groups(stamped.with_columns(run=pl.col("seg")))
    return _OllamaWindow(lines, probes, quiet, split, _segment_tasks(quiet, split), per_seg, groups, seg_groups)


def _prepare_vllm(data: bytes) -> _VllmWindow:
    lines = window_lines(data)
    probes = vllm.probes(lines)
    split = Split.of(lines, probes["row"])
    probes = probes.with_columns(seg=split.segments(probes["row"]))
    first_row = dict(zip(*probes.group_by("seg").agg(pl.col("row").min()).get_columns(), strict=True)) \
        if len(probes) else {}
    return _VllmWindow(lines, probes, split, first_row)


W = TypeVar("W", _OllamaWindow, _VllmWindow)


def _ahead(datas: Iterable[bytes], prepare: Callable[[bytes], W]) -> Iterator[tuple[int, W]]:
    """(bytes, prepare(window)) for each window, the next window prepared on a worker thread while the caller
    parses this one's rare lines. polars releases the GIL: its shapes run on the other core beside the
    per-line Python, instead of after it (a busy window is ~75 ms of polars and about as much of Python). The
    file is still read here, in order; one window waits at most."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ietop-window")
    chunks = iter(datas)
    try:
        pending: tuple[int, Future[W]] | None = None
        while True:
            try:
                data = next(chunks)
            except StopIteration:
                break
            except Exception:
                # A read that fails (a device gone) ends the stream after what was read before it, as without
                # the look-ahead: the window in hand is handed on first.
                if pending is not None:
                    yield pending[0], pending[1].result()
                raise
            job = (len(data), pool.submit(prepare, data))
            if pending is not None:
                yield pending[0], pending[1].result()
            pending = job
        if pending is not None:
            yield pending[0], pending[1].result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


Ring = list[tuple[int, str] | None]


def _parse(parser: OllamaParser | VllmParser, n: int, raw: str, ring: Ring | None) -> list[Event] | None:
    """The per-line path for one line (None for a blank one)."""
    text, _kind, env_ts = strip_inner(raw)
    if not text:
        return None
    events = parser.parse(n, text, env_ts)
    if events and ring is not None:
        ring[n % len(ring)] = (n, raw)
    return events


def _ollama_batches(parser: OllamaParser, src: int, ready: _OllamaWindow, base: int, table: ProbeTable,
                    ring: Ring | None, timed: tuple[Bounds, Clock] | None = None) -> Iterator[list[Event]]:
    """The window's events in file order, one list per parsed line or per segment of probes. `timed`: the
    bounds, and the file's clock as it stands before this window (its events are made before any is yielded)."""
    quiet, split, tasks = ready.quiet, ready.split, ready.tasks
    if len(quiet):
        parser.era_evidence.add("E5")  # what parsing a llama-server line would have noted
    parsed: list[Keyed] = []
    offsets: list[tuple[int, timedelta | None]] = [(0, parser.offset)]
    server = parser.server
    for k, (row, raw) in enumerate(zip(split.rows, split.texts, strict=True), 1):
        task = tasks.get(k - 1)
        if task is not None:
            server.last_task = task
        events = _parse(parser, base + row + 1, raw, ring)
        if events is None:
            continue
        parsed.append((k, 0, events))
        if parser.offset != offsets[-1][1]:
            offsets.append((k, parser.offset))
    task = tasks.get(len(split.rows))
    if task is not None:
        server.last_task = task
    if timed is None:
        counts = _ollama_counts(ready, offsets, base, src, table)
    else:
        counts = _timed_counts(ready, offsets, base, src, table, parsed, *timed)
    yield from in_file_order(parsed, counts)


def _segment_tasks(quiet: pl.DataFrame, split: Split) -> dict[int, int]:
    """Segment → the task id its last id-setting llama-server line leaves as the parser's last task."""
    setters = quiet.filter(pl.col("task").is_not_null())
    if not len(setters):
        return {}
    last = setters.with_columns(seg=split.segments(setters["row"])).group_by("seg").agg(
        pl.col("task").sort_by("row").last())
    return dict(zip(last["seg"].to_list(), last["task"].to_list(), strict=True))


def _ollama_counts(ready: _OllamaWindow, offsets: list[tuple[int, timedelta | None]],
                   base: int, src: int, table: ProbeTable) -> list[Keyed]:
    """An AccessCount after each segment with probes, at their latest time; the probes tabulated."""
    if not len(ready.probes):
        return []
    if len(offsets) == 1:
        offset = offsets[0][1]
        moved = offset.total_seconds() if offset is not None else 0.0
        add_groups(table, src, ready.groups, [offset], moved)
        return [(seg + 0.5, 1, [AccessCount(base + row + 1, _wall(naive - moved, offset), n)])
                for seg, n, naive, row in ready.per_seg.iter_rows()]
    # The offset changes only at parsed lines, so each run of one offset is a run of whole segments: the
    # segments' own counts, each moved by its run's offset, are regrouped per run (a min or max less a constant
    # is the min or max of the differences; the latency sums add up per segment first). On the caller's
    # thread, so a few rows per segment, not the probes: a noisy log changes offset ~60 times a window.
    run_starts, shift = _runs(offsets)
    seg_groups = ready.seg_groups.rename({"run": "seg"})
    runs = run_starts.search_sorted(seg_groups["seg"], side="right") - 1
    by_run = shift.gather(runs)
    regrouped = seg_groups.with_columns(run=runs, first=pl.col("first") - by_run, last=pl.col("last") - by_run) \
        .group_by("run", "method", "path", "status", maintain_order=True).agg(
            pl.col("n").sum(), pl.col("first").min(), pl.col("last").max(), pl.col("lat_sum").sum(),
            pl.col("lat_n").sum(), pl.col("lat_max").max())
    add_groups(table, src, regrouped, [off for _, off in offsets])
    per_seg = ready.per_seg
    seg_runs = (run_starts.search_sorted(per_seg["seg"], side="right") - 1).to_list()
    t_moved = (per_seg["naive"] - shift.gather(seg_runs)).to_list()
    return [(seg + 0.5, 1, [AccessCount(base + row + 1, _wall(t, offsets[run][1]), n)])
            for (seg, n, _naive, row), run, t in zip(per_seg.iter_rows(), seg_runs, t_moved, strict=True)]


def _runs(offsets: list[tuple[int, timedelta | None]]) -> tuple[pl.Series, pl.Series]:
    """The parsed row each run of one UTC offset starts at, and the seconds its stamps move by to be UTC."""
    return (pl.Series([k for k, _ in offsets], dtype=pl.Int64),
            pl.Series([off.total_seconds() if off is not None else 0.0 for _, off in offsets], dtype=pl.Float64))


def _timed_counts(ready: _OllamaWindow, offsets: list[tuple[int, timedelta | None]], base: int, src: int,
                  table: ProbeTable, parsed: list[Keyed], bounds: Bounds, clock: Clock) -> list[Keyed]:
    """`_ollama_counts` for a --since/--until window. The per-line reader gives each probe the file's clock at
    it: the latest time seen up to it, its own included. That clock only goes forward, so the probes it puts
    before `since`, inside, and after `until` are a prefix, a middle and a suffix of each segment: each
    becomes an AccessCount of its own, the outer ones at times the caller drops (they still move the clock, as
    the dropped probes did), and only the middle ones are counted into `table`."""
    if not len(ready.probes):
        return []
    since, until = bounds
    run_starts, shift = _runs(offsets)
    probe = ready.probes.sort("row")  # an enveloped probe's row comes after the bare ones' (ollama.probes)
    probe = probe.with_columns(seg=ready.split.segments(probe["row"]))
    runs = run_starts.search_sorted(probe["seg"], side="right") - 1
    probe = probe.with_columns(run=runs, t=pl.col("naive") - shift.gather(runs))
    # The clock before each segment: the latest time of every event before it, parsed lines' and probes'.
    latest = probe.group_by("seg").agg(pl.col("t").max()).sort("seg")
    stamped = [(k, max(times)) for k, _tie, events in parsed
               if (times := [epoch(e.ts) for e in events if e.ts is not None])]
    before = [float("-inf")] * (int(latest["seg"].max() or 0) + 1)  # type: ignore[arg-type]
    now, i = clock.last_t, 0
    for seg, t in latest.iter_rows():
        while i < len(stamped) and stamped[i][0] <= seg:  # parsed row k comes before segment k
            now = max(now, stamped[i][1])
            i += 1
        before[seg] = now
        now = max(now, t)
    at = pl.max_horizontal(pl.Series(before, dtype=pl.Float64).gather(probe["seg"]),
                           pl.col("t").cum_max().over("seg"))
    part = pl.lit(1)
    if until is not None:
        part = pl.when(at > until).then(2).otherwise(part)
    if since is not None:
        part = pl.when(at < since).then(0).otherwise(part)
    probe = probe.with_columns(part=part)
    tabulate(table, src, probe.filter(pl.col("part") == 1), [off for _, off in offsets])
    per_part = probe.group_by("seg", "part").agg(pl.len().alias("n"), pl.col("t").max(), pl.col("row").max(),
                                                 pl.col("run").first()).sort("seg", "part")
    return [(seg + 0.5, 1 + part, [AccessCount(base + row + 1, _wall(t, offsets[run][1]), n)])
            for seg, part, n, t, row, run in per_part.iter_rows()]


def _wall(t: float, offset: timedelta | None) -> datetime | None:
    """The time a line showed, from its epoch and its clock's offset. Built on the wall clock itself, not through
    UTC: 9999-12-31 23:00 three hours west of UTC is a time a line can show, its UTC (year 10000) is not one
    datetime can hold. None past year 9999 or before year 1 (the count still counts)."""
    try:
        wall = _EPOCH + timedelta(seconds=t + (offset.total_seconds() if offset is not None else 0.0))
    except OverflowError:
        return None
    return wall if offset is None else wall.replace(tzinfo=zone(offset))


def _vllm_batches(parser: VllmParser, src: int, ready: _VllmWindow, base: int, table: ProbeTable,
                  ring: Ring | None) -> Iterator[list[Event]]:
    """The window's events in file order; see the module's note on vLLM."""
    lines, probes, split, first_row = ready.lines, ready.probes, ready.split, ready.first_row
    for proc in probes["proc"].drop_nulls().unique().to_list():
        parser.saw_process(proc)
    parsed: list[Keyed] = []
    opened: list[Keyed] = []
    opened_rows: list[int] = []
    seg_ts: list[float | None] = []
    seg_wall: list[datetime | None] = []

    def settle(seg: int) -> None:
        """Before segment `seg`'s probes: the time they take, and its first probe parsed if it would act."""
        ts = parser.last_ts
        seg_ts.append(epoch(ts) if ts is not None else None)
        seg_wall.append(ts)
        row = first_row.get(seg)
        if row is not None and parser.access_acts():
            events = _parse(parser, base + row + 1, cast(str, lines[row]), ring) or []
            opened.append((seg + 0.25, 0, events))
            opened_rows.append(row)

    for k, (row, raw) in enumerate(zip(split.rows, split.texts, strict=True), 1):
        settle(k - 1)
        events = _parse(parser, base + row + 1, raw, ring)
        if events is not None:
            parsed.append((k, 0, events))
    settle(len(split.rows))
    if opened_rows:
        probes = probes.filter(~pl.col("row").is_in(opened_rows))
    yield from in_file_order(parsed, opened, _vllm_counts(probes, seg_ts, seg_wall, base, src, table))


def _vllm_counts(probes: pl.DataFrame, seg_ts: list[float | None], seg_wall: list[datetime | None], base: int,
                 src: int, table: ProbeTable) -> list[Keyed]:
    """An AccessCount after each segment with probes, at the time its probes take (the last record's, as the
    per-line reader gives each access line): a count without a time did not move the file's clock, so a
    later line whose clock went back was merged before another file's events that the per-line reader put
    first (found by the fuzz campaign, run 5)."""
    if not len(probes):
        return []
    times = pl.Series("t", seg_ts, dtype=pl.Float64)
    probe = probes.with_columns(t=times.gather(probes["seg"]), run=pl.lit(0), latency=pl.lit(None, pl.Float64))
    tabulate(table, src, probe, [None])
    per_seg = probe.group_by("seg").agg(pl.len().alias("n"), pl.col("row").max()).sort("seg")
    return [(seg + 0.5, 1, [AccessCount(base + row + 1, seg_wall[seg], n)]) for seg, n, row in per_seg.iter_rows()]
