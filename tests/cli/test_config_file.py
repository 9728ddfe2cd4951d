"""`$XDG_CONFIG_HOME/ietop/config.toml` (issue 22): the file's values are the flags' defaults, flags on the
command line win (a list flag replaces the file's list), and a bad file is one line naming the file and the
key, exit 2, before anything starts."""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ietop.cli import build_parser, main
from ietop.cli_config import parse
from ietop.tui.app import IetopApp

ROOT = Path(__file__).resolve().parents[2]
INCIDENT = ROOT / "ietop" / "demo" / "incident.log"


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where ietop looks for its file in this test (under a private XDG_CONFIG_HOME and HOME): not written."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = tmp_path / "xdg" / "ietop" / "config.toml"
    path.parent.mkdir(parents=True)
    return path


def _args(*argv: str) -> argparse.Namespace:
    return parse(build_parser(), list(argv), lambda _: False)


EXAMPLE = """\
theme = "nord"
ollama = ["http://gpu-box:11434", "http://127.0.0.1:11434"]
log = ["ollama:/var/log/ollama/server.log"]
interval = 0.5

[analyze]
engine = "ollama"
all-requests = true

[proxy]
upstream = "http://127.0.0.1:8000"
listen = "127.0.0.1:8001"

[replay]
speed = 4
"""


def test_the_file_gives_the_defaults(config: Path) -> None:
    config.write_text(EXAMPLE)
    live = _args()
    assert (live.theme, live.interval, live.log) == ("nord", 0.5, ["ollama:/var/log/ollama/server.log"])
    assert live.ollama == ["http://gpu-box:11434", "http://127.0.0.1:11434"]
    an = _args("analyze", "x.log")
    assert (an.engine, an.all_requests, an.json) == ("ollama", True, False)
    px = _args("proxy")  # --upstream is required, and the file gives it
    assert (px.upstream, px.listen, px.timeout) == ("http://127.0.0.1:8000", "127.0.0.1:8001", 600.0)
    rp = _args("replay", "x.log")
    assert (rp.speed, rp.theme) == (4.0, "nord")  # the top-level theme is the replay's too


def test_flags_override_the_file(config: Path) -> None:
    config.write_text(EXAMPLE)
    # --interval 2 is also the parser's own default: given, it still wins over the file's 0.5.
    live = _args("--interval", "2", "--theme", "dracula", "--ollama", "http://other:11434")
    assert (live.interval, live.theme) == (2.0, "dracula")
    assert live.ollama == ["http://other:11434"]  # replaced, not added to
    assert live.log == ["ollama:/var/log/ollama/server.log"]  # a list not given keeps the file's
    assert _args("analyze", "--engine", "vllm", "x.log").engine == "vllm"
    assert _args("proxy", "--upstream", "http://127.0.0.1:9").upstream == "http://127.0.0.1:9"
    assert _args("replay", "--speed", "1", "x.log").speed == 1.0
    assert _args("replay", "--theme", "gruvbox", "x.log").theme == "gruvbox"
    assert _args("--theme", "gruvbox", "replay", "x.log").theme == "gruvbox"  # given before the command


def test_a_commands_own_table_wins_over_the_top_level(config: Path) -> None:
    config.write_text('theme = "nord"\n[demo]\ntheme = "dracula"\n')
    assert _args("demo").theme == "dracula"
    assert _args("replay", "x.log").theme == "nord"


def test_no_config_and_another_file(config: Path, tmp_path: Path) -> None:
    config.write_text('interval = 0.5\n')
    other = tmp_path / "other.toml"
    other.write_text('interval = 7\n')
    assert _args().interval == 0.5
    assert _args("--no-config").interval == 2.0
    assert _args("--config", str(other)).interval == 7.0
    assert _args(f"--config={other}").interval == 7.0
    assert _args("analyze", "--no-config", "x.log").engine is None


def test_xdg_config_home_is_honoured(config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home_file = tmp_path / "home" / ".config" / "ietop" / "config.toml"
    home_file.parent.mkdir(parents=True)
    home_file.write_text("interval = 3\n")
    config.write_text("interval = 5\n")
    assert _args().interval == 5.0  # $XDG_CONFIG_HOME/ietop/config.toml, not ~/.config's
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert _args().interval == 3.0  # unset: ~/.config/ietop/config.toml
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/dir")
    assert _args().interval == 3.0  # the XDG spec: a relative path is ignored
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "empty"))
    assert _args().interval == 2.0  # no file there: nothing remembered, no error


