"""A store sink that spools finalized records to disk, one JSON line each, per kind.

Why: a multi-GB log has millions of requests; the report must list all of them but `analyze` must keep
its memory flat in the size of the log. Records are serialized the moment the store finalizes them and
read back, in order, only when the report is written.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

KINDS = ("request", "load", "unload", "truncation", "error", "task", "prompt", "stats", "preemption", "hint")


class Spool:
    """Per-kind JSON-lines spool files in a private temporary directory."""

    def __init__(self, paths: Sequence[str]) -> None:
        self._paths = paths
        self._dir = tempfile.TemporaryDirectory(prefix="ietop-analyze-")
        self._files: dict[str, IO[str]] = {}
        self.counts: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.hooks: list[Callable[[str, Any], None]] = []
        self._dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    def __call__(self, kind: str, record: Any) -> None:
        for hook in self.hooks:
            hook(kind, record)
        f = self._files.get(kind)
        if f is None:
            f = self._files[kind] = open(  # noqa: SIM115 - kept open for the life of the spool
                os.path.join(self._dir.name, kind + ".jsonl"), "w", encoding="utf-8", buffering=1 << 20
            )
        line = getattr(record, "json_line", None)
        f.write(line(self._paths) if line is not None else self._dumps(record.as_dict(self._paths)))
        f.write("\n")
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def close_writers(self) -> None:
        for f in self._files.values():
            f.close()

    def raw_lines(self, kind: str) -> Iterator[str]:
        """The spooled JSON texts of one kind, in the order they were finalized."""
        path = os.path.join(self._dir.name, kind + ".jsonl")
        if not os.path.exists(path):
            return
        with open(path, encoding="utf-8") as f:
            for line in f:
                yield line.rstrip("\n")

    def records(self, kind: str) -> Iterator[dict[str, Any]]:
        for line in self.raw_lines(kind):
            yield json.loads(line)

    def file(self, kind: str) -> str | None:
        path = os.path.join(self._dir.name, kind + ".jsonl")
        return path if os.path.exists(path) else None

    def cleanup(self) -> None:
        self.close_writers()
        self._dir.cleanup()
