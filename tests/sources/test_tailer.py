"""FileTailer follows a path through everything that happens to real log files, losing and repeating nothing.

Each case drives the file system directly (append, copytruncate, logrotate's rename + create, delete +
recreate, a path that appears later) and checks the lines, their per-file offsets and generations, and the
counters. The burst test writes a million lines from a thread while ``follow()`` reads, and checks that the
line numbers embedded in the text come back consecutive and complete.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ietop.sources.tailer import FileTailer
from parsers.text.framing import Line

MakeTailer = Callable[..., FileTailer]

def _texts(lines: list[Line]) -> list[str]:
    return [line.text for line in lines]


def _append(path: Path, data: bytes) -> None:
    with path.open("ab") as f:
        f.write(data)


def _drain(tailer: FileTailer) -> list[tuple[int, Line]]:
    """Read until the tailer has nothing more right now; pair each line with its generation."""
    out: list[tuple[int, Line]] = []
    while True:
        batch = tailer.read_available()
        out += [(tailer.generation, line) for line in batch]
        if not tailer.has_more:
            return out


@pytest.fixture
def make_tailer() -> Iterator[MakeTailer]:
    """Build tailers that are closed after the test, so no descriptor outlives it."""
    made: list[FileTailer] = []

    def make(path: Path, **kwargs: Any) -> FileTailer:
        made.append(FileTailer(path, **kwargs))
        return made[-1]

    yield make
    for tailer in made:
        tailer.close()


def _wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_append_returns_new_lines_with_file_offsets(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"a\nbb\n")
    with FileTailer(log) as t:
        assert t.exists
        assert t.read_available() == [Line(0, "a", False), Line(2, "bb", False)]
        assert t.read_available() == []
        _append(log, b"ccc\n")
        assert t.read_available() == [Line(5, "ccc", False)]
        assert (t.lines, t.bytes, t.rotations, t.truncations, t.generation) == (3, 9, 0, 0, 0)


def test_partial_line_is_held_until_completed(tmp_path: Path, make_tailer: MakeTailer) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"hel")
    t = make_tailer(log)
    assert t.read_available() == []
    _append(log, b"lo\nwor")
    assert t.read_available() == [Line(0, "hello", False)]
    _append(log, b"ld\n")
    assert t.read_available() == [Line(6, "world", False)]
    t.close()


def test_crlf_line_endings_are_stripped(tmp_path: Path, make_tailer: MakeTailer) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"a\r\nb\r\n\r\nc\r")
    t = make_tailer(log)
    assert _texts(t.read_available()) == ["a", "b", ""]
    _append(log, b"\n")  # the CR was held back with the partial line, and is a line ending after all
    assert t.read_available() == [Line(8, "c", False)]


def test_from_end_starts_at_the_last_line_start(tmp_path: Path, make_tailer: MakeTailer) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"old 1\nold 2\npart")
    t = make_tailer(log, from_start=False)
    assert t.read_available() == []
    _append(log, b"ial\nnew\n")
    assert t.read_available() == [Line(12, "partial", False), Line(20, "new", False)]


def test_from_end_then_truncated_before_regrowing_is_detected(tmp_path: Path, make_tailer: MakeTailer) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"x" * 100 + b"\n")
    t = make_tailer(log, from_start=False)
    log.write_bytes(b"y" * 200 + b"\n")  # truncate + rewrite, already longer than our offset
    assert _texts(t.read_available()) == ["y" * 200]
    assert (t.truncations, t.generation) == (1, 1)


def test_copytruncate_restarts_at_zero_in_a_new_generation(tmp_path: Path, make_tailer: MakeTailer) -> None:
    log = tmp_path / "server.log"
    with log.open("ab", buffering=0) as writer:  # O_APPEND, like a daemon's log handle
        writer.write(b"one\ntwo\nhalf")
        t = make_tailer(log)
        assert _texts(t.read_available()) == ["one", "two"]
        shutil.copy(log, tmp_path / "server.log.1")
        with log.open("r+b") as f:
            f.truncate(0)
        writer.write(b"after\n")
        # The partial line of the old content is flushed first, alone, in the old generation ...
        assert t.read_available() == [Line(8, "half", False)]
        assert (t.generation, t.has_more) == (0, True)
        # ... then reading restarts at 0.
        assert t.read_available() == [Line(0, "after", False)]
        assert (t.generation, t.truncations, t.rotations) == (1, 1, 0)


@pytest.mark.parametrize("seen", ["before", "after"], ids=["truncation-seen-first", "hole-and-line-seen-at-once"])
def test_copytruncate_under_a_writer_without_o_append(tmp_path: Path, make_tailer: MakeTailer, seen: str) -> None:
    """The writer's descriptor keeps its offset through the truncation: its next line lands after a hole of NULs
    as long as the old log (and longer than max_line here). That line comes back whole, at its real offset."""
    log = tmp_path / "server.log"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)  # no O_APPEND
    try:
        old = b"".join(b"line %04d\n" % i for i in range(300))  # 3,000 bytes
        os.write(fd, old)
        t = make_tailer(log, max_line=1024)
        assert len(t.read_texts()) == 300
        shutil.copy(log, tmp_path / "server.log.1")
        os.truncate(log, 0)
        if seen == "before":
            assert t.read_available() == []
        os.write(fd, b"after the hole\n")
        os.write(fd, b"next\n")
        assert _drain(t) == [(1, Line(3000, "after the hole", False)), (1, Line(3015, "next", False))]
        assert (t.truncations, t.padding, t.lines) == (1, 3000, 302)
    finally:
        os.close(fd)


def test_truncate_then_regrow_past_offset_is_detected(tmp_path: Path, make_tailer: MakeTailer) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"aaaa\n" * 3)
    t = make_tailer(log)
    assert len(t.read_available()) == 3
    with log.open("r+b") as f:
        f.truncate(0)
    _append(log, b"b" * 30 + b"\n")  # longer than before: the size check alone would miss it
    assert _texts(t.read_available()) == ["b" * 30]
    assert (t.truncations, t.generation) == (1, 1)


def test_truncate_and_regrow_within_one_tick_of_a_coarse_file_clock(tmp_path: Path, make_tailer: MakeTailer) -> None:
    """Truncated and regrown past the offset so fast that mtime did not move (a 1-4 ms kernel tick before Linux
    6.13, a second on HFS+, two on FAT): the size moved, and that is reason enough to look at the bytes before
    the offset. Missed, the tailer would go on mid-line in the new content: a fragment, the lines before lost."""
    log = tmp_path / "server.log"
    log.write_bytes(b"aaaa\n" * 3)
    t = make_tailer(log)
    assert len(t.read_available()) == 3
    before = log.stat()
    with log.open("r+b") as f:
        f.truncate(0)
    _append(log, b"b" * 30 + b"\n")
    os.utime(log, ns=(before.st_atime_ns, before.st_mtime_ns))  # the clock did not tick
    assert _texts(t.read_available()) == ["b" * 30]
    assert (t.truncations, t.generation) == (1, 1)


def test_rename_and_create_loses_nothing(tmp_path: Path, make_tailer: MakeTailer) -> None:
    log = tmp_path / "server.log"
    old = log.open("ab", buffering=0)
    old.write(b"".join(b"line %d\n" % i for i in range(50)))
    t = make_tailer(log)
    got = _drain(t)
    old.write(b"".join(b"line %d\n" % i for i in range(50, 100)))  # just before the rename: not read yet
    old.write(b"line 100 partial")
    os.rename(log, tmp_path / "server.log.1")
    old.close()
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(101, 150)))
    got += _drain(t)
    texts = [line.text for _, line in got]
    assert texts == [f"line {i}" for i in range(100)] + ["line 100 partial"] + [f"line {i}" for i in range(101, 150)]
    gens = {line.text: g for g, line in got}
    assert (gens["line 0"], gens["line 99"], gens["line 100 partial"], gens["line 101"], gens["line 149"]) == (0, 0, 0, 1, 1)
    assert [line.offset for g, line in got if g == 1][:2] == [0, 9]
    assert (t.rotations, t.truncations, t.generation) == (1, 0, 1)


def test_rename_then_empty_create_keeps_reading_the_old_file(tmp_path: Path, make_tailer: MakeTailer) -> None:
    """logrotate's ``create``: the daemon writes to the renamed file until it is told to reopen."""
    log = tmp_path / "server.log"
    old = log.open("ab", buffering=0)
    old.write(b"a\n")
    t = make_tailer(log)
    assert _texts(t.read_available()) == ["a"]
    os.rename(log, tmp_path / "server.log.1")
    assert t.read_available() == []
    assert not t.exists
    log.touch()
    old.write(b"b\n")  # the daemon has not reopened yet
    assert _texts(t.read_available()) == ["b"]
    assert t.generation == 0
    old.write(b"c\n")
    old.close()
    _append(log, b"d\n")  # the daemon reopened: the new file has content, finish the old one first
    assert [(g, line.text) for g, line in _drain(t)] == [(0, "c"), (1, "d")]
    assert t.rotations == 1


