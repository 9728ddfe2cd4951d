"""What the dashboard and `ietop export` share on the command line: the flags naming what to watch, the plan built
from them, and the one-line check of a log path (analyze, compare and budget make it too)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ietop.cli_args import interval
from ietop.cli_config import add_theme_flag

if TYPE_CHECKING:
    from ietop.pipeline.discover import Plan


def add_live_flags(parser: argparse.ArgumentParser, group: str = "live dashboard (`ietop` with no command)",
                    theme: bool = True) -> None:
    live = parser.add_argument_group(group)
    live.add_argument("--ollama", action="append", default=[], metavar="URL",
                      help="poll this Ollama (repeatable; default $OLLAMA_HOST or 127.0.0.1:11434)")
    live.add_argument("--vllm", action="append", default=[], metavar="URL",
                      help="poll this vLLM server (repeatable; default 127.0.0.1:8000)")
    live.add_argument("--mlx", action="append", default=[], metavar="URL",
                      help="poll this mlx_lm.server (repeatable; default 127.0.0.1:8080)")
    live.add_argument("--log", action="append", default=[], metavar="[ENGINE:]PATH",
                      help="follow this log (repeatable; - is stdin); the engine is detected unless given")
    live.add_argument("--journal", action="append", default=[], metavar="UNIT",
                      help="follow a systemd unit's journal (journalctl -f -o json)")
    live.add_argument("--docker", action="append", default=[], metavar="CONTAINER",
                      help="follow a container's log (docker logs -f -t)")
    live.add_argument("--interval", type=interval, default=2.0, metavar="S", help="seconds between polls (default 2)")
    live.add_argument("--proxy", metavar="[HOST:]PORT",
                      help="also run `ietop proxy` on this port (127.0.0.1) and show its exact measurements")
    live.add_argument("--proxy-upstream", metavar="URL",
                      help="where --proxy forwards to (default: the first engine polled)")
    if theme:
        add_theme_flag(live, top=True)


def live_plan(args: argparse.Namespace) -> Plan | None:
    """What `ietop` and `ietop export` watch, from their flags (discovery when none); None after a one-line error
    for a log that can never be read."""
    from ietop.pipeline.discover import plan
    from ietop.sources.inputs import path_problem

    p = plan(args.ollama, args.vllm, args.mlx, args.log, args.journal, args.docker, proxy=args.proxy,
             proxy_upstream=args.proxy_upstream)
    for engine, path in p.logs:
        problem = path_problem(path)
        missing = problem is not None and problem.endswith(": no such file")
        if problem is None or (missing and engine):  # a log named with its engine is waited for
            continue
        hint = f" (to wait for it, name the engine: --log ollama:{path})" if missing else ""
        print(f"ietop: error: {problem}{hint}", file=sys.stderr)
        return None
    return p


def paths_problem(paths: Sequence[str]) -> str | None:
    """The first path that cannot be read, in one line (before any work, and before a screen opens)."""
    from ietop.sources.inputs import STDIN, path_problem

    if sum(p == STDIN for p in paths) > 1:
        return "- (standard input) can be given once"
    return next((problem for p in paths if (problem := path_problem(p)) is not None), None)
