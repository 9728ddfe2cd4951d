"""`ietop export`: what ietop derives, served as Prometheus metrics for fleets (issue 24; README "ietop export").

The dashboard's flags (`--ollama/--vllm/--mlx URL`, `--log`, `--journal`, `--docker`, `--proxy`, `--interval`; the
config file's top-level targets too), headless, plus where to listen. Exit codes as everywhere: 0 after SIGTERM or
SIGINT, 1 when it cannot listen or a source cannot be opened, 2 for a usage error (one line).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ietop.cli_args import EXIT_RUNTIME, EXIT_USAGE
from ietop.cli_config import add_config_flags
from ietop.cli_help import CONFIG_NOTE, Formatter
from ietop.cli_live import add_live_flags

DEFAULT_LISTEN = "127.0.0.1:9464"
"""9464: the port OpenTelemetry's Prometheus exporter uses by convention; free on a typical inference host."""

EPILOG = f"""\
examples:
  ietop export                                  # the engines on this host, at http://127.0.0.1:9464/metrics
  ietop export --log ollama:/var/log/ollama/server.log --ollama http://127.0.0.1:11434
  ietop export --listen 0.0.0.0:9464 --allow-remote --vllm http://127.0.0.1:8000
  ietop export --log ollama:server.log --listen 127.0.0.1:0      # a saved log's last run; any free port

{CONFIG_NOTE}"""


def register(sub: Any) -> None:
    """Add the `export` parser (`sub`: argparse's _SubParsersAction)."""
    ep = sub.add_parser("export", help="serve what ietop derives as Prometheus metrics (headless, for fleets)",
                        epilog=EPILOG, formatter_class=Formatter,
                        description="Watch the same sources as the dashboard, without a screen, and serve "
                                    "/metrics for Prometheus: residency, loads and evictions with their cause, "
                                    "requests, TTFT/ITL histograms, truncations, setting mismatches, hints. "
                                    "Counters are totals since each engine's current run began.")
    ep.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                    help=f"where to serve /metrics (default {DEFAULT_LISTEN}; loopback only unless --allow-remote)")
    ep.add_argument("--allow-remote", action="store_true", help="allow listening on a non-loopback address")
    add_live_flags(ep, "what to watch (as for the dashboard)", theme=False)
    add_config_flags(ep, top=False)
    ep.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ietop.cli_live import live_plan
    from ietop.sources.listen import parse_listen

    try:
        host, port = parse_listen(args.listen, allow_remote=args.allow_remote)
    except ValueError as exc:
        print(f"ietop: error: --listen: {exc}", file=sys.stderr)
        return EXIT_USAGE
    plan = live_plan(args)
    if plan is None:
        return EXIT_USAGE
    from ietop.export.serve import Exporter, serve
    from ietop.pipeline.ingest import FormatError, SourceError

    try:
        exporter = Exporter(plan, args.interval)
    except ValueError as exc:
        print(f"ietop: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (SourceError, FormatError) as exc:
        print(f"ietop: error: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    try:
        return serve(exporter, host, port)
    except OSError as exc:
        print(f"ietop: error: cannot listen on {args.listen}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_RUNTIME
