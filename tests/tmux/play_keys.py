"""Play the README's key list against the real dashboard in a real terminal (tmux), and check each screen.

    .venv/bin/python tests/tmux/play_keys.py [--size 80x24] [--ietop CMD]

The dashboard runs as `ietop replay ietop/demo/incident.log --speed 10000 --until 2026-11-28T14:06:30Z`: the
bundled demo incident, stopped and paused at its most telling moment, so every run starts from the same screen
(`ietop demo` plays on at 10× and would not). The speed is the clock's fastest that `+`/`-` can still change
(at `--speed 0`, "as fast as possible", they do nothing). The session runs in a private tmux server (its own
socket) in a temporary directory, which is where `ctrl+s` must save its text file.

Each key is sent with `tmux send-keys`; then the pane is captured until what the key should show is there
(polled, with a generous limit: a busy two-core machine is slow, never wrong). A traceback or a Python error
on screen fails the key at once. One verdict line per key; exit 0 when every key passed, 1 otherwise.
The texts looked for are the screens' and panels' titles (ietop/tui/screens/*.py, ietop/tui/widgets/*.py),
never column positions: the layout changes, the names stay.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INCIDENT = ROOT / "ietop" / "demo" / "incident.log"
MOMENT = "2026-11-28T14:06:30Z"
SPEED = 10_000
"""The replay clock's fastest (ReplayControls.action_speed caps at it): `--until` is reached at once."""
COMPACT_BELOW = 34
"""Rows under which Requests and Events share one place (ietop.tui.app.COMPACT_BELOW)."""
LIMIT_S = float(os.environ.get("PLAY_KEYS_LIMIT_S", "45"))
"""How long a key may take to show its effect: a generous cap on a poll, never a measurement
($PLAY_KEYS_LIMIT_S: shorter to see failures sooner, longer on a very slow machine)."""
SESSION = "ietop"
CRASH = re.compile(r"Traceback|\b[A-Z]\w*Error\b")
"""A Python traceback, or an exception's name (`KeyError`, `Error:`): no key may put either on screen."""
TMUX_CONF = """\
set -g status off
set -g remain-on-exit on
set -g default-shell /bin/sh
set -s escape-time 0
set -g history-limit 2000
"""
"""No status line (the pane is the whole WxH), the pane kept after the dashboard exits (what it printed last
stays readable), and no wait after escape (tmux would otherwise hold a lone escape back for 500 ms)."""


@dataclass
class Screen:
    text: str
    """The pane's characters."""
    styled: str
    """The same with its escape sequences: a moved highlight or focus changes only these."""


@dataclass
class State:
    """What the steps remember between keys."""

    cwd: Path
    size: tuple[int, int]
    before: Screen = field(default_factory=lambda: Screen("", ""))
    """The screen just before the key was sent."""
    marks: dict[str, str] = field(default_factory=dict)


Check = Callable[[Screen, State], "str | None"]
"""What a key must show: None when it is on screen, else what is still missing."""


@dataclass
class Step:
    label: str
    keys: Sequence[str]
    """tmux key names (`Tab`, `BTab`, `C-s`) or, prefixed with `=`, literal text (`=?`, `=qwen3`)."""
    check: Check
    remember: Callable[[Screen, State], None] | None = None
    """Called once the check passed (to note what a later key compares with)."""
    still: bool = False
    """Wait for a still screen before the key (no toast fading out): its check is that the screen changed."""


