"""Cached build directories under ``$IETOP_E2E_CACHE`` / ``~/.cache/ietop-e2e``: key hashing, an exclusive
``flock`` per target, a completion marker written last, and pruning of stale siblings.

A target directory is complete only once its :data:`MARKER` exists; one without it is a broken build and is
rebuilt. Builds run under an exclusive lock on ``<target>.lock`` beside it, so parallel pytest workers wait for
one builder instead of racing.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

MARKER = ".ietop-complete.json"

Marker = dict[str, object]

# Substrings of pip output that mean "could not reach the package index" rather than "broken install".
NETWORK_SIGNS = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "No route to host",
    "ConnectTimeoutError",
    "Connection refused",
    "Read timed out",
    "ProxyError",
    "Could not fetch URL",
)


class BuildError(RuntimeError):
    """A cached venv or model could not be built. ``kind`` says why (e.g. ``"network"``, ``"unavailable"``,
    ``"disk"``, ``"other"``); ``log_path`` is the build log, if any."""

    def __init__(self, message: str, kind: str, log_path: Path | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.log_path = log_path


def cache_root() -> Path:
    """``$IETOP_E2E_CACHE`` or ``~/.cache/ietop-e2e``, created if missing."""
    env = os.environ.get("IETOP_E2E_CACHE")
    root = Path(env).expanduser() if env else Path.home() / ".cache" / "ietop-e2e"
    root.mkdir(parents=True, exist_ok=True)
    return root


def hash_key(*parts: object) -> str:
    """A 16-hex-digit key of ``parts`` (JSON, sorted keys)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def file_digest(*paths: Path) -> str:
    """SHA-256 of the concatenated bytes of ``paths`` (e.g. a builder script and the modules it imports)."""
    h = hashlib.sha256()
    for path in paths:
        h.update(path.read_bytes())
    return h.hexdigest()


@contextlib.contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` (created if missing)."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def lock_path_of(target: Path) -> Path:
    return target.parent / (target.name + ".lock")


def read_marker(directory: Path) -> Marker | None:
    try:
        data = json.loads((directory / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_marker(directory: Path, data: Marker) -> None:
    tmp = directory / (MARKER + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    tmp.replace(directory / MARKER)


def prune_stale(keep: Path, pattern: str, field: str | None = None) -> None:
    """Remove sibling cache entries (``pattern``) other than ``keep``: old pins or old builder versions.

    With ``field``, only entries of the same family are removed: those whose marker has the same ``field`` value
    as ``keep``'s (e.g. same Python for venvs), or no marker at all (broken builds). An entry is only removed
    when its lock can be taken at once, so a build in progress is never touched.
    """
    mine = (read_marker(keep) or {}).get(field) if field is not None else None
    for other in keep.parent.glob(pattern):
        if other == keep or not other.is_dir():
            continue
        if field is not None:
            theirs = read_marker(other)
            if theirs is not None and theirs.get(field) != mine:
                continue
        lock = lock_path_of(other)
        with open(lock, "a+") as fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue
            try:
                shutil.rmtree(other, ignore_errors=True)
                for extra in other.parent.glob(other.name + ".*"):
                    if extra != lock:
                        extra.unlink(missing_ok=True)
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        lock.unlink(missing_ok=True)


def ensure_cached(target: Path, build: Callable[[], Marker], *, usable: Callable[[Marker | None], bool] | None = None,
                  prune: str | None = None, prune_field: str | None = None) -> tuple[Marker, bool]:
    """Return ``(marker, built_now)`` for ``target``, calling ``build()`` under its lock if it is not complete.

    ``usable(marker)`` (default: a marker exists) decides whether a cached entry can be used. ``build`` must
    write the marker itself (with :func:`write_marker`) and return it. After a fresh build, siblings matching
    ``prune`` are removed (see :func:`prune_stale`).
    """
    ok = usable if usable is not None else (lambda marker: marker is not None)
    marker = read_marker(target)
    if ok(marker):
        assert marker is not None
        return marker, False
    with locked(lock_path_of(target)):
        marker = read_marker(target)  # another worker may have finished while we waited
        if ok(marker):
            assert marker is not None
            return marker, False
        marker = build()
    if prune is not None:
        prune_stale(target, prune, prune_field)
    return marker, True


def tail(text: str, lines: int = 25) -> str:
    # pip's "Location 'file:///…' is ignored" lines (from local find-links/extra indexes) are noise here.
    kept = [line for line in text.splitlines() if "is ignored: it is neither a file nor a directory" not in line]
    return "\n".join(kept[-lines:])


def classify_pip_failure(output: str) -> str:
    """``"network"``, ``"unavailable"`` (no matching wheel), ``"disk"`` or ``"other"``."""
    if any(sign in output for sign in NETWORK_SIGNS):
        return "network"
    if "No matching distribution found" in output or "Could not find a version that satisfies" in output:
        return "unavailable"
    if "No space left on device" in output:
        return "disk"
    return "other"


def number(marker: Marker, key: str) -> float:
    """``marker[key]`` as a float (0.0 if missing or not a number)."""
    value = marker.get(key, 0.0)
    return float(value) if isinstance(value, (int, float)) else 0.0
