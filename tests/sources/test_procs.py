"""Line sources over real child processes and a real pipe: framing, both pipes, exit codes, stopping.

The children are ``python -c`` scripts, so the pipes, the partial writes and the signals are real; only
what they print is scripted.
"""

from __future__ import annotations

import os
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ietop.sources.procs import CommandLines, StdinLines, docker_argv, journal_argv


def _child(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def _collect(src: CommandLines | StdinLines, deadline_s: float = 15.0) -> list[tuple[int, str]]:
    """Everything the source hands out until it reports its end."""
    got: list[tuple[int, str]] = []
    deadline = time.monotonic() + deadline_s
    while src.exited is None:
        assert time.monotonic() < deadline, f"no end after {deadline_s} s; got {got!r}"
        got += src.read_available(0.2)
    return got


@pytest.fixture
def running() -> Iterator[list[CommandLines]]:
    """Stops every source a test started, even when it fails half-way."""
    sources: list[CommandLines] = []
    yield sources
    for src in sources:
        src.stop()


def _start(running: list[CommandLines], code: str, **kw: int) -> CommandLines:
    src = CommandLines(_child(code), **kw)
    running.append(src)
    assert src.start() is None
    return src


def test_stdout_and_stderr_lines_with_a_partial_last_line(running: list[CommandLines]) -> None:
    src = _start(running, """
        import sys
        sys.stdout.write("out 1\\nout 2\\n"); sys.stdout.flush()
        sys.stderr.write("err 1\\r\\n"); sys.stderr.flush()
        sys.stdout.write("no newline at the end")
    """)
    got = _collect(src)
    assert [n for n, _ in got] == [1, 2, 3, 4]
    texts = [t for _, t in got]
    assert sorted(texts) == ["err 1", "no newline at the end", "out 1", "out 2"]
    # Within one pipe the order is kept; across the two it is whatever the threads saw first.
    assert texts.index("out 1") < texts.index("out 2") < texts.index("no newline at the end")
    assert src.exited == 0


def test_a_line_split_across_writes_is_one_line(running: list[CommandLines]) -> None:
    src = _start(running, """
        import sys, time
        for part in ("time=2025-08-08T00:07:26 level=INFO ", "msg=\\"llama runner ", "started in 1.2 seconds\\"\\nnext\\n"):
            sys.stdout.write(part); sys.stdout.flush(); time.sleep(0.05)
    """)
    assert [t for _, t in _collect(src)] == ['time=2025-08-08T00:07:26 level=INFO msg="llama runner started in 1.2 seconds"',
                                             "next"]


def test_a_huge_line_is_cut_and_the_next_is_intact(running: list[CommandLines]) -> None:
    src = _start(running, """
        import sys
        sys.stdout.write("x" * 300000 + "\\n" + "after the huge one\\n")
    """, max_line=1000)
    assert _collect(src) == [(1, "x" * 1000), (2, "after the huge one")]


def test_utf8_split_between_writes_decodes_once(running: list[CommandLines]) -> None:
    src = _start(running, """
        import os, sys, time
        data = "µs 7月\\n".encode()
        os.write(1, data[:1]); time.sleep(0.05); os.write(1, data[1:5]); time.sleep(0.05); os.write(1, data[5:])
    """)
    assert _collect(src) == [(1, "µs 7月")]


@pytest.mark.parametrize("code", [3, 0])
def test_exit_code_is_reported_after_the_lines(running: list[CommandLines], code: int) -> None:
    src = _start(running, f"""
        import sys
        print("last words", file=sys.stderr)
        sys.exit({code})
    """)
    assert src.exited is None  # never "exited" while its lines have not been read
    assert _collect(src) == [(1, "last words")]
    assert src.exited == code


def test_missing_command_is_an_error_line() -> None:
    src = CommandLines(["ietop-no-such-command-7f3a", "-f"])
    assert src.start() == "ietop-no-such-command-7f3a not found"
    assert src.read_available(0.01) == []
    assert src.exited is None
    src.stop()


def test_command_that_is_not_executable(tmp_path: Path) -> None:
    script = tmp_path / "journalctl"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    src = CommandLines([str(script)])
    assert src.start() == f"{script}: permission denied"


def test_stop_on_a_long_running_child_is_prompt(running: list[CommandLines]) -> None:
    src = _start(running, """
        import sys, time
        print("started", flush=True)
        while True:
            time.sleep(1)
    """)
    assert src.read_available(10) == [(1, "started")]
    began = time.monotonic()
    src.stop()
    assert time.monotonic() - began < 1.5  # SIGTERM suffices; the 2 s grace is not spent
    assert src.exited == -15
    src.stop()  # idempotent


def test_stop_kills_a_child_that_ignores_sigterm(running: list[CommandLines]) -> None:
    src = _start(running, """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ignoring TERM", flush=True)
        time.sleep(60)
    """)
    assert src.read_available(10) == [(1, "ignoring TERM")]
    began = time.monotonic()
    src.stop()
    assert 1.5 < time.monotonic() - began < 6
    assert src.exited == -9


def test_a_chatty_child_is_not_lost_while_the_reader_lags(running: list[CommandLines]) -> None:
    """More than a pipe buffer of lines, read slowly: every line arrives once, in order."""
    src = _start(running, """
        import sys
        for i in range(50000):
            sys.stdout.write(f"line {i}\\n")
    """)
    time.sleep(0.3)
    got = _collect(src)
    assert [t for _, t in got] == [f"line {i}" for i in range(50000)]
    assert [n for n, _ in got] == list(range(1, 50001))


def test_argv_helpers() -> None:
    assert journal_argv("ollama") == ["journalctl", "-f", "-o", "json", "--unit=ollama", "--no-pager", "-n", "1000"]
    assert docker_argv("-ollama") == ["docker", "logs", "-f", "-t", "--tail", "1000", "--", "-ollama"]


def test_stdin_lines_over_a_pipe() -> None:
    r, w = os.pipe()
    with os.fdopen(r, "rb") as reader:
        src = StdinLines(reader, max_line=16)
        assert src.start() is None
        os.write(w, b"first\nsec")
        assert src.read_available(10) == [(1, "first")]
        assert src.read_available(0.05) == []  # "sec" waits for its newline
        os.write(w, b"ond\n" + b"y" * 40 + b"\ntail")
        got = src.read_available(10)
        while len(got) < 2:
            got += src.read_available(10)
        assert got == [(2, "second"), (3, "y" * 16)]
        assert src.exited is None
        os.close(w)
        assert _collect(src) == [(4, "tail")]
        assert src.exited == 0
        src.stop()


def test_stdin_stop_returns_while_the_writer_is_still_open() -> None:
    r, w = os.pipe()
    with os.fdopen(r, "rb") as reader:
        src = StdinLines(reader)
        assert src.start() is None
        began = time.monotonic()
        src.stop()
        assert time.monotonic() - began < 0.5
        os.write(w, b"after stop\n")
        os.close(w)  # lets the reader thread reach the end
        assert src.read_available(0.3) == []


def test_stdin_that_is_a_terminal_is_refused() -> None:
    try:
        master, slave = os.openpty()
    except OSError:  # pragma: no cover - no pty support
        pytest.skip("no pseudo-terminal here")
    with os.fdopen(slave, "rb") as tty:
        assert StdinLines(tty).start() == "stdin is a terminal: pipe a log into ietop (... | ietop --log -)"
    os.close(master)
