"""Send several requests at once, each from its own thread, released together by a barrier."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any


def run_concurrent(chat: Any, calls: Sequence[tuple[str, dict[str, Any]]], group: str,
                   thread_prefix: str = "client") -> list[Any]:
    """Call ``chat(name, **kwargs)`` for each (name, kwargs) from its own thread, all released at once.

    Returns the records in the order of ``calls``, each with ``concurrent_group = group``.
    """
    results: dict[int, Any] = {}
    barrier = threading.Barrier(len(calls))

    def worker(i: int, name: str, kwargs: dict[str, Any]) -> None:
        barrier.wait()
        results[i] = chat(name, **kwargs)

    threads = [threading.Thread(target=worker, args=(i, name, kw), name=f"{thread_prefix}-{name}")
               for i, (name, kw) in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out = [results[i] for i in range(len(calls))]
    for rec in out:
        rec.concurrent_group = group
    return out