def test_delete_and_recreate(tmp_path: Path, make_tailer: MakeTailer) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"first\nunfinished")
    t = make_tailer(log)
    assert _texts(t.read_available()) == ["first"]
    log.unlink()
    assert t.read_available() == [Line(6, "unfinished", False)]  # nobody can finish it now
    assert not t.exists
    assert t.read_available() == []
    log.write_bytes(b"second\n")
    assert t.read_available() == [Line(0, "second", False)]
    assert (t.exists, t.generation, t.rotations, t.truncations) == (True, 1, 1, 0)


def test_path_that_appears_later(tmp_path: Path, make_tailer: MakeTailer) -> None:
    log = tmp_path / "later" / "server.log"  # not even the directory exists yet
    t = make_tailer(log, from_start=False)
    assert not t.exists
    assert t.read_available() == []
    log.parent.mkdir()
    log.write_bytes(b"hello\n")
    # from_start=False only skips what existed at construction; a new file is read whole.
    assert t.read_available() == [Line(0, "hello", False)]
    assert (t.exists, t.generation, t.rotations) == (True, 0, 0)


def test_directory_at_the_path_is_reported_not_raised(tmp_path: Path, make_tailer: MakeTailer) -> None:
    t = make_tailer(tmp_path)
    assert t.read_available() == []
    assert t.error == "not a regular file"


