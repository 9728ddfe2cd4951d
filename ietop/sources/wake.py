"""Wake a file tailer when its file changes: a watchdog observer of the file's parent directory.

The observer thread only sets an ``Event``; the tailer's own thread reads. Watching the directory, not the
file, is what makes creation and renames of the path visible (a rotated log is a new file by that name).
"""

from __future__ import annotations

import os
import threading

from watchdog.events import EVENT_TYPE_CLOSED_NO_WRITE, EVENT_TYPE_OPENED, FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

__all__ = ["start_wake_observer"]

_IGNORED_EVENTS = frozenset({EVENT_TYPE_OPENED, EVENT_TYPE_CLOSED_NO_WRITE})
"""inotify reports our own open/close of the file; waking on them would only cause a spare read."""


class _WakeHandler(FileSystemEventHandler):
    """Runs on the observer thread: it only sets the tailer's event, never reads."""

    def __init__(self, name: str, wake: threading.Event) -> None:
        super().__init__()
        self._name = name
        self._wake = wake

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in _IGNORED_EVENTS:
            return
        # The whole parent directory is watched (so that creation and renames of the path are seen);
        # wake only for events that name our file, so a busy /var/log does not keep us spinning.
        for p in (event.src_path, event.dest_path):
            if p and os.path.basename(os.fsdecode(p)) == self._name:
                self._wake.set()
                return


def start_wake_observer(path: str, wake: threading.Event) -> BaseObserver | None:
    """A started observer that sets ``wake`` on events naming ``path``; None when watching is impossible
    (no directory, inotify limits): the caller's stat polling then stands alone."""
    parent = os.path.dirname(os.path.abspath(path))
    observer = Observer()
    try:
        observer.schedule(_WakeHandler(os.path.basename(path), wake), parent, recursive=False)
        observer.start()
    except Exception:  # any failure leaves the stat fallback
        return None
    return observer
