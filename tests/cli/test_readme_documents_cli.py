"""The README documents every command and flag the CLI has (a flag added without docs fails here)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ietop.cli import build_parser

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def _flags(parser: argparse.ArgumentParser, prefix: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append((f"{prefix} {name}", f"ietop {name}"))
                out += _flags(sub, f"{prefix} {name}")
        for opt in action.option_strings:
            if opt.startswith("--") and opt != "--help":
                out.append((prefix, opt))
    return out


def test_every_command_and_flag_is_in_the_readme() -> None:
    missing = [f"{where}: {flag}" for where, flag in _flags(build_parser(), "ietop") if flag not in README]
    assert not missing, missing