def test_invalid_utf8_is_replaced(tmp_path: Path, make_tailer: MakeTailer) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"ok \xff\xfe bad \xe2\x82\n\x00nul \x00 kept\n")
    t = make_tailer(log)
    # A NUL that starts a line is padding (see the copytruncate tests); inside a line it is data.
    assert _texts(t.read_available()) == ["ok \ufffd\ufffd bad \ufffd", "nul \x00 kept"]
    assert t.padding == 1


def test_huge_line_is_cut_and_the_next_line_is_intact(tmp_path: Path, make_tailer: MakeTailer) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"x" * (5 << 20) + b"\nnext\n")
    t = make_tailer(log, chunk_size=1 << 16)
    lines = _drain(t)
    assert [(line.offset, len(line.text), line.cut) for _, line in lines] == [(0, 1 << 20, True), ((5 << 20) + 1, 4, False)]


def test_each_call_reads_at_most_max_read_bytes(tmp_path: Path, make_tailer: MakeTailer) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"".join(b"%09d\n" % i for i in range(100_000)))  # 1,000,000 bytes
    t = make_tailer(log, max_read=64 << 10, chunk_size=4096)
    first = t.read_available()
    assert t.has_more
    assert len(first) == (64 << 10) // 10
    rest = _drain(t)
    assert len(first) + len(rest) == 100_000
    assert t.bytes == 1_000_000


def test_follow_wakes_on_changes_and_stops(tmp_path: Path, make_tailer: MakeTailer) -> None:
    log = tmp_path / "server.log"
    stop = threading.Event()
    t = make_tailer(log, poll_interval=30.0)  # long poll: only a watchdog event can make this prompt

    def writer() -> None:
        time.sleep(0.2)
        log.write_bytes(b"created\n")
        time.sleep(0.2)
        _append(log, b"appended\n")

    threading.Thread(target=writer, daemon=True).start()
    got: list[str] = []
    started = time.monotonic()
    for batch in t.follow(stop, timeout=10):
        got += _texts(batch)
        if len(got) == 2:
            stop.set()
    assert got == ["created", "appended"]
    assert time.monotonic() - started < 15.0  # half the poll interval: woken by the change, however busy the machine


@pytest.mark.parametrize("watch", [True, False])
def test_follow_heartbeat_and_stat_fallback(tmp_path: Path, watch: bool, make_tailer: MakeTailer) -> None:
    log = tmp_path / "missing-dir" / "server.log"  # watchdog cannot watch a missing directory
    stop = threading.Event()
    t = make_tailer(log, poll_interval=0.05)
    batches: list[list[Line]] = []
    for batch in t.follow(stop, timeout=0.1, watch=watch):
        batches.append(batch)
        if batch == [] and len(batches) == 1:
            log.parent.mkdir()
            log.write_bytes(b"late\n")
        elif batch:
            stop.set()
    assert batches[0] == []
    assert batches[-1] == [Line(0, "late", False)]


def test_closed_tailer_refuses_reads(tmp_path: Path, make_tailer: MakeTailer) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"a\n")
    t = make_tailer(log)
    t.close()
    with pytest.raises(ValueError, match="closed"):
        t.read_available()


