"""Feeds: what the dashboard's workers run. Each reads a source, parses it (parsers are pure and each feed
owns its parser) and hands batches of `(src, t, event)` to a callback; the store is touched only by
whoever receives the batches (the Textual main thread). Replay is a feed like the others, so live and
replay go through the same parsers and the same store.

No Textual here: the callback is `post` for the app, a list append for tests and benchmarks.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, cast

from ietop.model.store import Store
from ietop.pipeline.clock import ReplayClock
from ietop.pipeline.ingest import (
    SCRAPE,
    FileInput,
    LineParser,
    epoch,
    file_year,
    flush_events,
    make_parser,
    merged_events,
    open_inputs,
)
from ietop.sources.files import read_chunks
from parsers.events import AccessCount, Event
from parsers.text.envelope import strip_inner
from parsers.text.framing import split_texts

Item = tuple[int, float, Event]
BATCH_MAX = 5000
"""Events per batch: bounds the main thread's work per message, so the UI stays responsive."""
READ_BYTES = 256 << 10
"""Most bytes a tail feed reads before parsing them and handing the events on."""
READ_BACK_BYTES = 16 << 20
"""How far back from its end a live log is read for its server's last run: a second or two of catch-up."""
EVIDENCE_KEEP = 20_000
"""Raw lines kept per source for the detail screens (a followed stream may have no file to re-read)."""


@dataclass(slots=True)
class Batch:
    items: list[Item]
    clock: float | None = None
    """Replay: the virtual time the batch brings the dashboard to (None live: the wall clock is now)."""
    done: bool = False
    held: bool = False
    """Replay: the clock was paused at `--until` (the screen shows that moment)."""
    error: str | None = None
    note: str | None = None
    """Something to tell the user that is not a failure (a piped log ended)."""
    lines: dict[int, int] = field(default_factory=dict)
    """Lines read so far, per source."""
    ack: bool = False
    """Replay: released during a jump; the receiver must answer with ReplayClock.ack()."""
    behind: bool = False
    """The source had more to read when this was posted (a backlog, or a replay at full speed): the
    dashboard redraws less often while that lasts, so the feeds catch up."""


Post = Callable[[Batch], None]


class Evidence:
    """The newest raw lines of each source, by line number: what detail screens show as evidence.

    Written by feed threads, read by the UI thread: single dict operations are atomic under the GIL and
    a miss only means "line no longer kept"."""

    def __init__(self, keep: int = EVIDENCE_KEEP) -> None:
        self.keep = keep
        self._rings: dict[int, list[tuple[int, str] | None]] = {}

    def remember(self, src: int, line: int, text: str) -> None:
        self.ring(src)[line % self.keep] = (line, text)

    def ring(self, src: int) -> list[tuple[int, str] | None]:
        """The source's ring, indexed by line number modulo `keep`: one store per line on the ingest path, no
        eviction bookkeeping (TailParse stores into it directly)."""
        ring = self._rings.get(src)
        if ring is None:
            ring = self._rings[src] = [None] * self.keep
        return ring

    def lookup(self, src: int, line: int) -> str | None:
        ring = self._rings.get(src)
        slot = ring[line % self.keep] if ring is not None else None
        return slot[1] if slot is not None and slot[0] == line else None


