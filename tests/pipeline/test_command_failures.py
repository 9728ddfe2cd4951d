"""A followed command that fails (`docker logs` with no daemon, no such container or no `docker` at all; a
`journalctl` that refuses) stays failed in the snapshot, with the command's own words and exit status.

The commands really run: PATH points at a temporary folder holding a `docker` (or `journalctl`) script that
writes what the real one writes to stderr and exits as it does. The messages are the real ones, checked on
this machine: Docker 28.2.2 with no daemon (`Cannot connect to the Docker daemon…`, exit 1), and systemd 252's
journalctl given an empty unit (`Failed to add filter for units: Invalid argument`, exit 1). "No such
container" is Docker's wording for an unknown name (`Error response from daemon: No such container: NAME`).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from ietop.model.snapshot import Snapshot
from ietop.pipeline.command_feeds import FAILED_DETAIL_MAX, CommandFeed, ProxyFeed
from ietop.pipeline.feeds import Batch
from ietop.pipeline.setup import new_store
from ietop.sources.procs import CommandLines, docker_argv, journal_argv
from tests.command_support import JOURNAL_REFUSED, NO_CONTAINER, NO_DAEMON, fake_command


def _drain(feed: CommandFeed) -> list[Batch]:
    batches: list[Batch] = []
    feed.run(batches.append, threading.Event())
    return batches


def _follow(argv: list[str], name: str, engine: str = "ollama", journal: bool = False) -> tuple[list[Batch], Snapshot]:
    """Run the feed to its end, apply what it posted as the dashboard does, and take the snapshot."""
    store, view, evidence = new_store()
    feed = CommandFeed(store, name, engine, evidence, CommandLines(argv), journal_json=journal)
    batches = _drain(feed)
    for batch in batches:
        store.apply_all(batch.items)
    return batches, view.snapshot(time.time(), 300)


@pytest.mark.parametrize("said", [NO_DAEMON, NO_CONTAINER])
def test_docker_failing_is_kept_with_its_own_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    said: str) -> None:
    fake_command(tmp_path, "docker", said, 1)
    monkeypatch.setenv("PATH", str(tmp_path))
    batches, snap = _follow(docker_argv("ollama"), "docker:ollama")
    # The toast says it, with docker's words (it used to say only "stream ended (exit 1)").
    assert batches[-1].error == f"docker:ollama: stream ended (exit 1): {said}"
    # And it lasts: the source is failed in the snapshot, and Events has an error row that says why.
    (source,) = snap.sources
    assert (source.path, source.failed) == ("docker:ollama", "exit 1")
    assert [s.path for s in snap.failed_sources] == ["docker:ollama"]
    errors = [e for e in snap.events if e.kind == "error"]
    assert [(e.engine, e.text) for e in errors] == [
        ("ollama", f"source_failed: docker:ollama failed (exit 1): {said}")]
    assert errors[0].t > 0 and errors[0].time is not None
    # Nothing followed can give a request now; the failed container is not shown as a working log.
    assert not snap.requests_can_come
    assert all(e.endpoint != "log:docker:ollama" for e in snap.engines)


def test_no_docker_binary_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no docker anywhere on PATH
    batches, snap = _follow(docker_argv("ollama"), "docker:ollama")
    assert len(batches) == 1 and batches[0].error == "docker:ollama: docker not found"
    (source,) = snap.sources
    assert source.failed == "docker not found"
    assert [e.text for e in snap.events] == ["source_failed: docker:ollama failed (docker not found)"]


def test_journalctl_failing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_command(tmp_path, "journalctl", JOURNAL_REFUSED, 1)
    monkeypatch.setenv("PATH", str(tmp_path))
    _batches, snap = _follow(journal_argv(""), "journal:", journal=True)
    assert snap.sources[0].failed == "exit 1"
    assert [e.text for e in snap.events] == [f"source_failed: journal: failed (exit 1): {JOURNAL_REFUSED}"]


@pytest.mark.skipif(shutil.which("journalctl") is None, reason="no journalctl on this machine")
def test_the_real_journalctl_refusing_an_empty_unit() -> None:
    """What the fake above stands in for, from the real journalctl, where there is one."""
    _batches, snap = _follow(journal_argv(""), "journal:", journal=True)
    assert snap.sources[0].failed == "exit 1"
    # Its words (systemd 252: "Failed to add filter for units: Invalid argument") vary by version; some are there.
    assert snap.events[0].text.startswith("source_failed: journal: failed (exit 1): ")
    assert len(snap.events[0].text) > len("source_failed: journal: failed (exit 1): ")


def _docker_without_daemon() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False).returncode != 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(not _docker_without_daemon(), reason="needs a docker client with no daemon behind it")
def test_the_real_docker_with_no_daemon() -> None:
    batches, snap = _follow(docker_argv("ietop-test-no-such-container"), "docker:x")
    assert snap.sources[0].failed == "exit 1"
    assert "Docker daemon" in (batches[-1].error or "")
    assert "Docker daemon" in snap.events[0].text


def test_the_last_stderr_line_is_the_commands_last_word(tmp_path: Path) -> None:
    """stdout after stderr, blank stderr lines, a partial last line: last_stderr is the last non-blank line
    the command wrote to stderr, whatever came on stdout."""
    script = tmp_path / "child"
    script.write_text("#!/bin/sh\n"
                      "echo 'first warning' >&2\n"
                      "echo 'a log line on stdout'\n"
                      "printf 'the reason\\n\\n   \\n' >&2\n"
                      "echo 'stdout goes on'\n"
                      "exit 7\n")
    script.chmod(0o755)
    lines = CommandLines([str(script)])
    before = lines.last_stderr
    assert before is None
    assert lines.start() is None
    try:
        deadline = time.monotonic() + 15
        while lines.exited is None:
            assert time.monotonic() < deadline
            lines.read_available(0.2)
        assert (lines.exited, lines.last_stderr) == (7, "the reason")
    finally:
        lines.stop()


def test_a_long_stderr_line_is_cut_for_the_events_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_command(tmp_path, "docker", "x" * 5000, 1)
    monkeypatch.setenv("PATH", str(tmp_path))
    _batches, snap = _follow(docker_argv("ollama"), "docker:ollama")
    text = snap.events[0].text
    assert text.endswith("x…") and len(text.split(": ", 2)[2]) == FAILED_DETAIL_MAX


def test_a_command_that_ends_well_is_not_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`docker logs -f` of a container that stopped exits 0: the stream ended, nothing failed."""
    fake_command(tmp_path, "docker", "a last line on stderr", 0)
    monkeypatch.setenv("PATH", str(tmp_path))
    batches, snap = _follow(docker_argv("ollama"), "docker:ollama")
    assert batches[-1].error is None and batches[-1].note == "docker:ollama: the stream ended"
    assert snap.sources[0].failed is None and snap.requests_can_come
    assert not [e for e in snap.events if e.kind == "error"]


def test_a_proxy_that_cannot_listen_is_failed() -> None:
    """`--proxy PORT` on a port already taken: the in-dashboard proxy is a source that failed, too."""
    taken = socket.socket()
    try:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        store, view, _evidence = new_store()
        feed = ProxyFeed(store, f"127.0.0.1:{port}", "http://127.0.0.1:9")
        batches: list[Batch] = []
        feed.run(batches.append, threading.Event())
    finally:
        taken.close()
    for batch in batches:
        store.apply_all(batch.items)
    snap = view.snapshot(time.time(), 300)
    assert batches[-1].error is not None and batches[-1].error.startswith(f"proxy: cannot listen on 127.0.0.1:{port}")
    assert snap.sources[0].failed == "cannot listen"
    assert snap.events[0].text.startswith(f"source_failed: proxy:127.0.0.1:{port} failed (cannot listen): ")
    assert not snap.requests_can_come