class Tmux:
    def __init__(self, socket: Path, conf: Path, exit_file: Path) -> None:
        """`socket`: the private server's, in the run's temporary directory (gone with it)."""
        self.socket, self.conf, self.exit_file = socket, conf, exit_file

    def __call__(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(["tmux", "-S", str(self.socket), "-f", str(self.conf), *args], capture_output=True,
                              text=True, env=env, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)}: {done.stderr.strip() or done.returncode}")
        return done.stdout

    def start(self, size: tuple[int, int], cwd: Path, command: Sequence[str], env: dict[str, str]) -> None:
        """The dashboard under a shell that writes its exit status to `exit_file`: tmux's own
        #{pane_dead_status} was sometimes still empty a minute after the process had exited (tmux 3.3a left
        it a zombie, unreaped), while the pane already read as dead."""
        shell = f"{shlex.join(command)}; echo $? > {shlex.quote(str(self.exit_file))}"
        self("new-session", "-d", "-s", SESSION, "-x", str(size[0]), "-y", str(size[1]), "-c", str(cwd),
             shell, env=env)

    def screen(self) -> Screen:
        return Screen(self("capture-pane", "-p", "-t", SESSION), self("capture-pane", "-p", "-e", "-t", SESSION))

    def send(self, key: str) -> None:
        if key.startswith("="):
            self("send-keys", "-t", SESSION, "-l", key[1:])
        else:
            self("send-keys", "-t", SESSION, key)

    def exit_status(self) -> int | None:
        """The dashboard's exit status once it has exited, else None."""
        try:
            text = self.exit_file.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        return int(text) if text.isdigit() else None

    def kill(self) -> None:
        subprocess.run(["tmux", "-S", str(self.socket), "kill-server"], capture_output=True, timeout=60, check=False)


# -- what the screens say ------------------------------------------------------------------------------
def titled(screen: Screen, title: str) -> bool:
    """A panel or screen whose border title starts with `title` (`╭─ Requests · 16 recent ─`)."""
    return re.search(rf"[─━▀▔] ?{re.escape(title)}\b", screen.text) is not None


def sort_heading(screen: Screen) -> str | None:
    """The Requests heading that carries the sort direction: `time ▼`, `total ▲`."""
    m = re.search(r"(load wait|[A-Za-z]+) ([▼▲])", screen.text)
    return f"{m.group(1)} {m.group(2)}" if m else None


def status(screen: Screen) -> str:
    """The header's first line: engines and the replay's state and speed."""
    return screen.text.splitlines()[0] if screen.text else ""


def events_lines(screen: Screen) -> tuple[str, str] | None:
    """The Events panel's heading and first (newest) row, found under its title, cut to its borders."""
    lines = screen.text.splitlines()
    for i, line in enumerate(lines):
        if re.search(r"─ Events\b", line):
            start = max(0, line.rfind("╭", 0, line.index("Events")))
            end = line.find("╮", line.index("Events"))
            rows = [row[start:end + 1].strip("│ ") for row in lines[i + 1:i + 3]]
            return (rows[0], rows[1]) if len(rows) == 2 and "kind" in rows[0] else None
    return None


def newest_event(screen: Screen) -> str | None:
    found = events_lines(screen)
    return found[1] if found else None


# -- the checks ------------------------------------------------------------------------------------------
def shows(*texts: str) -> Check:
    def check(screen: Screen, state: State) -> str | None:
        missing = [t for t in texts if t not in screen.text]
        return f"not on screen: {missing}" if missing else None
    return check


def gone(*texts: str) -> Check:
    def check(screen: Screen, state: State) -> str | None:
        left = [t for t in texts if t in screen.text]
        return f"still on screen: {left}" if left else None
    return check


def title(name: str) -> Check:
    def check(screen: Screen, state: State) -> str | None:
        return None if titled(screen, name) else f"no panel or screen titled {name!r}"
    return check


def no_title(name: str) -> Check:
    def check(screen: Screen, state: State) -> str | None:
        return f"a panel titled {name!r} is still on screen" if titled(screen, name) else None
    return check


def changed(screen: Screen, state: State) -> str | None:
    """The highlight or focus moved: the styled screen is not what it was before the key."""
    return None if screen.styled != state.before.styled else "the screen did not change"


def both(*checks: Check) -> Check:
    def check(screen: Screen, state: State) -> str | None:
        for c in checks:
            if (why := c(screen, state)) is not None:
                return why
        return None
    return check


def heading(expected: str | None = None, *, moved: bool = False) -> Check:
    def check(screen: Screen, state: State) -> str | None:
        now, was = sort_heading(screen), sort_heading(state.before)
        if now is None:
            return "no Requests heading with ▼ or ▲"
        if expected is not None and now != expected:
            return f"sort heading is {now!r}, not {expected!r}"
        if moved and now.split()[0] == (was or "").split()[0]:
            return f"sort heading stayed on {now!r}"
        return None
    return check


