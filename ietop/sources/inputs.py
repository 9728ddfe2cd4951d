"""The paths a user names on the command line, checked before any work, and made readable more than once.

`analyze` and `replay` read a file several times: detection reads its head, a forced engine is checked on
its first lines, then the whole file is read. A pipe (`<(gzip -dc incident.log.gz)`), a FIFO or standard
input (`-`) can be read only once: the second open sees what is left (or blocks, for a FIFO whose writer
has gone). Such an input is copied, once and streaming, into a private temporary file, and read from
there; it keeps its own name in every report.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

STDIN = "-"


def _shown(name: str) -> str:
    return name if name.isprintable() else repr(name)


def path_problem(path: str) -> str | None:
    """Why `path` cannot be read as a saved log, as a one-line message; None when it can."""
    if path == STDIN:
        return None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"{_shown(path)}: no such file" + (" (a broken symbolic link)" if os.path.islink(path) else "")
    except PermissionError:
        return f"{_shown(path)}: permission denied (a directory on its path cannot be entered)"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"{_shown(path)}: a loop of symbolic links"
        if exc.errno == errno.ENOTDIR:
            return f"{_shown(path)}: a part of the path is not a directory"
        return f"{_shown(path)}: {(exc.strerror or str(exc)).lower()}"
    if stat.S_ISDIR(st.st_mode):
        return f"{_shown(path)}: is a directory, expected a log file"
    if stat.S_ISREG(st.st_mode) and not os.access(path, os.R_OK):
        return f"{_shown(path)}: permission denied"
    return None


def read_once(path: str) -> bool:
    """Whether `path` is something a second open would not read again from the start."""
    if path == STDIN:
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode)


@dataclass(slots=True)
class Inputs:
    """The paths to read (`read`) and the names to show for them (`shown`: the user's, same order)."""

    read: list[str]
    shown: list[str]
    repeated: list[tuple[str, str]] = field(default_factory=list)
    """(path, the earlier path it is the same file as): each is read once, not twice."""

    @property
    def names(self) -> dict[str, str]:
        return {r: s for r, s in zip(self.read, self.shown, strict=True) if r != s}


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


@contextmanager
def readable(paths: Sequence[str]) -> Iterator[Inputs]:
    """Inputs that can each be read as often as needed; a pipe, FIFO or `-` is copied to a temporary file
    (removed on exit). The same regular file named twice (two spellings, a link) is kept once."""
    with tempfile.TemporaryDirectory(prefix="ietop-input-") as tmp:
        read: list[str] = []
        shown: list[str] = []
        repeated: list[tuple[str, str]] = []
        seen: dict[tuple[int, int], str] = {}
        for i, path in enumerate(paths):
            ident = _identity(path)
            if ident is not None and ident in seen:
                repeated.append((path, seen[ident]))
                continue
            if ident is not None:
                seen[ident] = path
            if read_once(path):
                copy = os.path.join(tmp, f"input-{i}")
                _copy(path, copy)
                read.append(copy)
            else:
                read.append(path)
            shown.append(path)
        yield Inputs(read, shown, repeated)


def _copy(path: str, target: str) -> None:
    with open(target, "wb") as out:
        if path == STDIN:
            shutil.copyfileobj(sys.stdin.buffer, out, 1 << 20)
            return
        with open(path, "rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
