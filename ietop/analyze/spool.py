"""A store sink that spools finalized records to disk, one JSON line each, per kind.

Why: a multi-GB log has millions of requests; the report must list all of them but `analyze` must keep
its memory flat in the size of the log. Records are serialized the moment the store finalizes them and
read back, in order, only when the report is written. Reading back is also when an Ollama blob gets its name:
the line that names it can come after the record was spooled, even in another file.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from json.encoder import encode_basestring
from typing import IO, Any

from ietop.model.names import resolve
from ietop.model.probes import ProbeTable, is_probe
from ietop.model.records import json_text

KINDS = ("request", "load", "unload", "truncation", "error", "task", "prompt", "stats", "preemption", "hint")
# A record's model fields as written here (`"model":"sha256-…"`, a load's trigger request's too). A quote
# inside a JSON string is always escaped, so this never matches within a prompt or a message.
_MODEL_FIELD_RE = re.compile(r'([{,]"(?:for_)?model":)("(?:[^"\\]|\\.)*")')


def json_dumps() -> Callable[[Any], str]:
    """The compact JSON encoder of every report (ietop.model.records.json_text: NaN and infinities as null)."""
    return json_text


class Spool:
    """Per-kind JSON-lines spool files in a private temporary directory."""

    def __init__(self, paths: Sequence[str]) -> None:
        self._paths = paths
        self._dir = tempfile.TemporaryDirectory(prefix="ietop-analyze-")
        self._files: dict[str, IO[str]] = {}
        self.counts: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.hooks: list[Callable[[str, Any], None]] = []
        self._dumps = json_dumps()
        self.aliases: Mapping[str, str] = {}
        """Blob → model name (the store's LoadTracker.aliases), applied as records are read back."""
        self.probes: ProbeTable | None = None
        """Where successful probes are counted instead of spooled (`ietop.analyze/2`); None lists them."""

    def __call__(self, kind: str, record: Any) -> None:
        for hook in self.hooks:
            hook(kind, record)
        if kind == "request" and self.probes is not None and is_probe(record.method, record.status,
                                                                       record.inference):
            self.probes.add_request(record)
            return
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
        # Few blobs get named, and most lines hold none of them: one search for any of them skips the rest.
        named = re.compile("|".join(map(re.escape, self.aliases))) if self.aliases else None
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                yield line if named is None or named.search(line) is None else self._named(line)

    def _named(self, line: str) -> str:
        """The line with each model field that holds a named blob replaced by the name (names.resolve)."""
        aliases = self.aliases

        def name(m: re.Match[str]) -> str:
            value = json.loads(m.group(2))
            named = resolve(value, aliases)
            return m.group(0) if named == value or named is None else m.group(1) + encode_basestring(named)

        return _MODEL_FIELD_RE.sub(name, line)

    def records(self, kind: str) -> Iterator[dict[str, Any]]:
        for line in self.raw_lines(kind):
            yield json.loads(line)

    def file(self, kind: str) -> str | None:
        path = os.path.join(self._dir.name, kind + ".jsonl")
        return path if os.path.exists(path) else None

    def named_file(self, kind: str) -> str | None:
        """`file(kind)` as `raw_lines` reads it back (models named): a copy, made once, when a blob was named."""
        path = self.file(kind)
        if path is None or not self.aliases:
            return path
        named = os.path.join(self._dir.name, kind + ".named.jsonl")
        if not os.path.exists(named):
            with open(named, "w", encoding="utf-8") as f:
                for line in self.raw_lines(kind):
                    f.write(line)
                    f.write("\n")
        return named

    def cleanup(self) -> None:
        self.close_writers()
        self._dir.cleanup()
