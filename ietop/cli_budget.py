"""`ietop budget`: which models fit together and what a swap costs (issue 25; the seeds' step 01).

Reads logs (`PATH…`, as `analyze` reads them) and/or asks Ollama servers (`--ollama URL`) through endpoints that
never load a model, then states usable memory, each model's footprint with its evidence, every pair, and the
rules. Exit codes as everywhere: 0, 1 when a log cannot be read or no server answers, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from ietop.cli_args import EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, failure_line, say_repeated
from ietop.cli_config import add_config_flags
from ietop.cli_help import CONFIG_NOTE, Formatter

GIB = 1024**3
LIVE_TIMEOUT_S = 5.0

EPILOG = f"""\
examples:
  ietop budget ~/.ollama/logs/server.log
  ietop budget --ollama http://127.0.0.1:11434
  ietop budget server.log --ollama http://127.0.0.1:11434 --reserve 8
  ietop budget --memory 78 --json server.log > budget.json

{CONFIG_NOTE}"""


def register(sub: Any) -> None:
    """Add the `budget` parser to the CLI's subparsers (`sub`: argparse's _SubParsersAction)."""
    bp = sub.add_parser("budget", help="which models fit together, and what a swap costs in seconds",
                        epilog=EPILOG, formatter_class=Formatter,
                        description="The memory budget: usable model memory; each model's weights, KV cache and "
                                    "total with the log line or endpoint each number rests on; for every pair "
                                    "whether they fit together (the margin) and what a swap costs (the median "
                                    "of the measured loads); and the rules in plain words.")
    bp.add_argument("paths", nargs="*", metavar="PATH", help="logs to read (plain, .gz or .zst; - for stdin)")
    bp.add_argument("--ollama", action="append", default=[], metavar="URL",
                    help="also ask this Ollama server (/api/ps, /api/tags: neither loads a model); repeatable")
    bp.add_argument("--memory", type=_gib, metavar="GiB",
                    help="usable model memory in GiB, instead of what the log or this machine says")
    bp.add_argument("--reserve", type=_gib, metavar="GiB",
                    help="GiB to keep for the OS and other services (taken off the usable memory)")
    bp.add_argument("--json", action="store_true", help="print the ietop.budget/1 JSON document")
    bp.add_argument("--engine", choices=["ollama", "vllm", "mlx"], help="skip detection of the logs' engine")
    add_config_flags(bp, top=False)
    bp.set_defaults(handler=run)


def _gib(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of GiB: {text!r}") from None
    if not math.isfinite(value) or value < 0 or value > 1 << 20:
        raise argparse.ArgumentTypeError(f"GiB must be between 0 and {1 << 20}: {text!r}")
    return round(value * GIB)


def run(args: argparse.Namespace) -> int:
    from ietop.cli_live import paths_problem  # the same one-line check analyze makes

    if not args.paths and not args.ollama:
        print("ietop: error: give a log PATH, an --ollama URL, or both", file=sys.stderr)
        return EXIT_USAGE
    if (problem := paths_problem(args.paths)) is not None:
        print(f"ietop: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    for url in args.ollama:
        if not url.startswith(("http://", "https://")):
            print(f"ietop: error: --ollama {url}: give a URL (http://host:port)", file=sys.stderr)
            return EXIT_USAGE
    from ietop.pipeline.ingest import FormatError, SourceError
    from ietop.sources.inputs import readable

    try:
        with readable(args.paths) as inputs:
            say_repeated(inputs.repeated)
            budget, paths = _budget(args, inputs.read, inputs.names)
    except (SourceError, FormatError, OSError) as exc:
        print(failure_line(exc), file=sys.stderr)
        return EXIT_RUNTIME
    except _NoAnswer as exc:
        print(f"ietop: error: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    from ietop.analyze.budget_doc import document, text
    from parsers.text.inert import escape_json, visible

    if args.json:
        from ietop.analyze.spool import json_dumps

        sys.stdout.write(escape_json(json_dumps()(document(budget, paths))) + "\n")
    else:
        # Model names and paths come from logs: control characters are shown, never sent to the terminal.
        sys.stdout.write("".join(visible(line) + "\n" for line in text(budget, paths).splitlines()))
    sys.stdout.flush()
    return EXIT_OK


class _NoAnswer(Exception):
    """No --ollama server answered: one line, exit 1."""


def _budget(args: argparse.Namespace, read: list[str], names: dict[str, str]) -> tuple[Any, list[str]]:
    from ietop.model.budget import build
    from ietop.model.budget_inputs import gather
    from ietop.model.store import Store
    from ietop.model.store_records import ListSink
    from ietop.pipeline.bulk.stream import bulk_file_events, foldable
    from ietop.pipeline.ingest import file_events, run_files

    sink = ListSink()
    store = Store(sink)
    if read:
        from ietop.model.probes import ProbeTable

        folded = ProbeTable()

        def stream(inp: Any) -> Any:
            return bulk_file_events(inp, folded) if foldable(inp) else file_events(inp)

        run_files(store, read, args.engine, stream=stream, names=names)
    endpoints = _ask(args.ollama, logs=bool(read)) if args.ollama else None
    loads = sink.records.get("load", [])
    unloads = sink.records.get("unload", [])
    # This machine's memory describes a live server on it, not a log copied from another machine.
    here = not read or any(_loopback(url) for url in args.ollama)
    inputs = gather(store, loads, unloads, endpoints=endpoints, machine=_machine() if here else None,
                    memory=args.memory, reserve=args.reserve)
    paths = [names.get(s.path, s.path) for s in store.sources]
    return build(inputs), paths


def _ask(urls: list[str], logs: bool) -> Any:
    """What each --ollama server's `/api/ps` and `/api/tags` say (neither loads a model: see
    ietop.model.budget_inputs.read_endpoints, which cites Ollama's handlers)."""
    from ietop.model.budget_inputs import read_endpoints
    from ietop.sources.http import get_once

    bases = [url.rstrip("/") for url in urls]
    got = get_once([f"{base}{path}" for base in bases for path in ("/api/ps", "/api/tags")], LIVE_TIMEOUT_S)
    answers = [(base, ps.status, ps.body, ps.error if ps.status is None else None, tags.status, tags.body)
               for base, ps, tags in zip(bases, got[0::2], got[1::2], strict=True)]
    endpoints, failures = read_endpoints(answers)
    if failures and len(failures) == len(urls) and not logs:
        raise _NoAnswer("no Ollama server answered: " + "; ".join(failures))
    for failure in failures:
        print(f"ietop: {failure}; left out of the budget", file=sys.stderr)
    return endpoints


def _loopback(url: str) -> bool:
    from urllib.parse import urlsplit

    from ietop.sources.listen import is_loopback

    return is_loopback(urlsplit(url).hostname or "")


def _machine() -> Any:
    import platform

    from ietop.model.budget_inputs import machine
    from ietop.sources.gpu import gpu_totals
    from ietop.sources.host import gpu_wired_limit_bytes, host_memory

    apple = sys.platform == "darwin" and platform.machine() == "arm64"
    return machine(gpu_totals(), host_memory().total, gpu_wired_limit_bytes() if apple else None, apple)
