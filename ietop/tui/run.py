"""Build the store, the feeds and the app for `ietop`, `ietop replay` and `ietop demo`, and run it.

Everything that can fail before the screen opens (a missing file, an unknown log format) fails here
with one line, so the dashboard never starts half-broken."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, BinaryIO

from ietop.clock import ReplayClock
from ietop.feeds import READ_BACK_BYTES, CommandFeed, Evidence, ProxyFeed, ReplayFeed, TailFeed
from ietop.model.live import LiveView
from ietop.model.store import Store
from ietop.tui.app import IetopApp, Setup
from ietop.tui.replay_control import ReplayParts

if TYPE_CHECKING:
    from ietop.discover import Plan


def new_store() -> tuple[Store, LiveView, Evidence]:
    view = LiveView()
    store = Store(view)
    view.attach(store)
    return store, view, Evidence()


def replay_app(paths: Sequence[str], speed: float, engine: str | None = None, *, title: str = "ietop replay",
               hardware: bool = False, paused: bool = False, until: float | None = None,
               window_index: int = 1) -> IetopApp:
    """Raises FormatError/SourceError (one line) for a file that cannot be replayed."""
    store, view, evidence = new_store()
    clock = ReplayClock(speed)
    if paused:
        clock.toggle_pause()
    feed = ReplayFeed(store, paths, clock, evidence, engine, until)

    def restart(speed: float) -> ReplayParts:
        """The same replay from its start (`J`); `--until` is behind the user by then."""
        store, view, evidence = new_store()
        clock = ReplayClock(speed)
        return ReplayParts(store, view, evidence, ReplayFeed(store, paths, clock, evidence, engine), clock)

    setup = Setup(feeds=[feed], clock=clock, hardware=hardware, title=title, window_index=window_index,
                  restart=restart)
    return IetopApp(store, view, evidence, setup)


def live_app(plan: Plan, poll_interval: float = 2.0) -> IetopApp:
    from ietop.pipeline import sniff
    from ietop.sources.procs import CommandLines, StdinLines, docker_argv, journal_argv

    store, view, evidence = new_store()
    feeds: list[object] = []
    for engine, path in plan.logs:
        if path == "-":
            feeds.append(CommandFeed(store, "stdin", engine or "ollama", evidence, StdinLines(_stdin_for_data())))
            continue
        feeds.append(TailFeed(store, path, engine or sniff(path), evidence, read_back=READ_BACK_BYTES))
    for engine, unit in plan.journals:
        feeds.append(CommandFeed(store, f"journal:{unit}", engine, evidence, CommandLines(journal_argv(unit)),
                                 journal_json=True))
    for engine, container in plan.dockers:
        feeds.append(CommandFeed(store, f"docker:{container}", engine, evidence,
                                 CommandLines(docker_argv(container))))
    if plan.proxy is not None:
        if plan.proxy_upstream is None:
            raise ValueError("--proxy needs an engine to forward to: add --proxy-upstream URL (or --ollama URL…)")
        feeds.append(ProxyFeed(store, plan.proxy, plan.proxy_upstream))
    setup = Setup(feeds=feeds, endpoints=plan.endpoints, discovered=plan.discovered, title="ietop",
                  poll_interval=poll_interval)
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
