"""Progress of a long `analyze` on a terminal: bytes read, lines/s, time left (rich), on stderr.

Shown only where someone watches it (stderr a terminal, the report not JSON on stdout; see cli._analyze).
The readers call it once per window or chunk read, so its cost does not depend on the number of lines.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

_COMPRESSED = (b"\x1f\x8b", b"\x28\xb5\x2f\xfd")  # gzip, zstd: their size says nothing of the text's


def plain_size(paths: Sequence[str]) -> int | None:
    """Total bytes the readers will see, when every file is uncompressed (else unknown: no ETA)."""
    total = 0
    for path in paths:
        try:
            with open(path, "rb") as f:
                if f.read(4).startswith(_COMPRESSED):
                    return None
            total += os.path.getsize(path)
        except OSError:
            return None
    return total


class _LinesPerSecond(ProgressColumn):
    def render(self, task: Task) -> Text:
        elapsed = task.elapsed or 0.0
        lines = int(task.fields.get("lines", 0))
        rate = f"{lines / elapsed / 1e3:,.0f}k lines/s" if elapsed > 0.5 else "… lines/s"
        return Text(f"{rate} ({lines / 1e6:.1f}M)", style="progress.data.speed")


class ReadProgress:
    """A context manager; call it with (bytes, lines) as they are read."""

    def __init__(self, total: int | None, console: Console | None = None) -> None:
        self._progress = Progress(
            TextColumn("reading"), BarColumn(bar_width=20), DownloadColumn(), _LinesPerSecond(),
            TimeRemainingColumn(), console=console or Console(stderr=True), transient=True,
        )
        self._task = self._progress.add_task("read", total=total, lines=0)
        self._lines = 0

    def __enter__(self) -> ReadProgress:
        self._progress.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._progress.stop()

    def __call__(self, nbytes: int, nlines: int) -> None:
        self._lines += nlines
        self._progress.update(self._task, advance=nbytes, lines=self._lines)
