"""Lines from a child process (``journalctl -f``, ``docker logs -f``) or from stdin (``--log -``).

Some installs log to the service journal or to a container's output instead of a file; following them
means following a process. Each pipe gets a reader thread because a blocking ``read`` is the only
portable way to wait on a pipe (``selectors`` does not work on pipes on Windows), and two pipes because
``docker logs`` writes the container's stderr to its own stderr: merging them into one pipe with
``stderr=STDOUT`` could splice a stdout line into the middle of a stderr one.

Bytes are framed into lines with ``parsers.text.framing.LineSplitter`` (the same framing as file tails: a
partial last line waits for its newline, an over-long line is cut and the next one is intact). Pending
text is bounded: when the consumer falls behind, readers stop reading, the pipe fills and the child
blocks on its write, which is the backpressure we want instead of unbounded memory.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from typing import BinaryIO

from parsers.text.framing import Line, LineSplitter

__all__ = ["CommandLines", "StdinLines", "docker_argv", "journal_argv"]

_CHUNK = 64 * 1024
_MAX_PENDING_CHARS = 16 << 20
"""Text waiting for ``read_available`` beyond which readers pause."""
MAX_BATCH = 10_000
"""Most lines one ``read_available`` returns, so one call never holds the consumer for long."""
_TERM_GRACE_S = 2.0


def journal_argv(unit: str) -> list[str]:
    """Follow a systemd unit's journal as JSON, starting with its last 1000 entries.

    JSON rather than the default text: each record carries the exact time (``__REALTIME_TIMESTAMP``)
    and the message unaltered, with no syslog prefix to strip (see ``parsers.text.journal_json``).
    """
    return ["journalctl", "-f", "-o", "json", f"--unit={unit}", "--no-pager", "-n", "1000"]


def docker_argv(container: str) -> list[str]:
    """Follow a container's output with docker's RFC 3339 timestamps, starting with its last 1000 lines."""
    # "--" so that a container name cannot be read as an option.
    return ["docker", "logs", "-f", "-t", "--tail", "1000", "--", container]


class _LineBuffer:
    """Lines from reader threads, waiting to be numbered and handed out by ``read_available``."""

    def __init__(self, max_line: int, readers: int) -> None:
        if max_line < 1:
            raise ValueError(f"max_line must be at least 1, not {max_line}")
        self._max_line = max_line
        self._cond = threading.Condition()
        self._lines: deque[str] = deque()
        self._chars = 0
        self._readers = readers
        self._done = 0
        self._stopping = False
        self._numbered = 0

    def pump(self, read: Callable[[int], bytes], close: Callable[[], object] | None = None,
             seen: Callable[[list[Line]], object] | None = None) -> None:
        """Reader thread body: read chunks until EOF (or ``stop``), frame them, queue the lines. ``seen``: called
        with each framed batch before it is queued (CommandLines keeps the last stderr line with it)."""
        splitter = LineSplitter(self._max_line)
        try:
            while True:
                chunk = read(_CHUNK)
                if not chunk:
                    break
                lines = splitter.feed(chunk)
                if seen is not None and lines:
                    seen(lines)
                if not self._put(lines):
                    break
            lines = splitter.flush()  # an unterminated last line is still a line
            if seen is not None and lines:
                seen(lines)
            self._put(lines)
        except (OSError, ValueError):
            pass  # the stream was closed under us (stop, or the caller closed its file): that is an end
        finally:
            if close is not None:
                close()
            with self._cond:
                self._done += 1
                self._cond.notify_all()

    def _put(self, lines: list[Line]) -> bool:
        if not lines:
            return not self._stopping
        texts = [line.text for line in lines]
        size = sum(map(len, texts))
        with self._cond:
            while self._chars >= _MAX_PENDING_CHARS and not self._stopping:
                self._cond.wait()
            if self._stopping:
                return False
            self._lines.extend(texts)
            self._chars += size
            self._cond.notify_all()
        return True

    def read_available(self, timeout: float) -> list[tuple[int, str]]:
        with self._cond:
            self._cond.wait_for(lambda: bool(self._lines) or self._done >= self._readers, max(timeout, 0.0))
            take = min(len(self._lines), MAX_BATCH)
            texts = [self._lines.popleft() for _ in range(take)]
            self._chars -= sum(map(len, texts))
            if take:
                self._cond.notify_all()  # room again for a reader waiting on a full buffer
            first = self._numbered + 1
            self._numbered += take
        return list(enumerate(texts, first))

    @property
    def drained(self) -> bool:
        """Every reader reached its end and every line was handed out."""
        with self._cond:
            return self._done >= self._readers and not self._lines

    def stop(self) -> None:
        """Readers drop what they read from now on; lines already queued stay readable."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()


