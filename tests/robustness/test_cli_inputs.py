"""What a user names on the command line (issue 21): pipes, FIFOs and standard input read whole, once; a path
that cannot be read is one line, never a traceback; the same file twice is read once; an empty window is
refused. Real pipes, a real FIFO and a real unprivileged user (where the suite runs as root)."""

from __future__ import annotations

import contextlib
import errno
import gzip
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ietop.cli import main

ROOT = Path(__file__).resolve().parents[2]
# The demo incident, ten times: 940 KB, far over a pipe's 64 KiB buffer, so a second open would lose data.
INCIDENT = (ROOT / "ietop/demo/incident.log").read_bytes() * 10
LINES = INCIDENT.count(b"\n")


def _feed(fd: int, data: bytes) -> threading.Thread:
    def write() -> None:
        with os.fdopen(fd, "wb") as w, contextlib.suppress(BrokenPipeError):
            w.write(data)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def _doc(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    assert main(argv) == 0
    doc: dict = json.loads(capsys.readouterr().out)
    return doc


@pytest.fixture
def regular(tmp_path: Path) -> Path:
    path = tmp_path / "incident.log"
    path.write_bytes(INCIDENT)
    return path


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_a_pipe_is_read_whole(compress: bool, regular: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`ietop analyze <(gzip -dc …)`: what bash hands over is /dev/fd/N, a pipe."""
    expected = _doc(capsys, ["analyze", "--json", str(regular)])
    r, w = os.pipe()
    writer = _feed(w, gzip.compress(INCIDENT) if compress else INCIDENT)
    try:
        doc = _doc(capsys, ["analyze", "--json", f"/dev/fd/{r}"])
    finally:
        os.close(r)
        writer.join(5)
    assert doc["sources"][0]["lines"] == LINES
    assert doc["sources"][0]["path"] == f"/dev/fd/{r}"  # its own name, not the temporary copy's
    assert doc["counts"] == expected["counts"]
    assert len(doc["requests"]) == len(expected["requests"])


def test_a_fifo_is_read_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "incident.fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as w:  # blocks until analyze opens it
            w.write(INCIDENT)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    doc = _doc(capsys, ["analyze", "--json", str(fifo)])
    writer.join(5)
    assert doc["sources"][0]["lines"] == LINES


def test_standard_input() -> None:
    out = subprocess.run([sys.executable, "-m", "ietop", "analyze", "--json", "-"], input=INCIDENT,
                         capture_output=True, check=True, cwd=ROOT, timeout=120).stdout
    doc = json.loads(out)
    assert doc["sources"][0]["path"] == "-"
    assert doc["sources"][0]["lines"] == LINES


def test_the_same_file_twice_is_read_once(regular: Path, capsys: pytest.CaptureFixture[str]) -> None:
    once = _doc(capsys, ["analyze", "--json", str(regular)])
    link = regular.parent / "again.log"
    link.symlink_to(regular)
    assert main(["analyze", "--json", str(regular), str(link)]) == 0
    captured = capsys.readouterr()
    twice = json.loads(captured.out)
    assert twice["counts"] == once["counts"]
    assert len(twice["sources"]) == 1
    assert f"{link} is the same file as {regular}: read once" in captured.err


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and needle in err, err


def test_a_symlink_loop_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.symlink_to(b)
    b.symlink_to(a)
    _one_line_error(capsys, ["analyze", str(a)], "a loop of symbolic links")
    _one_line_error(capsys, ["replay", str(a)], "a loop of symbolic links")
    _one_line_error(capsys, ["--log", f"ollama:{a}"], "a loop of symbolic links")


def test_since_after_until_is_refused(regular: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _one_line_error(capsys, ["analyze", "--since", "2026-11-28T15:00", "--until", "2026-11-28T14:00", str(regular)],
                    "is after --until")


@pytest.fixture
def locked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A log in a directory its reader cannot enter. Root enters every directory (and this suite's
    interpreter lives under /root, out of reach of any other user): there, and only there, `stat` of the
    path is made to fail as the kernel fails it for anyone else."""
    closed = tmp_path / "closed"
    closed.mkdir()
    log = closed / "server.log"
    log.write_bytes(INCIDENT[:4096])
    if os.geteuid() == 0:
        real_stat = os.stat

        def stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
            if os.fspath(path) == str(log):  # type: ignore[call-overload]
                raise PermissionError(errno.EACCES, "Permission denied", str(log))
            return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "stat", stat)
        yield log
        return
    closed.chmod(0o000)
    yield log
    closed.chmod(0o755)


@pytest.mark.parametrize("command", [["analyze"], ["replay"], ["--log"], ["--log", "ollama:"]],
                         ids=["analyze", "replay", "log", "log-engine"])
def test_a_path_behind_a_closed_directory(command: list[str], locked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [command[0], command[1] + str(locked)] if len(command) == 2 else [*command, str(locked)]
    _one_line_error(capsys, argv, f"ietop: error: {locked}: permission denied (a directory on its path cannot be "
                                  "entered)")


def test_a_file_name_that_is_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Linux names are bytes: one that is not UTF-8 used to crash the spool (UnicodeEncodeError)."""
    raw = os.path.join(os.fsencode(tmp_path), b"bad\xff.log")
    with open(raw, "wb") as f:
        f.write(INCIDENT[:20_000])
    name = os.fsdecode(raw)
    doc = _doc(capsys, ["analyze", "--json", name])
    assert doc["sources"][0]["path"] == f"{tmp_path}/bad\\xff.log"
    assert main(["analyze", name]) == 0
    assert "bad\\xff.log" in capsys.readouterr().out
    assert main(["analyze", "--csv", str(tmp_path / "csv"), name]) == 0
