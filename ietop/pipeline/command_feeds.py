"""Feeds that run something rather than read a file: a command's output (`journalctl -f`, `docker logs -f`, or
stdin) and the proxy inside the dashboard; and what either posts when it cannot run, so that the source shows
as failed for as long as the dashboard runs, with the command's own words."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Any

from ietop.model.store import SourceFailed, Store
from ietop.pipeline.feeds import Batch, Evidence, Post, TailParse
from ietop.pipeline.ingest import epoch
from ietop.sources.procs import MAX_BATCH

FAILED_DETAIL_MAX = 300
"""Characters of a command's last stderr line kept for the Events row (a line can be 64 KiB)."""


def _cut(text: str) -> str:
    return text if len(text) <= FAILED_DETAIL_MAX else text[:FAILED_DETAIL_MAX - 1] + "…"


def failed(src: int, toast: str, reason: str, detail: str) -> Batch:
    """A source gave up for good: the toast now, and SourceFailed for the store, which keeps it on the source
    (the header says so) and as an Events row (with `detail`: what the source said about it)."""
    event = SourceFailed(0, datetime.now().astimezone(), reason, detail)
    return Batch([(src, time.time(), event)], error=toast)


class CommandFeed:
    """Lines from a command (`journalctl -f -o json`, `docker logs -f -t`) or from stdin."""

    def __init__(self, store: Store, name: str, engine: str, evidence: Evidence, lines: Any,
                 journal_json: bool = False) -> None:
        self.lines = lines
        """An ietop.sources.procs CommandLines or StdinLines (started by run)."""
        self.journal_json = journal_json
        self.tail = TailParse(store, name, engine, evidence)

    def run(self, post: Post, stop: threading.Event) -> None:
        from parsers.text.journal_json import journal_record

        error = self.lines.start() if hasattr(self.lines, "start") else None
        if error:
            post(failed(self.tail.src, f"{self.tail.name}: {error}", error, ""))
            return
        try:
            while not stop.is_set():
                got = self.lines.read_available(0.25)
                if got:
                    texts = [text for _n, text in got]
                    given: list[datetime | None] | None = None
                    if self.journal_json:
                        given = []
                        for i, text in enumerate(texts):
                            rec = journal_record(text)
                            if rec is not None:
                                given.append(rec[0])
                                texts[i] = rec[1]
                            else:
                                given.append(None)
                    post(Batch(self.tail.parse(texts, given), lines={self.tail.src: self.tail.n},
                               behind=len(got) >= MAX_BATCH))
                elif self.lines.exited is not None:
                    code = self.lines.exited
                    if code == 0:
                        post(Batch([], note=f"{self.tail.name}: the stream ended"))
                    else:
                        # The command's own words say why (docker: no daemon, no such container); ours only
                        # that it stopped. Stdin has no stderr of its own (and never fails).
                        said = _cut(getattr(self.lines, "last_stderr", None) or "")
                        reason = f"exit {code}" if code > 0 else f"killed by signal {-code}"
                        toast = f"{self.tail.name}: stream ended ({reason})" + (f": {said}" if said else "")
                        post(failed(self.tail.src, toast, reason, said))
                    return
        finally:
            self.lines.stop()


class ProxyFeed:
    """`ietop --proxy PORT`: an `ietop proxy` inside the dashboard; each measured request is an event."""

    def __init__(self, store: Store, listen: str, upstream: str, *, allow_remote: bool = False) -> None:
        from ietop.sources.proxy import parse_listen

        self.host, self.port = parse_listen(listen, allow_remote=allow_remote)  # ValueError: a usage error
        self.listen, self.upstream = listen, upstream
        self.src = store.add_source(f"proxy:{listen}", "proxy")
        self.url: str | None = None

    def run(self, post: Post, stop: threading.Event) -> None:
        from ietop.sources.proxy import BackgroundServer
        from ietop.sources.proxy_app import make_app
        from parsers.events import ProxyRequest

        src = self.src

        def measured(event: ProxyRequest) -> None:
            # On the proxy's event loop: hand the measurement over and return at once.
            post(Batch([(src, epoch(event.ts) if event.ts is not None else time.time(), event)]))

        server = BackgroundServer(make_app(self.upstream, measured), self.host, self.port)
        try:
            self.url = server.start()
        except (OSError, RuntimeError) as exc:
            post(failed(src, f"proxy: cannot listen on {self.listen}: {exc}", "cannot listen", str(exc)))
            return
        try:
            stop.wait()
        finally:
            server.stop()
