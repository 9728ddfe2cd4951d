"""Back to the previous event in a replay (`J`): where it was, worked out by replaying the log again.

A store cannot be undone, so going back means starting the replay over and stopping at the right item. Which
item that is, this module works out first, on a worker thread and into a store of its own: the replay
drained at full speed and applied one item at a time, noting each item after which Store.events_total
changed (an Events row). The dashboard then starts over and stops after that many items, as a forward jump
stops after its event. No Textual here.
"""

from __future__ import annotations

import threading
from typing import Protocol

from ietop.model.store import Store
from ietop.pipeline.feeds import Batch, Post


class Feed(Protocol):
    def run(self, post: Post, stop: threading.Event) -> None: ...


def back_target(store: Store, feed: Feed, position: int, stop: threading.Event) -> int | None:
    """How many items a replay standing `position` items in must apply from the start to stand just after the
    last event before that position (0: there is none; the start). `store` and `feed`: a fresh replay of the
    same logs. None when `stop` was set meanwhile."""
    changes: list[int] = []
    applied = 0
    last = store.events_total
    # The feed checks `halt` before each item it releases (at full speed it never waits): set once the
    # position is reached, or from `stop` at the next batch (within 0.1 s).
    halt = threading.Event()

    def post(batch: Batch) -> None:
        nonlocal applied, last
        for item in batch.items:
            if applied >= position or stop.is_set():
                halt.set()
                return
            store.apply_all((item,))
            applied += 1
            total = store.events_total
            if total != last:
                changes.append(applied)
                last = total

    feed.run(post, halt)
    if stop.is_set():
        return None
    return max((c for c in changes if c < position), default=0)
