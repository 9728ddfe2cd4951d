"""A live log read back to its server's last run (FileTailer's `read_back`, TailFeed's `read_back`).

The log is the bundled incident (Ollama 0.32.13, real lines) written twice: an appended log file across a
restart. The tail then starts at the second run's `server config` line, so its settings and loads reach the
store as they would had ietop been watching since the restart."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from ietop.pipeline.feeds import READ_BACK_BYTES, Batch, Evidence, TailFeed
from ietop.pipeline.setup import new_store
from ietop.sources.tailer import FileTailer
from parsers.text.runs import last_run_start
from tests.tui.support import INCIDENT

RUN = INCIDENT.read_bytes()


def _read_all(tailer: FileTailer) -> list[str]:
    out: list[str] = []
    while True:
        out += tailer.read_texts()
        if not tailer.has_more:
            return out


def test_starts_at_the_last_run_and_then_follows(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(RUN + RUN[:20_000])  # the second run is still being written: its last line is partial
    tailer = FileTailer(log, from_start=False, read_back=partial(last_run_start, "ollama"))
    try:
        lines = _read_all(tailer)
        whole = RUN[:RUN.rindex(b"\n", 0, 20_000) + 1].decode()
        assert lines == whole.splitlines()  # the second run's whole lines; the partial one is held back
        with log.open("ab") as f:
            f.write(RUN[20_000:])
        assert [*lines, *_read_all(tailer)] == RUN.decode().splitlines()
    finally:
        tailer.close()


def test_run_start_beyond_the_window_reads_the_window_from_a_line_start(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(RUN)
    tailer = FileTailer(log, from_start=False, read_back=partial(last_run_start, "ollama"), read_back_max=10_000)
    try:
        lines = _read_all(tailer)
    finally:
        tailer.close()
    whole = RUN.decode().splitlines()
    assert 0 < len(lines) < len(whole)
    assert lines == whole[-len(lines):]  # whole lines only, up to the end
    assert sum(len(x) + 1 for x in lines) <= 10_000


def test_without_read_back_only_new_lines(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(RUN + RUN)
    tailer = FileTailer(log, from_start=False)
    try:
        assert _read_all(tailer) == []  # only what is appended from now on
        with log.open("ab") as f:
            f.write(RUN[:200])
        assert _read_all(tailer) == RUN[:200].decode().splitlines()[:-1]
    finally:
        tailer.close()


def test_tail_feed_reads_the_settings_and_loads_of_the_current_run(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"\n".join(RUN.splitlines()[:116]) + b"\n")  # qwen3:8b loaded, nothing after
    store, view, _evidence = new_store()
    feed = TailFeed(store, str(log), "ollama", Evidence(), read_back=READ_BACK_BYTES)
    try:
        while True:
            lines = feed.tailer.read_texts()
            store.apply_all(feed.tail.parse(lines))
            if not feed.tailer.has_more:
                break
    finally:
        feed.tailer.close()
    snap = view.snapshot(store.now, 10**6)
    assert [(r.model, r.source) for r in snap.resident] == [("qwen3:8b", "log")]
    assert store.settings.configured  # from `server config`, the run's first line
    assert feed.tail.n == 116


def test_evidence_names_the_files_own_line_numbers(tmp_path: Path) -> None:
    # The second run starts at line 679 of the file: its lines are evidence under their numbers in the file,
    # not under "the nth line ietop read".
    log = tmp_path / "server.log"
    log.write_bytes(RUN + RUN)
    store, _view, _evidence = new_store()
    evidence = Evidence()
    feed = TailFeed(store, str(log), "ollama", evidence, read_back=READ_BACK_BYTES)
    posted: list[Batch] = []
    try:
        feed._read_back_from(posted.append)
        while True:
            store.apply_all(feed.tail.parse(feed.tailer.read_texts()))
            if not feed.tailer.has_more:
                break
    finally:
        feed.tailer.close()
    assert posted == []  # the window holds the run's start: no head to read
    lines = (RUN + RUN).decode().split("\n")
    kept = [slot for slot in evidence.ring(feed.tail.src) if slot is not None]
    first = len(RUN.splitlines()) + 1
    assert kept and min(n for n, _text in kept) >= first
    assert all(lines[n - 1] == text for n, text in kept)
