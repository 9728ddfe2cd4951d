"""`ietop compare`: before and after a tuning change (issue 23, item 3).

The sides: two logs (`BEFORE AFTER`), one log cut at a time (`--split-at TIME`: before is every event before
TIME, after every event from TIME on), or one log's server runs (`--by-run`: each run from the line that opens
it, as parsers.text.runs recognises one, to the next run's; with more than two runs each run is compared with
the one before it). Each side is analyzed by `ietop.analyze.report.Analysis`, the pipeline `ietop analyze` runs,
with analyze's `--since/--until` window for the cut ones; `ietop.analyze.compare` sets the sides side by side.
Exit codes as everywhere: 0, 1 when a log cannot be read or parsed, 2 for a usage error (one line).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import datetime, timezone
from itertools import chain, pairwise
from typing import TYPE_CHECKING, Any

from ietop.cli_args import EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, failure_line, say_repeated
from ietop.cli_config import add_config_flags
from ietop.cli_help import CONFIG_NOTE, Formatter

if TYPE_CHECKING:
    from ietop.analyze.compare import Side

OPENING_LINES = 64
"""A run's opening lines lie this close together (Ollama's `server config` and `Listening on` a few lines apart):
two different opening texts closer than this open one run; the same text twice always opens two."""

EPILOG = f"""\
examples:
  ietop compare before.log after.log
  ietop compare --json server.log.1.gz server.log > compare.json
  ietop compare --split-at 2026-11-28T14:03:30Z ietop/demo/incident.log
  ietop compare --by-run ~/.ollama/logs/server.log        # each restart against the run before it

