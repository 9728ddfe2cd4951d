"""The command line's shared pieces: exit codes, the parser whose errors are one line (with a "did you mean"),
and the argument types every command checks the same way."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE = 0, 1, 2


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # argparse prints usage + message; keep its exit code 2 but make the message one clear line.
        message += did_you_mean(message)
        self.exit(EXIT_USAGE, f"ietop: error: {message} (see ietop {self.prog.split()[-1]} --help)\n"
                  if " " in self.prog else f"ietop: error: {message} (see ietop --help)\n")


def did_you_mean(message: str) -> str:
    """" (did you mean 'analyze'?)" for argparse's `invalid choice: 'analyse' (choose from 'analyze', …)`."""
    import difflib
    import re

    m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if m is None:
        return ""
    close = difflib.get_close_matches(m.group(1), re.findall(r"'([^']*)'", m.group(2)), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid speed {text!r}: a number such as 1, 10 or 0") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"invalid speed {text!r}: a finite number >= 0 (0 = as fast as possible)")
    return value


MIN_INTERVAL_S = 0.1
"""Polls closer than this would spend a core on asking; no engine's state changes that fast."""


def interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid interval {text!r}: seconds, such as 2 or 0.5") from None
    if not math.isfinite(value) or value < MIN_INTERVAL_S:
        raise argparse.ArgumentTypeError(f"invalid interval {text!r}: seconds, at least {MIN_INTERVAL_S}")
    return value


def failure_line(exc: BaseException) -> str:
    """The one line a command prints when reading its inputs failed: a SourceError or FormatError says it all;
    an OSError names its file and the system's reason (never a traceback)."""
    if isinstance(exc, OSError):
        return f"ietop: error: {exc.filename or ''}: {exc.strerror or exc}"
    return f"ietop: error: {exc}"


def say_repeated(repeated: Sequence[tuple[str, str]]) -> None:
    """A path given twice (or two names of one file) is read once, and says so."""
    for path, first in repeated:
        print(f"ietop: note: {path} is the same file as {first}: read once", file=sys.stderr)
