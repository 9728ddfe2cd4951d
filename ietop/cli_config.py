"""Default flags remembered in `$XDG_CONFIG_HOME/ietop/config.toml` (issue 22).

The file's keys are the commands' long flags without their dashes, checked against the parser itself, so a
flag added to the CLI is a config key at once and a key the CLI does not have is refused by name:

    theme = "nord"                          # the dashboard's (`ietop`, `ietop replay`, `ietop demo`)
    ollama = ["http://gpu-box:11434"]       # `ietop`'s flags at the top level
    interval = 1
    [analyze]                               # one table per command
    engine = "ollama"

A flag on the command line wins over the file. A list flag given on the command line replaces the file's
list rather than adding to it: `ietop --ollama URL` is the way to watch one other engine for a moment, which
appending would defeat. A top-level key is also the default of a command that has the same flag (`theme` for
`replay` and `demo`) unless that command's table sets its own.

Every problem with the file is one line naming the file and the key, and exit 2 (a usage error), before
anything starts. The file is only read when it exists (tomllib is imported then), and the theme is checked
against Textual's themes only when a dashboard is about to open, so `ietop analyze --json` pays for none.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

META = frozenset({"help", "version", "config", "no_config"})
"""Dests that are about the run itself, never a default to remember."""

DASHBOARD_COMMANDS = (None, "replay", "demo")
"""The commands whose parsers take `--theme`."""


class ConfigError(Exception):
    """One line: the file, the key, what is wrong."""


def default_path() -> Path:
    # The XDG base directory spec: a relative $XDG_CONFIG_HOME is invalid and ignored.
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".config"
    return base / "ietop" / "config.toml"


def add_config_flags(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """`--config PATH`, `--no-config` and, for the dashboards, `--theme NAME`, on the top-level parser
    (`top`) and again on a command's, where they default to SUPPRESS: a command parser's default would
    otherwise overwrite what was given before the command (`ietop --no-config replay x.log`)."""
    group = parser.add_argument_group("defaults file")
    choice = group.add_mutually_exclusive_group()
    choice.add_argument("--config", metavar="PATH", default=None if top else argparse.SUPPRESS,
                        help="read default flags from PATH instead of $XDG_CONFIG_HOME/ietop/config.toml")
    choice.add_argument("--no-config", action="store_true", default=False if top else argparse.SUPPRESS,
                        help="ignore the config file")


def add_theme_flag(parser: argparse._ActionsContainer, *, top: bool) -> None:
    parser.add_argument("--theme", metavar="NAME", default=None if top else argparse.SUPPRESS,
                        help="the dashboard's Textual theme, e.g. nord, dracula, textual-light")


class _Unparsable(Exception):
    pass


class _PreParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _Unparsable(message)


def chosen_file(argv: Sequence[str]) -> tuple[Path | None, bool]:
    """(the file to read, whether it was named): found before the real parse, which needs its defaults."""
    pre = _PreParser(add_help=False)
    choice = pre.add_mutually_exclusive_group()
    choice.add_argument("--config")
    choice.add_argument("--no-config", action="store_true")
    try:
        known, _ = pre.parse_known_args(list(argv))
    except _Unparsable:
        return None, False  # the real parse says what is wrong with these flags
    if known.no_config:
        return None, False
    return (Path(known.config), True) if known.config is not None else (default_path(), False)


@dataclass
class Config:
    path: Path | None = None
    values: dict[str | None, dict[str, tuple[str, object]]] = field(default_factory=dict)
    """Per command (None: the top level), dest → (key as written in the file, checked value)."""
    filled: dict[str, str] = field(default_factory=dict)
    """Dests set from the file after parsing → their key, for messages about the value."""

    def apply(self, parser: argparse.ArgumentParser) -> None:
        """Before parsing: the file's values as the parsers' defaults. Options with no default of their own
        (None, [] or SUPPRESS) are filled after parsing instead (`fill`), which knows whether the flag was
        given: that is what makes lists replace and lets a message say where a bad theme came from."""
        parsers = _parsers(parser)
        for command, values in self.values.items():
            actions = _options(parsers[command])
            for dest, (_, value) in values.items():
                action = actions[dest]
                action.required = False  # `[proxy] upstream` satisfies `--upstream`
                if not _filled_after(action):
                    action.default = value

    def fill(self, parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
        """After parsing: the file's values for the options `apply` left alone, where no flag was given."""
        command: str | None = args.command
        parsers = _parsers(parser)
        own = _options(parsers[command])
        top = self.values.get(None, {})
        values = {**{dest: v for dest, v in top.items() if dest in own}, **self.values.get(command, {})}
        given = {dest for dest in values if getattr(args, dest, None) not in (None, [])}
        for dest, (key, value) in values.items():
            if _filled_after(own[dest]) and dest not in given:
                setattr(args, dest, list(value) if isinstance(value, list) else value)
                self.filled[dest] = key

    def where(self, dest: str, flag: str) -> str:
        return f"{self.path}: {self.filled[dest]}" if dest in self.filled else flag