class ReplayFeed:
    """Saved logs replayed through the live pipeline, paced by a ReplayClock."""

    columnar = False
    """Read the logs that have a columnar reader (ietop.pipeline.bulk.stream.foldable) with it; False: every log
    line by line through TailParse (what bench/replay_speed.py compares it with). Off: measured on a 300 MB
    busy log (2 cores) it replays no faster (TailParse already skips a health check with one regex; both parse
    the rest in Python) and the dashboard's peak RSS goes from ~65 MB to ~240 MB, over its 150 MB budget.
    Both paths give the same store (tests/pipeline/test_replay_bulk.py)."""

    def __init__(self, store: Store, paths: Iterable[str], clock: ReplayClock, evidence: Evidence,
                 engine: str | None = None, until: float | None = None, *, columnar: bool | None = None,
                 names: Mapping[str, str] | None = None) -> None:
        self.clock = clock
        self.until = until
        """Pause the replay at this time (`--until`): the screen then shows that moment."""
        self.evidence = evidence
        # Sniffed now, on the caller's thread: a bad file is a one-line error before the screen opens.
        self.inputs: list[FileInput] = open_inputs(store, paths, engine, names)
        # Each log is parsed as a live tail parses it (TailParse, with the sniffed parser): the replay then
        # shows what `ietop --log` would have shown, health checks counted rather than parsed included.
        self._tails = {inp.src: TailParse(store, inp.path, inp.engine, evidence, parser=inp.parser, src=inp.src)
                       for inp in self.inputs if inp.engine != SCRAPE}
        # Health checks folded in polars need a store that only counts them (the dashboard's): a sink that
        # keeps them wants their HttpAccess events. Decided here, not by the speed: `J` (back) restarts the
        # replay and counts items to where it stood, so a restart must read the logs into the same items.
        self._columnar = (self.columnar if columnar is None else columnar) and store.counts_ok_probes

    def _read(self, inp: FileInput) -> Iterator[tuple[float, int, int, Event]]:
        if self._columnar:
            # Imported at the first read, inside run()'s error handling: polars stays out of the headless core
            # and of the screen's start-up.
            from ietop.model.probes import ProbeTable
            from ietop.pipeline.bulk.stream import bulk_file_events, foldable

            if foldable(inp):
                # Its per-path probe table is analyze's: the dashboard needs only the AccessCount events.
                yield from bulk_file_events(inp, ProbeTable(), ring=self.evidence.ring(inp.src))
                return
        yield from self._read_lines(inp)

    def _read_lines(self, inp: FileInput) -> Iterator[tuple[float, int, int, Event]]:
        tail = self._tails[inp.src]
        seq = 0
        for texts in split_texts(read_chunks(inp.path, READ_BYTES)):
            for src, t, event in tail.parse(texts):
                seq += 1
                yield (t, src, seq, event)
        for event in flush_events(inp.parser):
            seq += 1
            yield (tail.last_t, inp.src, seq, event)
        inp.lines = tail.n

    def run(self, post: Post, stop: threading.Event) -> None:
        clock = self.clock
        events = merged_events(self.inputs, self._read)
        # Released during a jump but past the event it stopped at: released again from here, paced.
        again: deque[Item] = deque()
        items: list[Item] = []
        last_post = time.monotonic()

        def send(**kw: Any) -> bool:
            """Post `items`; after a jump batch, take back what was not applied. False: stopped meanwhile."""
            nonlocal items, last_post
            jump = clock.jumping
            batch, items, last_post = items, [], time.monotonic()
            post(Batch(batch, clock.now(), ack=jump, behind=clock.speed <= 0, **kw))
            if not jump:
                return True
            applied = clock.wait_ack(stop)
            if applied is None:
                return False
            again.extendleft(reversed(batch[applied:]))
            return True

        try:
            while True:
                if again:
                    src, t, event = again.popleft()
                elif (nxt := next(events, None)) is not None:
                    t, src, _seq, event = nxt
                    t = t if t != float("-inf") else 0.0
                elif items and clock.jumping:
                    if not send():  # the jump's last batch may stop short of the end, too
                        return
                    continue
                else:
                    break
                if self.until is not None and t > self.until:
                    clock.pause(at=self.until)
                    self.until = None
                    if not send(held=True):
                        return
                while not clock.wait_until(t, stop, 0.2):
                    if stop.is_set():
                        return
                    if items and not send():
                        return
                items.append((src, t, event))
                due = len(items) >= BATCH_MAX or time.monotonic() - last_post > 0.1 or clock.paused
                if due and not send():
                    return
        except Exception as exc:  # a read error mid-replay: shown in the header, never a crash
            post(Batch(items, clock.now(), done=True, error=f"replay stopped: {exc}"))
            return
        post(Batch(items, clock.now(), done=True, lines={i.src: i.lines for i in self.inputs}))


