"""A log file followed as it grows, applied straight to a store: the live pipeline without the app's threads
(the end-to-end tests drive it one `pump()` at a time)."""

from __future__ import annotations

from ietop.model.store import Store


class LiveLog:
    """A log file followed as it grows (`tail -F`), through the dashboard's own tail path (`TailParse` over
    `FileTailer.read_texts`), applied straight to a store: the end-to-end tests drive the live pipeline with
    it, one `pump()` at a time, without the app's threads.

    `pump()` reads what is available now and applies it to the store. Nothing here blocks.
    """

    def __init__(self, store: Store, path: str, engine: str, *, from_start: bool = True) -> None:
        from ietop.pipeline.feeds import Evidence, TailParse  # feeds builds on this module: imported when used
        from ietop.sources.tailer import FileTailer

        self.store = store
        self.path = path
        self.tail = TailParse(store, path, engine, Evidence())
        self.parser = self.tail.parser
        self.src = self.tail.src
        self.tailer = FileTailer(path, from_start=from_start)

    def pump(self) -> int:
        """Apply every complete line written since the last call; returns the number of lines."""
        count = 0
        while True:
            texts = self.tailer.read_texts()
            self.store.apply_all(self.tail.parse(texts))
            count += len(texts)
            if not self.tailer.has_more:
                break
        info = self.store.sources[self.src]
        info.lines = self.tail.n
        info.version = info.version or self.parser.version
        return count

    def close(self) -> None:
        self.tailer.close()
