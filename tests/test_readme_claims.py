"""The README's flag and key tables against the parser and the app's bindings, both ways.

A README row naming a flag its command does not take, or a key the dashboard does not bind, fails here; so
does a flag a parser takes that its command's section never names, and a dashboard key missing from the key
table. (tests/cli/test_readme_documents_cli.py asks only that each flag appear somewhere in the README.)
What each flag and key does is tested elsewhere: tests/README_CLAIMS.md maps them to those tests.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable
from pathlib import Path

import pytest
from textual.app import App
from textual.binding import Binding
from textual.dom import DOMNode
from textual.screen import Screen
from textual.widgets import OptionList, SelectionList

from ietop.cli import build_parser
from ietop.tui.app import IetopApp
from ietop.tui.screens.columns import ColumnsScreen
from ietop.tui.widgets.rowtable import RowTable

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
COMMANDS = ("analyze", "compare", "budget", "export", "proxy", "replay", "demo", "completion")
TOP = ""
"""The section and parser of `ietop` itself (the live dashboard)."""
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def sections() -> dict[str, tuple[str, str]]:
    """Command ("" for `ietop`, "meta" for `--version`/`--help`) → (its heading, its text up to the next heading)."""
    out: dict[str, tuple[str, str]] = {}
    parts = re.split(r"^(#{2,3} .*)$", README, flags=re.MULTILINE)
    for heading, body in zip(parts[1::2], parts[2::2], strict=True):
        m = re.match(r"### `ietop(?: (\S+))?", heading)
        if m is None:
            continue
        word = m.group(1) or ""
        name = "meta" if word.startswith("--") else word.rstrip("`")
        assert name not in out, f"two README sections for {name!r}"
        out[name] = (heading, body)
    return out


def table_rows(body: str, first: str) -> list[list[str]]:
    """The rows (cells) of the table in `body` whose header's first cell is `first`."""
    lines = body.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"\|\s*{re.escape(first)}\s*\|", line))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def backticked(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def flags_in(text: str) -> set[str]:
    return {f for span in backticked(text) for f in FLAG.findall(span)}


def claimed(name: str) -> set[str]:
    """The flags a command's section claims: in its heading and in the rows of its flag table."""
    heading, body = sections()[name]
    rows = [line for line in body.splitlines() if line.startswith("| `--")]
    return flags_in(heading) | {f for row in rows for f in flags_in(row)}


def parser_for(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    if name == TOP:
        return parser
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = sub.choices[name]
    assert isinstance(found, argparse.ArgumentParser)
    return found


def takes(name: str) -> set[str]:
    return {o for a in parser_for(name)._actions for o in a.option_strings if o.startswith("--") and o != "--help"}


def top_row(flag: str) -> str:
    """The `ietop` flag table's row for `flag` (its meaning says which commands share it)."""
    _, body = sections()[TOP]
    (row,) = [" | ".join(r) for r in table_rows(body, "flag") if flag in flags_in(r[0])]
    return row


# -- flags ---------------------------------------------------------------------------------------------
def test_the_readme_has_a_section_for_each_command() -> None:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(COMMANDS)
    assert set(sections()) == {TOP, "meta", *COMMANDS}


@pytest.mark.parametrize("name", [TOP, *COMMANDS])
def test_every_flag_the_readme_claims_exists(name: str) -> None:
    missing = claimed(name) - takes(name)
    assert not missing, f"README section of `ietop {name}` names flags it does not take: {sorted(missing)}"


def shared(name: str) -> set[str]:
    """Flags the `ietop` table says other commands take as well (checked in test_shared_flags_are_where_said)."""
    out = set()
    if name not in (TOP, "completion"):
        out |= {"--config", "--no-config"}
    if name in ("replay", "demo"):
        out.add("--theme")
    return out


def test_shared_flags_are_where_the_readme_says() -> None:
    assert "every command but `completion` takes these" in top_row("--config")
    assert "`replay` and `demo` take it too" in top_row("--theme")
    assert "`replay` and `demo` take `--theme NAME`" in sections()["demo"][1]
    for name in COMMANDS:
        assert shared(name) <= takes(name), name
        assert {"--config", "--no-config"} & takes(name) == ({"--config", "--no-config"} & shared(name)), name
        assert ("--theme" in takes(name)) == (name in ("replay", "demo")), name


@pytest.mark.parametrize("name", [TOP, *COMMANDS])
def test_every_flag_a_parser_takes_is_in_its_section(name: str) -> None:
    """Named in its own command's section (a table row, the heading, or its text), or shared as the `ietop`
    table says; `--version` has its own heading."""
    heading, body = sections()[name]
    documented = claimed(name) | flags_in(heading + body) | shared(name)
    if name == TOP:
        documented |= flags_in(sections()["meta"][0])
    undocumented = takes(name) - documented
    assert not undocumented, f"`ietop {name}` takes flags its README section never names: {sorted(undocumented)}"


def test_choices_the_readme_lists_are_the_parsers() -> None:
    heading, _ = sections()["completion"]
    (shells,) = re.findall(r"\{([a-z,]+)\}", heading)
    (shell,) = [a for a in parser_for("completion")._actions if a.dest == "shell"]
    assert list(shell.choices or ()) == shells.split(",")
    _, body = sections()["analyze"]
    (row,) = [r for r in table_rows(body, "flag") if "--engine" in r[0]]
    listed = set(re.sub(r"\\\|", "|", row[0]).split(" ", 1)[1].strip("`").split("|"))
    (engine,) = [a for a in parser_for("analyze")._actions if a.dest == "engine"]
    assert listed <= set(engine.choices or ())


# -- keys ----------------------------------------------------------------------------------------------
KEY_NAMES = {"?": "question_mark", "/": "slash", "+": "plus", "-": "minus", "↑": "up", "↓": "down",
             "←": "left", "→": "right", "pgup": "pageup", "pgdn": "pagedown"}
"""The README's spelling → Textual's key name."""
PANEL_KEYS = {"up", "down", "left", "right", "pageup", "pagedown", "home", "end", "enter"}
"""Keys the README says act in a panel (the focused table or the hints list), not on the whole dashboard."""


def readme_keys() -> list[str]:
    _, body = sections()[TOP]
    return [KEY_NAMES.get(k, k) for row in table_rows(body, "key") for k in backticked(row[0])]


def bindings(*classes: type[DOMNode]) -> dict[str, tuple[type[DOMNode], str]]:
    """key → (the class whose binding it is, its action), over each class's MRO as Textual merges them (a
    subclass's binding wins)."""
    out: dict[str, tuple[type[DOMNode], str]] = {}
    for cls in classes:
        for owner in reversed(cls.__mro__):
            for binding in owner.__dict__.get("BINDINGS", ()):
                if isinstance(binding, Binding):
                    key_list, action = binding.key, binding.action
                else:
                    key_list, action = binding[0], binding[1]
                for key in key_list.split(","):
                    out[key.strip()] = (cls, action)
    return out


def dashboard_bindings() -> dict[str, tuple[type[DOMNode], str]]:
    found = bindings(Screen, IetopApp)
    if IetopApp.ENABLE_COMMAND_PALETTE:
        found[IetopApp.COMMAND_PALETTE_BINDING] = (IetopApp, "command_palette")
    return found


def acts(cls: type[DOMNode], action: str) -> bool:
    """The binding's action is a method: `app.focus_next` on the app, `sort(1)` as action_sort."""
    where: type[DOMNode] = IetopApp if action.startswith("app.") or issubclass(cls, Screen) else cls
    name = action.split("(", 1)[0].rsplit(".", 1)[-1]
    return callable(getattr(where, f"action_{name}", None))


def test_the_key_table_is_read() -> None:
    keys = readme_keys()
    assert len(keys) >= 25 and len(set(keys)) == len(keys), keys


@pytest.mark.parametrize("key", readme_keys())
def test_every_key_the_readme_lists_is_bound(key: str) -> None:
    if key in PANEL_KEYS:
        table, hints = bindings(RowTable), bindings(OptionList)
        assert key in table, f"{key!r}: not bound in the Requests and Events tables (RowTable)"
        assert acts(*table[key]), table[key]
        if key == "enter":  # "open the selected request, hint or event"
            assert key in hints and acts(*hints[key]), "enter does not select a hint"
        return
    found = dashboard_bindings()
    assert key in found, f"{key!r}: the dashboard does not bind it"
    assert acts(*found[key]), f"{key!r} → {found[key][1]}: no such action"


def test_the_column_chooser_keys_the_readme_names() -> None:
    _, body = sections()[TOP]
    (row,) = [r for r in table_rows(body, "key") if backticked(r[0]) == ["c"]]
    named = backticked(row[1])
    assert named == ["space", "escape"], named
    columns = bindings(ColumnsScreen)
    assert columns["escape"][1] == "done"  # "escape applies"
    assert bindings(SelectionList)["space"][1] == "select"  # "space ticks or unticks"


def test_every_dashboard_key_is_in_the_readme() -> None:
    """IetopApp's own bindings (a binding's aliases count as one: `plus,equals_sign`)."""
    documented = set(readme_keys())
    undocumented = []
    for owner in IetopApp.__mro__:
        if owner is App or not issubclass(owner, App):
            continue
        for binding in owner.__dict__.get("BINDINGS", ()):
            keys: Iterable[str] = (binding.key if isinstance(binding, Binding) else binding[0]).split(",")
            if not documented & {k.strip() for k in keys}:
                undocumented.append(binding.key if isinstance(binding, Binding) else binding[0])
    assert not undocumented, f"keys the dashboard binds that the README's key table does not list: {undocumented}"