def status_says(pattern: str, *, absent: bool = False) -> Check:
    def check(screen: Screen, state: State) -> str | None:
        found = re.search(pattern, status(screen)) is not None
        if found != absent:
            return None
        return f"header {'still says' if absent else 'does not say'} {pattern!r}: {status(screen)!r}"
    return check


def events_row(*, like: str | None = None, new: bool = False) -> Check:
    """The Events panel's newest row: a new one (`j` ran to the next event), or the one noted as `like`."""
    def check(screen: Screen, state: State) -> str | None:
        row = newest_event(screen)
        if row is None:
            return "no Events panel with a row"
        if new and row == newest_event(state.before):
            return f"the newest event is still {row!r}"
        if like is not None and row != state.marks.get(like):
            return f"the newest event is {row!r}, not {state.marks.get(like)!r}"
        return None
    return check


def events_heading(*, has: str, present: bool = True) -> Check:
    def check(screen: Screen, state: State) -> str | None:
        found = events_lines(screen)
        if found is None:
            return "no Events panel with a heading"
        if (has in found[0].split()) != present:
            return f"the Events heading {found[0]!r} {'lacks' if present else 'still has'} {has!r}"
        return None
    return check


def saved_svg(screen: Screen, state: State) -> str | None:
    files = sorted(state.cwd.glob("*.svg"))
    if not files:
        return f"no .svg in {state.cwd}"
    return None if "<svg" in files[-1].read_text(encoding="utf-8") else f"{files[-1].name} is not an SVG"


def saved_text(screen: Screen, state: State) -> str | None:
    files = sorted(state.cwd.glob("ietop-screen-*.txt"))
    if not files:
        return f"no ietop-screen-*.txt in {state.cwd}"
    text = files[-1].read_text(encoding="utf-8")
    return None if "Residency" in text and "Latency" in text else f"{files[-1].name} does not hold the screen"


def note_event(screen: Screen, state: State) -> None:
    state.marks["before j"] = newest_event(state.before) or ""