class Prober(Protocol):
    """A parser that can recognise a successful non-inference access line by one regex (OllamaParser)."""

    ok_probe_tag: str
    ok_probe_refuses: tuple[str, str]
    ok_probe_esc: str
    ok_probe_re: re.Pattern[str]
    ok_probe_seconds: dict[str, float]
    offset: timedelta | None

    def probe_colored(self, raw: str) -> str | None: ...

    def probe_epoch(self, stamp: str) -> float | None: ...

    def probe_time(self, stamp: str, offset: timedelta | None) -> datetime | None: ...


class TailParse:
    """Parse raw lines of one live source (envelopes stripped; a line without a time takes the last)."""

    def __init__(self, store: Store, name: str, engine: str, evidence: Evidence, *,
                 parser: LineParser | None = None, src: int | None = None, year: int | None = None) -> None:
        """`parser`, `src`: a parser made and a source registered already (a replayed file, sniffed first).
        `year`: the year of a clock that prints none (vLLM's `11-30 14:26:45`); this year when not given, as
        lines that arrive live are written now."""
        self.name = name
        self.parser = parser if parser is not None else make_parser(
            engine, year if year is not None else datetime.now().astimezone().year)
        self.src = src if src is not None else store.add_source(name, engine)
        self.evidence = evidence
        self.n = 0
        self._last_t = 0.0
        self._last_ts: datetime | None = None
        # The parser's shortcut for successful non-inference access lines, taken when the store only counts
        # them (see OllamaParser.ok_probe_re): one regex call per health check instead of its events, behind
        # the parser's substring tests, which also keep the regex off the lines it would reject late (no
        # access line: it cost them ~10 %; inference: it read ~80 characters before it saw POST).
        self.prober: Prober | None = (
            cast(Prober, self.parser) if hasattr(self.parser, "ok_probe_re") and store.counts_ok_probes else None)

    @property
    def last_t(self) -> float:
        """The time the last parsed line took (a line without a time takes the one before it)."""
        return self._last_t

    def parse(self, texts: Iterable[str], given: Sequence[datetime | None] | None = None) -> list[Item]:
        """Raw lines → items. `given`: for each line, a time the transport gave (journald's) or None."""
        items: list[Item] = []
        parser, src = self.parser, self.src
        ring = self.evidence.ring(src)
        keep = len(ring)
        last_ts, last_t = self._last_ts, self._last_t
        n = self.n
        prober = self.prober
        probe = prober.ok_probe_re.match if prober is not None else None
        tag, refuse_post, refuse_bold, esc = (
            (prober.ok_probe_tag, *prober.ok_probe_refuses, prober.ok_probe_esc) if prober is not None
            else ("", "", "", ""))
        seconds = prober.ok_probe_seconds if prober is not None else {}
        probes = probe_line = 0
        # `pstamp`: the last probe's stamp, `poffset` the parser's offset it was read under and `pt` its epoch;
        # `pminute`, `pbase`: the minute of the last stamp read in full and its epoch. A probe reuses them
        # while the offset is still that object: a full-path line that teaches the parser another offset
        # replaces the object (an equal new one only costs a re-read). Whole seconds since the epoch are
        # exact in a float, so base + seconds is what probe_epoch() gives for that second.
        pstamp: str | None = None
        pminute, poffset, pt, pbase = "", None, 0.0, 0.0
        first = n
        for text in texts:
            n += 1
            if probe is not None and tag in text and refuse_post not in text and refuse_bold not in text:
                assert prober is not None
                if esc not in text:
                    m = probe(text)
                    stamp = m[1] if m is not None else None
                else:
                    stamp = prober.probe_colored(text)  # gin's colours on a terminal
                if stamp is not None and (stamp != pstamp or prober.offset is not poffset):
                    second = seconds.get(stamp[18:])
                    if second is not None and stamp[:18] == pminute and prober.offset is poffset:
                        pstamp, pt = stamp, pbase + second
                    else:
                        t = prober.probe_epoch(stamp)
                        if t is None:
                            stamp = None
                        else:
                            pstamp, poffset, pt = stamp, prober.offset, t
                            # The minute cache belongs to poffset: refilled, or emptied when this stamp has no
                            # seconds field (`16:34.54`, a date all the same) to take the minute's epoch from.
                            pminute, pbase = (stamp[:18], t - second) if second is not None else ("", 0.0)
                if stamp is not None:
                    # A health check or similar: the store only counts it, so no event is built.
                    probes += 1
                    probe_line = n
                    if pt > last_t:
                        last_t = pt
                    continue
            inner, _kind, env_ts = strip_inner(text)
            if not inner:
                continue
            events = parser.parse(n, inner, env_ts or (given[n - first - 1] if given is not None else None))
            if events:
                ring[n % keep] = (n, text)  # Evidence.remember, inline
            for event in events:
                ts = event.ts
                if ts is not None and ts is not last_ts:  # access lines of one second share one object
                    last_ts = ts
                    t = epoch(ts)
                    if t > last_t:
                        last_t = t
                items.append((src, last_t, event))
        if probes:
            assert prober is not None
            assert pstamp is not None
            items.append((src, last_t, AccessCount(probe_line, prober.probe_time(pstamp, poffset), probes)))
        self.n, self._last_ts, self._last_t = n, last_ts, last_t
        return items