BAD = [
    ("theme = \"nord\"\ninterval = [\n", "not valid TOML: "),
    ("[analyze]\nengin = \"ollama\"\n", "analyze.engin: unknown key (did you mean 'engine'?)"),
    ("[analyse]\nengine = \"ollama\"\n", "analyse: unknown key (did you mean 'analyze'?)"),
    ("[analyze]\nengine = \"olama\"\n", "analyze.engine: 'olama' is not one of ollama, vllm, mlx, proxy"),
    ("[analyze]\njson = \"yes\"\n", "analyze.json: expected true or false, not a string"),
    ("ollama = \"http://gpu-box:11434\"\n", "ollama: expected an array of strings"),
    ("interval = \"2\"\n", "interval: expected a number, not a string"),
    ("interval = 0.01\n", "interval: invalid interval '0.01': seconds, at least 0.1"),
    ("analyze = 1\n", "analyze: expected a table ([analyze]) of `ietop analyze` flags, not an integer"),
    ("[replay]\nspeed = -1\n", "replay.speed: invalid speed '-1': a finite number >= 0"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_a_bad_file_is_one_line_and_exit_2(config: Path, text: str, message: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    config.write_text(text)
    assert main(["analyze", "--json", str(INCIDENT)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"ietop: error: {config}: {message}")
    assert err.count("\n") == 1


def test_a_bad_file_in_a_real_process_has_no_traceback(config: Path) -> None:
    config.write_bytes(b"theme = \"nord\"\n\xff\xfe = 1\n")
    proc = subprocess.run([sys.executable, "-m", "ietop", "analyze", str(INCIDENT)], capture_output=True,
                          text=True, check=False, env=os.environ.copy(), cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stderr == f"ietop: error: {config}: not UTF-8 text (byte 15)\n"


def test_a_named_file_that_is_missing_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", str(tmp_path / "nope.toml"), "analyze", str(INCIDENT)]) == 2
    assert capsys.readouterr().err == f"ietop: error: {tmp_path / 'nope.toml'}: no such file\n"


def test_help_and_completion_still_work_with_a_bad_file(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config.write_text("nonsense = 1\n")
    assert main(["completion", "bash"]) == 0
    with pytest.raises(SystemExit) as exc:
        main(["analyze", "--help"])
    assert exc.value.code == 0
    assert main(["--no-config", "analyze", "--json", str(INCIDENT)]) == 0
    capsys.readouterr()


@pytest.fixture
def themes_seen(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The theme each dashboard the CLI starts has once mounted (headless, closed at once)."""
    seen: list[str] = []

    def run(app: IetopApp, *args: object, **kwargs: object) -> None:
        async def mounted() -> None:
            async with app.run_test():
                seen.append(app.theme)

        asyncio.run(mounted())

    monkeypatch.setattr(IetopApp, "run", run)
    return seen


def test_the_theme_reaches_the_dashboard(config: Path, themes_seen: list[str]) -> None:
    config.write_text('theme = "nord"\n')
    assert main(["replay", "--paused", str(INCIDENT)]) == 0
    assert main(["demo", "--speed", "0", "--theme", "gruvbox"]) == 0
    assert themes_seen == ["nord", "gruvbox"]


@pytest.mark.parametrize(("text", "argv", "where"), [
    ('theme = "nrod"\n', ["demo"], "{config}: theme: unknown theme 'nrod' (did you mean 'nord'?"),
    ('[replay]\ntheme = "nrod"\n', ["replay", str(INCIDENT)], "{config}: replay.theme: unknown theme 'nrod'"),
    ("", ["--theme", "nrod", "demo"], "--theme: unknown theme 'nrod'"),
])
def test_an_unknown_theme_stops_the_dashboard_before_it_starts(
        config: Path, themes_seen: list[str], capsys: pytest.CaptureFixture[str], text: str, argv: list[str],
        where: str) -> None:
    config.write_text(text)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("ietop: error: " + where.format(config=config))
    assert err.count("\n") == 1
    assert themes_seen == []


def test_a_theme_is_not_checked_where_no_dashboard_opens(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `ietop demo --report` prints a report: a misspelt dashboard theme is no reason to refuse it.
    config.write_text('theme = "nrod"\n')
    assert main(["demo", "--report"]) == 0
    assert "qwen3" in capsys.readouterr().out


def test_the_readme_example_is_a_valid_file(config: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Defaults: the config file", 1)[1]
    config.write_text(section.split("```toml\n", 1)[1].split("```", 1)[0])
    assert _args().ollama == ["http://gpu-box:11434"]
    assert _args("analyze", "x.log").engine == "ollama"
    assert _args("proxy").upstream == "http://127.0.0.1:11434"