# -- the key list: the README's, in an order where each key's effect can be seen ---------------------------
def steps(size: tuple[int, int]) -> list[Step]:
    compact = size[1] < COMPACT_BELOW
    events_key = (
        # Under 34 rows Events takes the place of Requests, and `e` again gives it back.
        [Step("e", ["=e"], both(title("Events"), no_title("Requests")))] if compact
        # Taller, both are on screen: `e` moves the focus to Events.
        else [Step("e", ["=e"], both(title("Events"), title("Requests"), changed), still=True)])
    return [
        Step("?", ["=?"], title("ietop — keys")),
        Step("escape (closes help)", ["Escape"], both(gone("ietop — keys"), title("Requests"))),
        Step("tab", ["Tab"], changed, still=True),
        Step("shift+tab", ["BTab"], changed, still=True),
        Step("/", ["=/"], shows("filter requests")),
        Step("/ qwen3 enter", ["=qwen3", "Enter"], both(shows("filter “qwen3”"), gone("filter requests:"))),
        Step("escape (clears filter)", ["Escape"], both(gone("filter “"), title("Requests"))),
        # The filter's escape leaves the focus on Requests: the moves below are its cursor's.
        Step("↓", ["Down"], changed, still=True),
        Step("↑", ["Up"], changed, still=True),
        Step("pgdn", ["NPage"], changed, still=True),
        Step("pgup", ["PPage"], changed, still=True),
        Step("end", ["End"], changed, still=True),
        Step("home", ["Home"], changed, still=True),
        # The request's screen, with the log lines its numbers rest on (`file:line`, whatever its layout).
        Step("enter (request)", ["Down", "Enter"], both(title("Request"), shows("incident.log:"))),
        Step("escape (closes detail)", ["Escape"], both(no_title("Request"), title("Requests"))),
        Step("s", ["=s"], heading("engine ▼", moved=True)),
        Step("S", ["=S"], heading("time ▼")),
        Step("S (from time)", ["=S"], heading("total ▼")),
        Step("r", ["=r"], heading("total ▲")),
        Step("1", ["=1"], title("Latency · last 1m")),
        Step("2", ["=2"], title("Latency · last 5m")),
        Step("3", ["=3"], title("Latency · last 15m")),
        Step("t", ["=t"], title("Residency timeline")),
        Step("escape (closes timeline)", ["Escape"], no_title("Residency timeline")),
        Step("m", ["=m"], title("Models")),
        Step("escape (closes models)", ["Escape"], both(no_title("Models"), title("Requests"))),
        Step("b", ["b"], title("Budget")),
        Step("escape (closes budget)", ["Escape"], both(no_title("Budget"), title("Requests"))),
        *events_key,
        Step("c", ["=c"], shows("columns shown")),
        Step("escape (closes columns)", ["Escape"], gone("columns shown")),
        # The focused table is Events: `space` unticks its one column that may go (engine), escape applies.
        Step("c (again)", ["=c"], shows("columns shown")),
        Step("space", ["Space"], changed, still=True),
        Step("escape (applies)", ["Escape"], both(gone("columns shown"), events_heading(has="engine", present=False))),
        Step("c space escape (back)", ["=c"], shows("columns shown")),
        Step("space (back)", ["Space"], changed, still=True),
        Step("escape (applies, back)", ["Escape"], both(gone("columns shown"), events_heading(has="engine"))),
        # Sideways: only where even the kept columns do not fit, which they do here; the keys must be harmless.
        Step("←", ["Left"], title("Events")),
        Step("→", ["Right"], title("Events")),
        Step("ctrl+p", ["C-p"], shows("Search for commands")),
        Step("escape (closes palette)", ["Escape"], gone("Search for commands")),
        Step("ctrl+p (again)", ["C-p"], shows("Search for commands")),
        Step("screenshot (typed)", ["=screenshot"], shows("Screenshot")),
        Step("enter (screenshot)", ["Enter"], both(saved_svg, shows("screenshot saved"))),
        # One more line of the log: the paused clock moves on to its time (a countdown on screen changes).
        Step("n", ["=n"], both(status_says(r"PAUSED"), changed), still=True),
        Step("j", ["=j"], both(status_says(r"PAUSED"), events_row(new=True)), note_event),
        # Back to just after the event before the one `j` stopped at: the newest row is again what it was.
        Step("J", ["=J"], both(status_says(r"PAUSED"), events_row(like="before j"))),
        Step("-", ["=-"], status_says(rf"· {SPEED // 2}x")),
        Step("+", ["=+"], status_says(rf"· {SPEED}x")),
        # Slow enough (the clock's slowest) that `p` twice is seen playing, then paused again.
        Step("- (to the slowest)", ["=-"] * 17, status_says(r"PAUSED .*· 0\.125x")),
        Step("p", ["=p"], status_says(r"PAUSED", absent=True)),
        Step("p (again)", ["=p"], status_says(r"PAUSED")),
        *([Step("e (back to Requests)", ["=e"], both(title("Requests"), no_title("Events")))] if compact else []),
        Step("ctrl+s", ["C-s"], both(saved_text, shows("screen saved as text"))),
    ]


def play(tmux: Tmux, state: State, step: Step) -> tuple[str | None, Screen]:
    """Send the step's keys and wait until its check holds: (None, the screen), or (why it failed, the screen)."""
    state.before = wait_still(tmux) if step.still else tmux.screen()
    for key in step.keys:
        tmux.send(key)
    deadline = time.monotonic() + LIMIT_S
    while True:
        screen = tmux.screen()
        if (crash := CRASH.search(screen.text)) is not None:
            return f"{crash.group(0)!r} on screen", screen
        if (code := tmux.exit_status()) is not None:
            return f"the dashboard exited (status {code})", screen
        why = step.check(screen, state)
        if why is None:
            if step.remember is not None:
                step.remember(screen, state)
            return None, screen
        if time.monotonic() > deadline:
            return why, screen
        time.sleep(0.2)


def wait_still(tmux: Tmux) -> Screen:
    """The screen once two captures half a second apart are the same (a toast has gone), or after LIMIT_S."""
    deadline = time.monotonic() + LIMIT_S
    last = tmux.screen()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = tmux.screen()
        if now == last:
            return now
        last = now
    return last


def settled(screen: Screen, size: tuple[int, int]) -> bool:
    """Paused at MOMENT with Requests on screen, drawn over the whole pane (its borders reach the last column)."""
    lines = screen.text.splitlines()
    return (titled(screen, "Requests") and "PAUSED" in status(screen)
            and max((len(line) for line in lines), default=0) == size[0])


