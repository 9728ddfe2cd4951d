"""`ietop completion SHELL`: a shell completion script generated from the argparse parser (issue 22).

shtab rather than argcomplete: shtab writes a static script once, from the parser, and the shell completes
from it without starting Python; argcomplete runs `ietop` itself on every <tab> (about 50 ms of imports
here, more on a cold disk) and needs a marker and a hook imported at startup. The scripts also cover zsh
and tcsh natively, where argcomplete goes through bash emulation. shtab is imported only by this command.
"""

from __future__ import annotations

import argparse

SHELLS = ("bash", "zsh", "tcsh")
"""What `ietop completion` offers: the shells shtab has supported longest (it also writes fish and
PowerShell scripts in recent versions, untested here)."""


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    import shtab

    _complete_paths(parser, shtab.FILE, shtab.DIRECTORY)
    return shtab.complete(parser, shell=shell)


def _complete_paths(parser: argparse.ArgumentParser, files: object, dirs: object) -> None:
    """Arguments whose metavar names a PATH complete as files, a DIR as directories: the metavar is what
    `--help` promises the user, so the two cannot disagree."""
    for action in parser._actions:  # argparse has no public list of a parser's actions
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _complete_paths(sub, files, dirs)
        metavar = action.metavar if isinstance(action.metavar, str) else ""
        if metavar.endswith("PATH"):
            action.complete = files  # type: ignore[attr-defined]
        elif metavar == "DIR":
            action.complete = dirs  # type: ignore[attr-defined]
