"""Every `--help` ends with examples, and every example is a command line the parser accepts as written (issue
22): a renamed or removed flag breaks its example here, not in a user's shell."""

from __future__ import annotations

import argparse
import shlex

import pytest

from ietop.cli import build_parser

REDIRECTIONS = {">", ">>", "<", "|", "&&", ";"}


def _parsers() -> dict[str | None, argparse.ArgumentParser]:
    parser = build_parser()
    out: dict[str | None, argparse.ArgumentParser] = {None: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            out.update(action.choices.items())
    return out


COMMANDS = list(_parsers())


def _examples(help_text: str) -> list[list[str]]:
    """The argv of each `ietop …` line of the help's `examples:` block, up to a shell redirection."""
    block = help_text.split("\nexamples:\n", 1)[1].split("\n\n", 1)[0]
    out = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words and words[0] == "ietop":
            cut = next((i for i, w in enumerate(words) if w in REDIRECTIONS), len(words))
            out.append(words[1:cut])
    return out


def test_every_command_has_a_help() -> None:
    # The commands this file checks are the parser's own: a new one is checked without being listed here.
    assert set(COMMANDS) >= {None, "analyze", "proxy", "replay", "demo", "completion"}


@pytest.mark.parametrize("command", COMMANDS)
def test_help_examples_parse(command: str | None) -> None:
    examples = _examples(_parsers()[command].format_help())
    assert examples, f"no example in `ietop {command or ''} --help`"
    commands = set()
    for argv in examples:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit:
            pytest.fail(f"example does not parse: ietop {shlex.join(argv)}")
        commands.add(args.command)
    assert command in commands  # at least one example is of this command itself


@pytest.mark.parametrize("command", [None, "replay", "demo"])
def test_dashboard_helps_say_tables_scroll_sideways(command: str | None) -> None:
    text = _parsers()[command].format_help()
    assert "scrolls horizontally with ←/→" in text


def test_descriptions_are_still_wrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    # The examples keep their lines; a one-line description is still wrapped to the terminal's width.
    monkeypatch.setenv("COLUMNS", "80")
    lines = _parsers()["analyze"].format_help().splitlines()
    description = next(ln for ln in lines if ln.startswith("Analyze saved logs"))
    assert len(description) <= 80