{CONFIG_NOTE}"""


class UsageError(Exception):
    """One line for stderr; exit 2."""


def register(sub: Any) -> None:
    """Add the `compare` parser to the CLI's subparsers (`sub`: argparse's _SubParsersAction)."""
    cp = sub.add_parser("compare", help="before and after a tuning change: two logs, a split, or server runs",
                        epilog=EPILOG, formatter_class=Formatter,
                        description="Compare two periods side by side, per model and overall: e2e and TTFT "
                                    "percentiles, cold loads, evictions, truncations, output tokens, decode rate, "
                                    "why the latency moved, and the configuration differences with their lines.")
    cp.add_argument("paths", nargs="+", metavar="PATH",
                    help="BEFORE AFTER: two logs (plain, .gz or .zst); one log with --split-at or --by-run")
    how = cp.add_mutually_exclusive_group()
    how.add_argument("--split-at", metavar="TIME",
                     help="one log: before is what precedes TIME (ISO-8601), after the rest")
    how.add_argument("--by-run", action="store_true",
                     help="one log: each server start is a side, compared with the run before it")
    cp.add_argument("--json", action="store_true", help="print the ietop.compare/1 JSON document")
    cp.add_argument("--engine", choices=["ollama", "vllm", "mlx", "proxy"], help="skip detection")
    add_config_flags(cp, top=False)
    cp.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ietop.pipeline.ingest import FormatError, SourceError
    from ietop.sources.inputs import readable

    try:
        _check_usage(args)
        with ExitStack() as stack:
            sides = [stack.enter_context(readable([p])) for p in args.paths]
            for inputs in sides:
                say_repeated(inputs.repeated)
            reads = [(inp.read[0], inp.names) for inp in sides]
            doc = _document(args, reads)
    except UsageError as exc:
        print(f"ietop: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (SourceError, FormatError, OSError) as exc:
        print(failure_line(exc), file=sys.stderr)
        return EXIT_RUNTIME
    if args.json:
        from ietop.analyze.spool import json_dumps
        from parsers.text.inert import escape_json

        sys.stdout.write(escape_json(json_dumps()(doc)) + "\n")
    else:
        from ietop.analyze.compare_text import render

        sys.stdout.write(render(doc))
    sys.stdout.flush()
    return EXIT_OK


def _check_usage(args: argparse.Namespace) -> None:
    from ietop.sources.inputs import path_problem

    one = args.split_at is not None or args.by_run
    flag = "--split-at" if args.split_at is not None else "--by-run"
    if one and len(args.paths) != 1:
        raise UsageError(f"{flag} cuts one log into sides: give one PATH, not {len(args.paths)}")
    if not one and len(args.paths) != 2:
        raise UsageError(f"give two logs, BEFORE and AFTER (got {len(args.paths)}), or one log with --split-at "
                         "TIME or --by-run")
    if args.split_at is not None:
        _time(args.split_at)
    for path in args.paths:
        if (problem := path_problem(path)) is not None:
            raise UsageError(problem)


def _time(text: str) -> float:
    from ietop.pipeline.ingest import parse_time_arg

    try:
        return parse_time_arg(text)
    except ValueError as exc:
        raise UsageError(f"--split-at: {exc}") from None


def iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, tz=timezone.utc).isoformat()


def _document(args: argparse.Namespace, reads: list[tuple[str, dict[str, str]]]) -> dict[str, Any]:
    from ietop.analyze.compare import compare, document

    shown = [names.get(path, path) for path, names in reads]
    if args.split_at is not None:
        t = _time(args.split_at)
        (path, names), name = reads[0], shown[0]
        before = _side(path, names, args.engine, {"label": "before", "paths": [name], "start": None, "end": iso(t)},
                       end=t)
        after = _side(path, names, args.engine, {"label": "after", "paths": [name], "start": iso(t), "end": None},
                      start=t)
        spans = [s for s in (before[1], after[1]) if s is not None]
        if before[1] is None or after[1] is None:
            span = f" ({iso(min(s[0] for s in spans))} – {iso(max(s[1] for s in spans))})" if spans else ""
            raise UsageError(f"--split-at {args.split_at} is outside the log's span{span}: one side would be empty")
        return document("split_at", iso(t), [compare(before[0], after[0])])
    if args.by_run:
        path, names = reads[0]
        runs = run_bounds(path, args.engine)
        if len(runs) < 2:
            raise UsageError(f"--by-run: {shown[0]} holds {len(runs)} server run(s): nothing to compare")
        sides = [_side(path, names, args.engine, {"label": f"run {i}", "paths": [shown[0]], "run": i, "run_line": line,
                                                  "start": iso(start), "end": iso(end)}, start, end)[0]
                 for i, (line, start, end) in enumerate(runs, 1)]
        return document("by_run", None, [compare(a, b) for a, b in pairwise(sides)])
    before = _side(*reads[0], args.engine, {"label": "before", "paths": [shown[0]], "start": None, "end": None})
    after = _side(*reads[1], args.engine, {"label": "after", "paths": [shown[1]], "start": None, "end": None})
    return document("paths", None, [compare(before[0], after[0])])


def _side(path: str, names: dict[str, str], engine: str | None, where: dict[str, Any], start: float | None = None,
          end: float | None = None) -> tuple[Side, tuple[float, float] | None]:
    """One side through analyze's pipeline, and the span of its records' times (None: it holds none). `where`'s
    `start` is inclusive and `end` exclusive: analyze's --until keeps events at TIME, so the window ends just
    before it (the next float down) and an event at the boundary belongs to the later side only."""
    from ietop.analyze.compare import side
    from ietop.analyze.report import Analysis

    until = None if end is None else math.nextafter(end, -math.inf)
    an = Analysis([path], engine, start, until, names=names)
    try:
        span, d = an.per_model.span(), an.digest
        if d.first_t <= d.last_t:
            span = (d.first_t, d.last_t) if span is None else (min(span[0], d.first_t), max(span[1], d.last_t))
        config = an.store.settings.as_dict(an.source_paths)
        result = side(where, an.spool.records("request"), an.spool.records("unload"), config)
    finally:
        an.close()
    return result, span


def run_bounds(path: str, engine: str | None) -> list[tuple[int | None, float | None, float | None]]:
    """(opening line, start, end) of each server run in one log, in order: a run starts at its opening line's time
    and ends where the next starts (None: the log's start or end). Lines before the first opening that carry a time
    are a run too (the log began mid-run), with no opening line."""
    from ietop.model.store import Store
    from ietop.pipeline.ingest import file_events, open_inputs
    from parsers.events import Unparsed
    from parsers.text.runs import RUN_OPENERS

    inp = open_inputs(Store(), [path], engine)[0]
    needles = [n.decode() for n in RUN_OPENERS.get(inp.engine, ())]
    openings: list[int] = []
    seen: set[str] = set()
    last = -OPENING_LINES
    for n, raw in enumerate(_texts(path), 1):
        hit = next((needle for needle in needles if needle in raw), None)
        if hit is None:
            continue
        # Ollama's `server config` then `Listening on` open one run; the same opening text again opens the next.
        if hit in seen or n - last >= OPENING_LINES:
            openings.append(n)
            seen = set()
        seen.add(hit)
        last = n
    found: list[tuple[int | None, float | None]] = []
    timed_before = False
    pending = iter(openings)
    want = next(pending, None)
    for t, _src, _seq, event in file_events(inp):
        if want is None:
            break
        if event.line < want:
            # What precedes the first opening is a run of its own only if the engine said something timed there.
            timed_before = timed_before or (not found and event.ts is not None and not isinstance(event, Unparsed))
            continue
        found.append((want, t))
        while want is not None and want <= event.line:  # an opening line that gave no event of its own
            want = next(pending, None)
    if timed_before or not found:
        found.insert(0, (None, None))
    ends: list[float | None] = [s for _, s in found[1:]]
    return [(line, start, end) for (line, start), end in zip(found, [*ends, None], strict=True)]


def _texts(path: str) -> Iterator[str]:
    """The log's lines numbered as the parsers number them (the same framing: ietop.pipeline.ingest.file_events)."""
    from ietop.sources.files import read_chunks
    from parsers.text.framing import split_texts

    return chain.from_iterable(split_texts(read_chunks(path)))