class TailFeed:
    """A log file followed by name (`tail -F`)."""

    def __init__(self, store: Store, path: str, engine: str, evidence: Evidence, *, from_start: bool = False,
                 read_back: int = 0) -> None:
        """`read_back` (bytes; the dashboard's READ_BACK_BYTES): not from the start, and not from the end either,
        but from where the server's last run began (parsers.text.runs), when that is within so many bytes of the end;
        else from that far back, after the run's first lines (ietop.sources.run_head). What the server said at
        start-up and did since is then on screen as if ietop had been watching."""
        from ietop.sources.tailer import FileTailer
        from parsers.text.runs import last_run_start

        # A log followed from its start may be older than this year: the year it was last written.
        self.tail = TailParse(store, path, engine, evidence, year=file_year(path))
        self.engine = engine
        self.run_found: bool | None = None
        """Reading back: whether the window held the run's opening line (None: not reading back, or no file)."""

        def back_to_run(data: bytes) -> int | None:
            at = last_run_start(engine, data)
            self.run_found = at is not None
            return at

        # Reads of READ_BYTES (~2,000 lines): a backlog then goes to the store in batches whose objects die
        # young; 8 MB batches kept ~60k events alive at once and the collector re-walked them (GC time
        # 0.42 -> 0.24-0.32 s on a 300k-line log), and the first lines reach the screen sooner.
        self.tailer = FileTailer(path, from_start=from_start, chunk_size=READ_BYTES, max_read=READ_BYTES,
                                 read_back=back_to_run if read_back else None,
                                 read_back_max=max(1, read_back))

    def run(self, post: Post, stop: threading.Event) -> None:
        src = self.tail.src
        try:
            if self.run_found is not None and self.tailer.offset > 0:
                self._read_back_from(post, stop)
            for lines in self.tailer.follow(stop, timeout=1.0, texts=True):
                if lines:
                    items = self.tail.parse(lines)
                    behind = self.tailer.has_more
                    for i in range(0, max(1, len(items)), BATCH_MAX):
                        post(Batch(items[i:i + BATCH_MAX], lines={src: self.tail.n}, behind=behind))
                elif self.tailer.error:
                    post(Batch([], error=f"{self.tailer.path}: {self.tailer.error}"))
        finally:
            self.tailer.close()

    def _read_back_from(self, post: Post, stop: threading.Event | None = None) -> None:
        """Before the window read back: the lines before it are counted, so that evidence names the file's own
        line numbers; and when the server's run began before the window, its first lines (start-up facts) go
        first."""
        from ietop.sources.run_head import COUNT_MAX, count_lines, run_head

        path, window = self.tailer.path, self.tailer.offset
        head_at, head = run_head(path, self.engine, window, stop=stop) if not self.run_found else (window, [])
        before_head = count_lines(path, 0, head_at, stop=stop) if head_at <= COUNT_MAX else None
        between = count_lines(path, head_at, window, stop=stop) if before_head is not None else None
        if before_head is not None:
            self.tail.n = before_head
        if head:
            items = self.tail.parse(head)
            for i in range(0, len(items), BATCH_MAX):
                post(Batch(items[i:i + BATCH_MAX], lines={self.tail.src: self.tail.n}, behind=True))
        if before_head is not None and between is not None:
            self.tail.n = before_head + between
