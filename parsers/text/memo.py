"""Bounded memos for the parsers' hot paths: what a line (or part of one) meant, kept for its next repeat.

Log lines repeat word for word (a model's blob path on every scheduler line, the same load metadata on
every load). A memo is a plain dict, read with `.get()` on the hot path; this is how one is written, so
that every memo stays bounded in entries and in bytes: texts longer than `max_key_len` (a server config,
a logged prompt) are never kept, and a full memo is emptied rather than evicted one entry at a time (no
bookkeeping per hit; a log's repeating lines come back within the next few thousand).
"""

from __future__ import annotations

from typing import TypeVar

V = TypeVar("V")

MAX_ENTRIES = 2048
MAX_KEY_LEN = 1024


def remember(memo: dict[str, V], key: str, value: V, *, max_entries: int = MAX_ENTRIES,
             max_key_len: int = MAX_KEY_LEN) -> None:
    """Keep `value` under `key` in `memo` within the bounds above."""
    if len(key) > max_key_len:
        return
    if len(memo) >= max_entries:
        memo.clear()
    memo[key] = value
