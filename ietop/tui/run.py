"""Build the store, the feeds and the app for `ietop`, `ietop replay` and `ietop demo`, and run it.

Everything that can fail before the screen opens (a missing file, an unknown log format) fails here
with one line, so the dashboard never starts half-broken."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, BinaryIO

from ietop.pipeline.clock import ReplayClock
from ietop.pipeline.feeds import ReplayFeed
from ietop.pipeline.setup import live_feeds, new_store
from ietop.tui.app import IetopApp, Setup
from ietop.tui.replay_control import ReplayParts

if TYPE_CHECKING:
    from ietop.pipeline.discover import Plan


def replay_app(paths: Sequence[str], speed: float, engine: str | None = None, *, title: str = "ietop replay",
               hardware: bool = False, paused: bool = False, until: float | None = None,
               window_index: int = 1, names: Mapping[str, str] | None = None, theme: str | None = None) -> IetopApp:
    """Raises FormatError/SourceError (one line) for a file that cannot be replayed. `names`: what to call a
    path read under another name (a pipe copied to a temporary file)."""
    store, view, evidence = new_store()
    clock = ReplayClock(speed)
    if paused:
        clock.toggle_pause()
    feed = ReplayFeed(store, paths, clock, evidence, engine, until, names=names)

    def restart(speed: float) -> ReplayParts:
        """The same replay from its start (`J`); `--until` is behind the user by then."""
        store, view, evidence = new_store()
        clock = ReplayClock(speed)
        return ReplayParts(store, view, evidence, ReplayFeed(store, paths, clock, evidence, engine, names=names),
                           clock)

    setup = Setup(feeds=[feed], clock=clock, hardware=hardware, title=title, window_index=window_index,
                  restart=restart, theme=theme)
    return IetopApp(store, view, evidence, setup)


def live_app(plan: Plan, poll_interval: float = 2.0, theme: str | None = None) -> IetopApp:
    store, view, evidence = new_store()
    feeds = live_feeds(store, evidence, plan, _stdin_for_data)
    setup = Setup(feeds=feeds, endpoints=plan.endpoints, discovered=plan.discovered, title="ietop",
                  poll_interval=poll_interval, theme=theme)
    return IetopApp(store, view, evidence, setup)


def _stdin_for_data() -> BinaryIO:
    """`cat server.log | ietop --log -`: the log arrives on stdin, but the dashboard reads keys from fd 0.
    Move the pipe to a new descriptor and put the terminal back on fd 0, as `less` does."""
    data = os.fdopen(os.dup(0), "rb", buffering=0)
    if not os.isatty(0):
        try:
            tty = os.open("/dev/tty", os.O_RDONLY)
        except OSError:
            return data  # no terminal at all (a test, a pipe to a pipe): keys are simply not read
        os.dup2(tty, 0)
        os.close(tty)
    return data
