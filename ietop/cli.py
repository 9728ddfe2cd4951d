"""The `ietop` command line.

Exit codes (DESIGN.md): 0 ok, 1 runtime failure, 2 usage error. Every failure is one clear line on
stderr, never a traceback. Heavy modules (rich, polars, the dashboard) are imported inside the commands
that need them so `ietop --help` and `ietop analyze --json` start fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING

from ietop import __version__
from ietop.cli_args import EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, Parser, failure_line, say_repeated, speed
from ietop.cli_budget import register as register_budget
from ietop.cli_compare import register as register_compare
from ietop.cli_completion import SHELLS
from ietop.cli_config import DASHBOARD_COMMANDS, ConfigError, add_config_flags, add_theme_flag, parse
from ietop.cli_export import register as register_export
from ietop.cli_help import help_for
from ietop.cli_live import add_live_flags, live_plan, paths_problem
from ietop.runtime import tune_gc

if TYPE_CHECKING:
    from parsers.events import ProxyRequest

def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="ietop", description="top for local LLM inference engines (Ollama, MLX, vLLM).",
                     **help_for(None))
    parser.add_argument("--version", action="version", version=f"ietop {__version__}")
    add_live_flags(parser)
    add_config_flags(parser, top=True)
    sub = parser.add_subparsers(dest="command", parser_class=Parser)

    an = sub.add_parser("analyze", help="report on saved engine logs (plain, .gz or .zst)", **help_for("analyze"),
                        description="Analyze saved logs: requests, loads, evictions, truncations, "
                                    "configured vs effective settings, latency percentiles.")
    an.add_argument("paths", nargs="+", metavar="PATH", help="log files; several are merged by time")
    out = an.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the ietop.analyze/2 JSON document")
    an.add_argument("--csv", metavar="DIR", help="write one CSV table per entity into DIR")
    an.add_argument("--parquet", metavar="DIR", help="write one Parquet table per entity into DIR")
    an.add_argument("--since", metavar="TIME", help="ignore events before TIME (ISO-8601)")
    an.add_argument("--until", metavar="TIME", help="ignore events after TIME (ISO-8601)")
    an.add_argument("--engine", choices=["ollama", "vllm", "mlx", "proxy"],
                    help="skip detection: the logs are this engine's (proxy: an ietop proxy --jsonl file)")
    an.add_argument("--all-requests", action="store_true",
                    help="list every request, successful health checks too (by default they are counted "
                         "per path and status in `probes`; this reads every line in Python: slower)")
    an.add_argument("--include-prompts", action="store_true",
                    help="include prompt text found in DEBUG logs (omitted by default: it is private)")

    px = sub.add_parser("proxy", help="pass-through proxy that measures exact TTFT, ITL and tokens per request",
                        **help_for("proxy"),
                        description="Forward an engine's API unchanged and measure every inference request "
                                    "(TTFT, ITL, prompt/output tokens from the engine's own usage fields).")
    px.add_argument("--listen", default="127.0.0.1:11435", metavar="HOST:PORT",
                    help="address to listen on (default 127.0.0.1:11435; loopback only unless --allow-remote)")
    px.add_argument("--upstream", required=True, metavar="URL",
                    help="the engine, e.g. http://127.0.0.1:11434 (Ollama), :8000 (vLLM), :8080 (MLX)")
    px.add_argument("--jsonl", metavar="PATH", help="append each measurement as one JSON line (ietop analyze reads it)")
    px.add_argument("--allow-remote", action="store_true", help="allow listening on a non-loopback address")
    px.add_argument("--timeout", type=float, default=600.0, metavar="S", help="upstream timeout in seconds (600)")
    px.add_argument("--quiet", action="store_true", help="do not print a line per measured request")

    rp = sub.add_parser("replay", help="the live dashboard driven by saved logs", **help_for("replay"),
                        description="Replay saved logs through the live pipeline: p pauses, n steps, +/- speed.")
    rp.add_argument("paths", nargs="+", metavar="PATH", help="log files (plain, .gz, .zst); merged by time")
    rp.add_argument("--speed", type=speed, default=1.0, metavar="N",
                    help="N times real time (default 1; 0 = as fast as possible); silences over 3 s are skipped")
    rp.add_argument("--engine", choices=["ollama", "vllm", "mlx", "proxy"], help="skip detection")
    rp.add_argument("--paused", action="store_true", help="start paused (step with n)")
    rp.add_argument("--until", metavar="TIME", help="replay up to TIME (ISO-8601) and pause there (p plays on)")

    dm = sub.add_parser("demo", help="the dashboard replaying a bundled incident (no engine needed)",
                        **help_for("demo"),
                        description="Replay the bundled incident (built from real Ollama log lines) in the "
                                    "dashboard.")
    dm.add_argument("--speed", type=speed, default=10.0, metavar="N", help="replay speed (default 10)")
    dm.add_argument("--report", action="store_true", help="print the analyze report of the incident instead")
    for command in (rp, dm):
        add_theme_flag(command, top=False)
    for command in (an, px, rp, dm):
        add_config_flags(command, top=False)
    cp = sub.add_parser("completion", help="print a shell completion script", **help_for("completion"),
                        description="Print the completion script for SHELL (generated from these parsers).")
    cp.add_argument("shell", choices=SHELLS, metavar="SHELL", help=f"one of {', '.join(SHELLS)}")
    register_compare(sub)
    register_budget(sub)
    register_export(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:  # with the defaults of the config file (ietop/cli_config.py)
        args = parse(parser, argv, lambda a: a.command in DASHBOARD_COMMANDS and not getattr(a, "report", False))
    except ConfigError as exc:
        print(f"ietop: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.command == "completion":
        from ietop.cli_completion import script

        print(script(build_parser(), args.shell), end="")
        return EXIT_OK
    tune_gc(raise_threshold=args.command in ("analyze", "compare", "proxy"))  # the dashboard less: ietop/runtime.py
    try:
        if (handler := getattr(args, "handler", None)) is not None:  # a command in a module of its own
            return int(handler(args))
        if args.command == "analyze":
            return _analyze(args)
        if args.command == "demo":
            # The 15-minute window: the incident's requests stay in view after its last minutes of quiet.
            return _report(demo_paths()) if args.report else _replay(demo_paths(), args.speed, None, "ietop demo",
                                                                     window_index=2, theme=args.theme)
        if args.command == "replay":
            return _replay(args.paths, args.speed, args.engine, "ietop replay", args.paused, args.until,
                           theme=args.theme)
        if args.command == "proxy":
            return _proxy(args)
        return _live(args)
    except KeyboardInterrupt:
        print("ietop: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `ietop analyze --json | head`: the reader went away; not an error worth a traceback.
        sys.stderr.close()
        return EXIT_OK


def _analyze(args: argparse.Namespace) -> int:
    from ietop.pipeline.ingest import parse_time_arg

    try:
        since = parse_time_arg(args.since) if args.since else None
        until = parse_time_arg(args.until) if args.until else None
    except ValueError as exc:
        print(f"ietop: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if since is not None and until is not None and since > until:
        print(f"ietop: error: --since {args.since} is after --until {args.until}: nothing could be in the window",
              file=sys.stderr)
        return EXIT_USAGE
    if (problem := paths_problem(args.paths)) is not None:
        print(f"ietop: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    from ietop.sources.inputs import readable

    with readable(args.paths) as inputs:
        say_repeated(inputs.repeated)
        return _analyze_inputs(args, inputs.read, inputs.names, since, until)


def _analyze_inputs(args: argparse.Namespace, paths: list[str], names: dict[str, str], since: float | None,
                    until: float | None) -> int:
    from ietop.analyze.report import Analysis
    from ietop.pipeline.ingest import FormatError, SourceError

    # Progress where someone watches: stderr a terminal, and stdout not the JSON document nor piped away.
    watched = sys.stderr.isatty() and not args.json and (sys.stdout.isatty() or args.csv or args.parquet)
    try:
        if watched:
            from ietop.analyze.progress import ReadProgress, plain_size

            with ReadProgress(plain_size(paths)) as progress:
                an = Analysis(paths, args.engine, since, until, args.include_prompts, args.all_requests,
                              progress, names)
        else:
            an = Analysis(paths, args.engine, since, until, args.include_prompts, args.all_requests, names=names)
    except (SourceError, FormatError, OSError) as exc:
        print(failure_line(exc), file=sys.stderr)
        return EXIT_RUNTIME
    try:
        if args.csv or args.parquet:
            from ietop.analyze.frames import write_tables

            for directory, fmt in ((args.csv, "csv"), (args.parquet, "parquet")):
                if directory:
                    written = write_tables(an, directory, fmt)
                    print(f"wrote {len(written)} {fmt} tables to {directory}", file=sys.stderr)
        if args.json:
            an.write_json(sys.stdout)
            sys.stdout.flush()
        elif not (args.csv or args.parquet):
            from ietop.analyze.text import print_report

            print_report(an)
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            raise
        print(failure_line(exc), file=sys.stderr)
        return EXIT_RUNTIME
    finally:
        an.close()
    return EXIT_OK


def _proxy(args: argparse.Namespace) -> int:
    from ietop.sources.proxy import JsonlError, parse_listen, run_proxy

    try:
        parse_listen(args.listen, allow_remote=args.allow_remote)
    except ValueError as exc:
        print(f"ietop: error: {exc} (use --allow-remote to listen beyond this machine)", file=sys.stderr)
        return EXIT_USAGE

    def show(e: ProxyRequest) -> None:
        print(proxy_line(e), file=sys.stderr, flush=True)

    def ready() -> None:
        print(f"ietop proxy: listening on http://{args.listen} → {args.upstream}"
              + (f", measurements to {args.jsonl}" if args.jsonl else ""), file=sys.stderr)

    try:
        run_proxy(args.listen, args.upstream, args.jsonl, None if args.quiet else show,
                  allow_remote=args.allow_remote, timeout=args.timeout, on_ready=ready)
    except JsonlError as exc:  # the file, not the request: a runtime failure
        print(f"ietop: error: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    except ValueError as exc:
        print(f"ietop: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"ietop: error: cannot listen on {args.listen}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_RUNTIME
    return EXIT_OK


def proxy_line(e: ProxyRequest) -> str:
    """`ietop proxy`'s line per measured request. Plain text: model names, paths and errors come from the
    network: no markup, no control character reaches the terminal (parsers.text.inert)."""
    from parsers.text.inert import visible

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v * 1000:.0f}ms"

    def n(v: int | None) -> str:
        return "-" if v is None else str(v)

    err = f" error={visible(e.error)}" if e.error else ""
    return (f"{visible(e.method)} {visible(e.path)} {e.status or '-'} model={visible(e.model or '-')} "
            f"ttft={ms(e.ttft_s)} itl={ms(e.itl_s)} e2e={ms(e.e2e_s)} prompt={n(e.prompt_tokens)} "
            f"out={n(e.output_tokens)}{err}")


def demo_paths() -> list[str]:
    """The bundled demo incident (package data)."""
    root = resources.files("ietop") / "demo"
    return sorted(str(p) for p in root.iterdir() if p.name.endswith(".log"))


def _replay(paths: Sequence[str], speed: float, engine: str | None, title: str, paused: bool = False,
            until_text: str | None = None, window_index: int = 1, theme: str | None = None) -> int:
    from ietop.pipeline.ingest import FormatError, SourceError, parse_time_arg

    try:
        until = parse_time_arg(until_text) if until_text else None
    except ValueError as exc:
        print(f"ietop: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if (problem := paths_problem(paths)) is not None:
        print(f"ietop: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    from ietop.sources.inputs import readable
    from ietop.tui.run import replay_app

    # The copies of pipes live as long as the dashboard: `J` (back) reads the logs again from the start.
    with readable(paths) as inputs:
        say_repeated(inputs.repeated)
        try:
            app = replay_app(inputs.read, speed, engine, title=title, paused=paused, until=until,
                             window_index=window_index, names=inputs.names, theme=theme)
        except (SourceError, FormatError) as exc:
            print(f"ietop: error: {exc}", file=sys.stderr)
            return EXIT_RUNTIME
        app.run()
    return app.return_code or EXIT_OK


def _live(args: argparse.Namespace) -> int:
    from ietop.pipeline.ingest import FormatError, SourceError

    p = live_plan(args)
    if p is None:
        return EXIT_USAGE
    from ietop.tui.run import live_app

    try:
        app = live_app(p, args.interval, args.theme)
    except ValueError as exc:  # a bad --proxy address
        print(f"ietop: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (SourceError, FormatError) as exc:
        print(f"ietop: error: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    app.run()
    return app.return_code or EXIT_OK


def _report(paths: Sequence[str]) -> int:
    from ietop.analyze.report import Analysis
    from ietop.analyze.text import print_report

    an = Analysis(paths)
    try:
        print_report(an)
    finally:
        an.close()
    return EXIT_OK