def wait_for(tmux: Tmux, ready: Callable[[Screen], bool], limit_s: float) -> Screen:
    deadline = time.monotonic() + limit_s
    while True:
        screen = tmux.screen()
        if ready(screen) or time.monotonic() > deadline or tmux.exit_status() is not None:
            return screen
        time.sleep(0.2)


def run(size: tuple[int, int], ietop: Sequence[str], show: bool = False) -> int:
    failures = 0
    with tempfile.TemporaryDirectory(prefix="ietop-keys-") as tmp:
        cwd = Path(tmp)
        conf = cwd / "tmux.conf"
        # The window is born at its size: created at tmux's default 80x24 and then resized, a dashboard that
        # started in between drew at 80x24 in a 120x40 pane (its first size read before the resize came).
        conf.write_text(TMUX_CONF + f"set -g default-size {size[0]}x{size[1]}\n", encoding="utf-8")
        tmux = Tmux(cwd / "tmux.sock", conf, cwd / "exit-status")
        # No user config file: the flags below are the whole setup (and --no-config says so twice).
        env = {**os.environ, "XDG_CONFIG_HOME": str(cwd / "config"), "TERM": "xterm-256color"}
        for name in ("TMUX", "COLUMNS", "LINES"):
            # COLUMNS/LINES would override the pane's size (Python's shutil.get_terminal_size reads them
            # first): under pytest they arrive as 80 and 24, and the dashboard drew 80x24 in a 120x40 pane.
            env.pop(name, None)
        command = [*ietop, "replay", str(INCIDENT), "--speed", str(SPEED), "--until", MOMENT, "--no-config"]
        try:
            tmux.start(size, cwd, command, env)
            screen = wait_for(tmux, lambda s: settled(s, size), LIMIT_S * 2)
            if not settled(screen, size):
                pane = tmux("display-message", "-p", "-t", SESSION, "#{pane_width}x#{pane_height}").strip()
                print(f"FAIL start: the dashboard did not settle at {MOMENT} on the whole {size[0]}x{size[1]} "
                      f"(pane {pane}):\n{screen.text}")
                return 1
            pane = tmux("display-message", "-p", "-t", SESSION, "#{pane_width}x#{pane_height}").strip()
            print(f"ok   start: {shlex.join(command)} at {size[0]}x{size[1]} (pane {pane})")
            state = State(cwd, size)
            for step in steps(size):
                why, screen = play(tmux, state, step)
                print(f"{'ok  ' if why is None else 'FAIL'} {step.label}" + ("" if why is None else f": {why}"))
                if show or why is not None:
                    print(screen.text)
                failures += why is not None
                if tmux.exit_status() is not None:
                    return 1
            tmux.send("=q")
            sent = time.monotonic()
            wait_for(tmux, lambda s: tmux.exit_status() is not None, LIMIT_S)
            code, end = tmux.exit_status(), tmux.screen()
            crash = CRASH.search(end.text)
            ok = code == 0 and crash is None
            print(f"{'ok  ' if ok else 'FAIL'} q: exit status {code} after {time.monotonic() - sent:.1f} s"
                  + ("" if ok else f"; the screen:\n{end.text}"))
            failures += not ok
        finally:
            tmux.kill()
    return 1 if failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", default="80x24", help="the terminal, WIDTHxHEIGHT (default 80x24)")
    parser.add_argument("--ietop", default=f"{shlex.quote(sys.executable)} -m ietop",
                        help="how to run ietop (default: this Python's -m ietop)")
    parser.add_argument("--show", action="store_true", help="print the screen each key passed on")
    args = parser.parse_args(argv)
    m = re.fullmatch(r"(\d+)x(\d+)", args.size)
    if m is None:
        parser.error(f"--size {args.size!r}: WIDTHxHEIGHT, such as 80x24")
    verdict = run((int(m.group(1)), int(m.group(2))), shlex.split(args.ietop), args.show)
    print(f"{'PASS' if verdict == 0 else 'FAIL'} {args.size}")
    return verdict


if __name__ == "__main__":
    sys.exit(main())