def _filled_after(action: argparse.Action) -> bool:
    return action.default is None or action.default == [] or action.default == argparse.SUPPRESS


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None,
          opens_dashboard: Callable[[argparse.Namespace], bool]) -> argparse.Namespace:
    """Parse `argv` with the config file's defaults. Raises ConfigError (one line). A bad file still lets
    `--help`, `--version` and `ietop completion` run: they read no default."""
    argv = sys.argv[1:] if argv is None else list(argv)
    path, named = chosen_file(argv)
    problem: ConfigError | None = None
    try:
        config = load(path, named, parser)
    except ConfigError as exc:
        config, problem = Config(), exc
    config.apply(parser)
    args = parser.parse_args(argv)
    if problem is not None and args.command != "completion":
        raise problem
    config.fill(parser, args)
    theme = getattr(args, "theme", None)
    if theme is not None and opens_dashboard(args) and (bad := theme_problem(theme)) is not None:
        raise ConfigError(f"{config.where('theme', '--theme')}: {bad}")
    return args


def theme_problem(name: str) -> str | None:
    # The dashboard registers no theme of its own: Textual's built-in ones are all it can show.
    from textual.theme import BUILTIN_THEMES

    if name in BUILTIN_THEMES:
        return None
    close = difflib.get_close_matches(name, BUILTIN_THEMES, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown theme {name!r} ({hint}choose from {', '.join(sorted(BUILTIN_THEMES))})"


def load(path: Path | None, named: bool, parser: argparse.ArgumentParser) -> Config:
    if path is None:
        return Config()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if named:
            raise ConfigError(f"{path}: no such file") from None
        return Config()  # no file at the default place: nothing remembered yet
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: the same parser, from PyPI (a dependency there only)
        import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]
    try:
        data: dict[str, object] = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {str(exc).splitlines()[0]}") from None
    return Config(path, _check(path, data, parser))


def _check(path: Path, data: dict[str, object], parser: argparse.ArgumentParser
           ) -> dict[str | None, dict[str, tuple[str, object]]]:
    top = _options(parser)
    commands = {name: _options(sub) for name, sub in _commands(parser).items()}
    commands = {name: options for name, options in commands.items() if options}
    values: dict[str | None, dict[str, tuple[str, object]]] = {}
    for key, value in data.items():
        # `proxy` is both `ietop --proxy PORT` and `ietop proxy`'s table: the value's type says which.
        if key in commands and (isinstance(value, dict) or key not in _by_key(top)):
            if not isinstance(value, dict):
                raise ConfigError(f"{path}: {key}: expected a table ([{key}]) of `ietop {key}` flags, "
                                  f"not {_kind(value)}")
            values[key] = _section(path, key, value, commands[key])
        else:
            values.setdefault(None, {}).update(_entry(path, key, key, value, top, [*commands]))
    return values


def _section(path: Path, name: str, table: dict[str, object], options: dict[str, argparse.Action]
             ) -> dict[str, tuple[str, object]]:
    out: dict[str, tuple[str, object]] = {}
    for key, value in table.items():
        out.update(_entry(path, f"{name}.{key}", key, value, options, []))
    return out


def _entry(path: Path, where: str, key: str, value: object, options: dict[str, argparse.Action],
           also: list[str]) -> dict[str, tuple[str, object]]:
    by_key = _by_key(options)
    action = by_key.get(key)
    if action is None:
        close = difflib.get_close_matches(key, [*by_key, *also], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"{path}: {where}: unknown key{hint}")
    try:
        return {action.dest: (where, _value(action, value))}
    except ValueError as exc:
        raise ConfigError(f"{path}: {where}: {exc}") from None


def _value(action: argparse.Action, value: object) -> object:
    """The value as the flag would have produced it; ValueError (one line) when it could not be."""
    if action.nargs == 0:  # a switch (store_true)
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, not {_kind(value)}")
        return value
    if isinstance(action, argparse._AppendAction):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f'expected an array of strings (["…", …]), not {_kind(value)}')
        return list(value)
    if action.type is None:
        if not isinstance(value, str):
            raise ValueError(f"expected a string, not {_kind(value)}")
        if action.choices is not None and value not in action.choices:
            raise ValueError(f"{value!r} is not one of {', '.join(map(str, action.choices))}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number, not {_kind(value)}")
    try:  # the flag's own check (a speed >= 0, an interval >= 0.1) and its message
        convert: Callable[[str], object] = action.type  # type: ignore[assignment]
        return convert(str(value))
    except argparse.ArgumentTypeError as exc:
        raise ValueError(str(exc)) from None


def _kind(value: object) -> str:
    kinds = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "an array",
             dict: "a table"}
    return next((name for t, name in kinds.items() if isinstance(value, t)), "a date or time")


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """dest → action of each flag a file may set. argparse has no public list of a parser's actions."""
    return {a.dest: a for a in parser._actions
            if a.option_strings and a.dest not in META and not isinstance(a, argparse._SubParsersAction)}


def _by_key(options: dict[str, argparse.Action]) -> dict[str, argparse.Action]:
    """The file's key for each flag: its long name without the dashes (`proxy-upstream`)."""
    return {next(o for o in a.option_strings if o.startswith("--"))[2:]: a for a in options.values()}


def _parsers(parser: argparse.ArgumentParser) -> dict[str | None, argparse.ArgumentParser]:
    out: dict[str | None, argparse.ArgumentParser] = {None: parser}
    out.update(_commands(parser).items())
    return out


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}
