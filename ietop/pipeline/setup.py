"""What `ietop` and `ietop export` watch, built from a discovery plan: a store, its evidence
ring and one feed per log, journal, container and proxy. Fails before anything starts (one line)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO

from ietop.model.live import LiveView
from ietop.model.store import Store
from ietop.pipeline.command_feeds import CommandFeed, ProxyFeed
from ietop.pipeline.feeds import READ_BACK_BYTES, Evidence, TailFeed

if TYPE_CHECKING:
    from ietop.pipeline.discover import Plan


def new_store() -> tuple[Store, LiveView, Evidence]:
    view = LiveView()
    store = Store(view)
    view.attach(store)
    return store, view, Evidence()


def live_feeds(store: Store, evidence: Evidence, plan: Plan, open_stdin: Callable[[], BinaryIO],
               read_back: int = READ_BACK_BYTES) -> list[object]:
    """One feed per source of the plan; `open_stdin()` gives the stream a `--log -` reads (the dashboard moves
    it off fd 0, which it needs for keys); each log is read back up to `read_back` bytes to its server's current
    run. Raises ValueError for a plan that cannot run."""
    from ietop.pipeline.ingest import sniff
    from ietop.sources.procs import CommandLines, StdinLines, docker_argv, journal_argv

    feeds: list[object] = []
    for engine, path in plan.logs:
        if path == "-":
            feeds.append(CommandFeed(store, "stdin", engine or "ollama", evidence, StdinLines(open_stdin())))
            continue
        feeds.append(TailFeed(store, path, engine or sniff(path), evidence, read_back=read_back))
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
    return feeds
