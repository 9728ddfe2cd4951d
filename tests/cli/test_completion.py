"""`ietop completion SHELL` (issue 22): the script shtab writes from the parser knows every command and flag
the parser has, and bash, running it, offers files where the CLI takes a path."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ietop.cli import build_parser, main


def _script(capsys: pytest.CaptureFixture[str], shell: str) -> str:
    assert main(["--no-config", "completion", shell]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


def _walk(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()
          ) -> list[tuple[tuple[str, ...], argparse.Action]]:
    """(command words, action) of every action of every parser."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _walk(sub, (*words, name))
        else:
            out.append((words, action))
    return out


def _word(word: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


def test_bash_script_names_every_command_and_flag(capsys: pytest.CaptureFixture[str]) -> None:
    script = _script(capsys, "bash")
    actions = _walk(build_parser())
    commands = {words[-1] for words, _ in actions if words}
    flags = {opt for _, action in actions for opt in action.option_strings}
    assert {"analyze", "proxy", "replay", "demo", "completion", "--config", "--theme"} <= commands | flags
    assert [c for c in sorted(commands) if not _word(c, script)] == []
    assert [f for f in sorted(flags) if not _word(f, script)] == []


@pytest.mark.parametrize("shell", ["zsh", "tcsh"])
def test_other_shells_name_every_command(capsys: pytest.CaptureFixture[str], shell: str) -> None:
    script = _script(capsys, shell)
    commands = {words[-1] for words, _ in _walk(build_parser()) if words}
    assert [c for c in sorted(commands) if not _word(c, script)] == []


BASH = shutil.which("bash")
HARNESS = """
source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
_shtab_ietop
printf '%s\\n' "${COMPREPLY[@]}"
"""


def _complete(script: Path, cwd: Path, *words: str) -> list[str]:
    assert BASH is not None
    out = subprocess.run([BASH, "-c", HARNESS, "bash", str(script), *words], cwd=cwd, capture_output=True,
                         text=True, check=True)
    return out.stdout.split()


@pytest.mark.skipif(BASH is None, reason="no bash")
def test_bash_completes_paths_as_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "ietop.bash"
    script.write_text(_script(capsys, "bash"))
    assert subprocess.run([BASH or "bash", "-n", str(script)], check=False).returncode == 0
    work = tmp_path / "work"
    (work / "saved-dir").mkdir(parents=True)
    (work / "saved.log").write_text("")
    # Every argument whose --help says PATH, from the parser: a new path flag is checked without a list here.
    paths = [(words, action) for words, action in _walk(build_parser())
             if isinstance(action.metavar, str) and action.metavar.endswith("PATH")]
    assert len(paths) >= 5  # analyze and replay's logs, --log, --jsonl, --config
    for words, action in paths:
        flag = [o for o in action.option_strings if o.startswith("--")][:1]
        offered = _complete(script, work, "ietop", *words, *flag, "sav")
        assert "saved.log" in offered, (words, flag, offered)
    # A directory argument offers directories only.
    assert _complete(script, work, "ietop", "analyze", "--csv", "sav") == ["saved-dir"]
    assert _complete(script, work, "ietop", "analyze", "--engine", "")[:1] == ["ollama"]


def test_completion_refuses_an_unknown_shell(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["completion", "csh-ish"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1