@pytest.mark.parametrize("texts", [False, True], ids=["lines", "texts"])
def test_burst_of_a_million_lines_while_following(tmp_path: Path, make_tailer: MakeTailer, texts: bool) -> None:
    """Written from a thread in pieces that split lines anywhere; none lost, none repeated. `texts` is the
    live feeds' path (follow(texts=True): each line's text, no Line)."""
    total = 1_000_000
    log = tmp_path / "burst.log"
    data = "".join([f"{i:07d} burst line with some payload\n" for i in range(total)]).encode()
    rng = random.Random(7)
    stop = threading.Event()
    t = make_tailer(log)

    def writer() -> None:
        with log.open("ab", buffering=0) as f:
            pos = 0
            while pos < len(data):
                n = rng.randint(1, 256 << 10)
                f.write(data[pos : pos + n])
                pos += n

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    expected = 0
    for batch in t.follow(stop, timeout=30, texts=texts):
        assert batch, "no progress for 30 s"
        numbers = [int((line if isinstance(line, str) else line.text)[:7]) for line in batch]
        assert numbers == list(range(expected, expected + len(batch)))
        expected += len(batch)
        if expected == total:
            stop.set()
    thread.join()
    assert t.read_available() == []
    wc = shutil.which("wc")
    lines_in_file = int(subprocess.run([wc, "-l", str(log)], capture_output=True, text=True, check=True).stdout.split()[0]) if wc else data.count(b"\n")
    assert expected == t.lines == lines_in_file == total
    assert t.bytes == len(data) == log.stat().st_size


def test_replaced_between_two_reads(tmp_path: Path, make_tailer: MakeTailer) -> None:
    """The path never looked missing: it already names a new file with content at the next read."""
    log = tmp_path / "server.log"
    log.write_bytes(b"x\n")
    t = make_tailer(log)
    _wait_for(lambda: bool(t.read_available()))
    (tmp_path / "new.log").write_bytes(b"y\n")
    os.replace(tmp_path / "new.log", log)
    assert [(g, line.text) for g, line in _drain(t)] == [(1, "y")]
    assert repr(t) == (
        f"FileTailer({str(log)!r}, generation=1, offset=2, exists=True, lines=2, rotations=1, truncations=0)"
    )


def test_rotation_with_a_backlog_larger_than_one_read(tmp_path: Path, make_tailer: MakeTailer) -> None:
    """Draining the old file takes several calls; each call's lines are of one generation."""
    log = tmp_path / "server.log"
    old = b"".join(b"old %05d\n" % i for i in range(5000))  # 50,000 bytes
    log.write_bytes(b"")
    t = make_tailer(log, max_read=4096)
    _append(log, old)
    os.rename(log, tmp_path / "server.log.1")
    log.write_bytes(b"new 1\nnew 2\n")
    calls: list[tuple[int, list[str]]] = []
    while True:
        batch = t.read_available()
        calls.append((t.generation, _texts(batch)))
        if not t.has_more:
            break
    assert len(calls) > 10
    assert [text for g, texts in calls if g == 0 for text in texts] == [f"old {i:05d}" for i in range(5000)]
    assert [text for g, texts in calls if g == 1 for text in texts] == ["new 1", "new 2"]
    assert calls[-1] == (1, ["new 1", "new 2"])


def test_texts_follow_copytruncate_rotation_and_recreate(tmp_path: Path, make_tailer: MakeTailer) -> None:
    """read_texts() is read_available() without offsets: the same texts through every file event."""
    log = tmp_path / "server.log"
    log.write_bytes(b"")
    by_lines, by_texts = make_tailer(log), make_tailer(log)
    got_lines: list[str] = []
    got_texts: list[str] = []

    def read_both() -> None:
        while True:
            got_lines.extend(_texts(by_lines.read_available()))
            if not by_lines.has_more:
                break
        while True:
            got_texts.extend(by_texts.read_texts())
            if not by_texts.has_more:
                break

    _append(log, b"one\r\ntwo\npart")
    read_both()
    _append(log, b"ial\n")
    read_both()
    with log.open("r+b") as f:  # copytruncate
        f.truncate(0)
    _append(log, b"after truncate\n")
    read_both()
    os.rename(log, tmp_path / "server.log.1")  # logrotate: rename + create
    _append(tmp_path / "server.log.1", b"late in old\n")
    log.write_bytes(b"new file\n\xff bad byte\n")
    read_both()
    log.unlink()
    read_both()
    log.write_bytes(b"recreated\n" + b"x" * 3000 + b"\nunfinished")
    read_both()
    assert got_texts == got_lines
    assert got_texts[:3] == ["one", "two", "partial"]
    assert "after truncate" in got_texts and "late in old" in got_texts and "recreated" in got_texts
    assert by_texts.lines == by_lines.lines == len(got_texts)