class CommandLines:
    """Run ``argv`` and hand out the lines it writes to stdout and stderr.

    Args:
        argv: the command, e.g. ``journal_argv("ollama")``; never run through a shell.
        max_line: longest line kept whole, in bytes; a longer one is cut to this.
    """

    def __init__(self, argv: Sequence[str], *, max_line: int = 64 * 1024) -> None:
        if not argv:
            raise ValueError("argv must name a command")
        self.argv = list(argv)
        self._buffer = _LineBuffer(max_line, readers=2)
        self._proc: subprocess.Popen[bytes] | None = None
        self._threads: list[threading.Thread] = []
        self._stopped = False
        self._last_stderr: str | None = None

    def __repr__(self) -> str:
        pid = None if self._proc is None else self._proc.pid
        return f"CommandLines(argv={self.argv!r}, pid={pid}, exited={self.exited})"

    def start(self) -> str | None:
        """Start the command; None on success, else one line (the command is missing, not executable...)."""
        if self._proc is not None or self._stopped:
            raise RuntimeError("CommandLines.start called twice")
        name = self.argv[0]
        try:
            # bufsize=0: an unbuffered pipe, so a read returns whatever the child has written so far.
            proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, bufsize=0)
        except FileNotFoundError:
            return f"{name} not found"
        except PermissionError:
            return f"{name}: permission denied"
        except OSError as exc:
            return f"{name}: {exc.strerror or exc}"
        self._proc = proc
        for label, stream in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            assert stream is not None
            seen = self._saw_stderr if label == "stderr" else None
            thread = threading.Thread(target=self._buffer.pump,
                                      args=(partial(os.read, stream.fileno()), stream.close, seen),
                                      name=f"ietop-{os.path.basename(name)}-{label}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return None

    def read_available(self, timeout: float) -> list[tuple[int, str]]:
        """(line number, text) of the lines that arrived, waiting at most ``timeout`` s for the first.

        Numbers count from 1 across both pipes, in the order lines are handed out; the relative order
        of a stdout and a stderr line written at nearly the same moment is not knowable from here.
        """
        if self._proc is None:
            return []
        return self._buffer.read_available(timeout)

    def _saw_stderr(self, lines: list[Line]) -> None:
        # On the stderr reader's thread; one reference assignment, read once that thread is done.
        for line in reversed(lines):
            if line.text.strip():
                self._last_stderr = line.text.strip()
                return

    @property
    def last_stderr(self) -> str | None:
        """The last non-blank line the command wrote to stderr (stripped, raw: untrusted text), None before any.

        Why a command failed is there (``Cannot connect to the Docker daemon…``, ``No such container``); for
        ``docker logs`` it may also be the container's own last stderr line, which is also the engine's log."""
        return self._last_stderr

    @property
    def exited(self) -> int | None:
        """The exit status once the command ended and all its lines were read (negative: killed by
        that signal, as after ``stop``); None while it runs or lines are still waiting."""
        if self._proc is None or not self._buffer.drained:
            return None
        return self._proc.poll()

    def stop(self) -> None:
        """Terminate the command (SIGTERM, then SIGKILL after 2 s) and end the readers; idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._buffer.stop()
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(_TERM_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        # A grandchild that inherited the pipes could keep them open; the threads are daemons, so a
        # join that times out costs a stuck thread, never a hung ietop.
        for thread in self._threads:
            thread.join(_TERM_GRACE_S)


class StdinLines:
    """Lines from standard input (``--log -``) or any binary file object, read in a thread.

    Args:
        file: what to read; ``sys.stdin.buffer`` when None. Never closed here (the caller owns it).
        max_line: longest line kept whole, in bytes; a longer one is cut to this.
    """

    def __init__(self, file: BinaryIO | None = None, *, max_line: int = 64 * 1024) -> None:
        self._file = file
        self._buffer = _LineBuffer(max_line, readers=1)
        self._thread: threading.Thread | None = None
        self._stopped = False

    def __repr__(self) -> str:
        return f"StdinLines(file={self._file!r}, exited={self.exited})"

    def start(self) -> str | None:
        """Start reading; an interactive terminal is refused (it would wait for typing, not a log)."""
        if self._thread is not None or self._stopped:
            raise RuntimeError("StdinLines.start called twice")
        file = self._file if self._file is not None else sys.stdin.buffer
        try:
            if file.isatty():
                return "stdin is a terminal: pipe a log into ietop (... | ietop --log -)"
        except (OSError, ValueError):
            return "stdin is not readable"
        read: Callable[[int], bytes] = getattr(file, "read1", file.read)  # read1: no wait to fill the size
        self._thread = threading.Thread(target=self._buffer.pump, args=(read,), name="ietop-stdin", daemon=True)
        self._thread.start()
        return None

    def read_available(self, timeout: float) -> list[tuple[int, str]]:
        """(line number, text) of the lines that arrived, waiting at most ``timeout`` s for the first."""
        if self._thread is None:
            return []
        return self._buffer.read_available(timeout)

    @property
    def exited(self) -> int | None:
        """0 once the input ended and all its lines were read; None before."""
        return 0 if self._thread is not None and self._buffer.drained else None

    def stop(self) -> None:
        """Stop handing out new input; returns at once and is idempotent.

        A blocked read on a pipe or terminal cannot be interrupted portably; the daemon thread ends at
        the next chunk or at end of input, and what it reads meanwhile is dropped.
        """
        self._stopped = True
        self._buffer.stop()
