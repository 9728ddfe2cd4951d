"""`analyze`'s progress: drawn from what the readers report, on a terminal only."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from ietop.analyze.progress import ReadProgress, plain_size
from ietop.analyze.report import Analysis

REPO = Path(__file__).resolve().parents[2]
LOG = REPO / "fixtures" / "ollama" / "007-v05-truncation-gin-api-ps-polling.log"


def test_readers_report_every_byte_and_line() -> None:
    seen = [0, 0]

    def on_read(nbytes: int, nlines: int) -> None:
        seen[0] += nbytes
        seen[1] += nlines

    for all_requests in (False, True):  # the columnar reader and the per-line one
        seen[:] = [0, 0]
        an = Analysis([str(LOG)], all_requests=all_requests, on_read=on_read)
        try:
            assert seen[0] == LOG.stat().st_size
            assert seen[1] == an.store.sources[0].lines
        finally:
            an.close()


def test_progress_shows_bytes_lines_per_second_and_time_left() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    with ReadProgress(2_000_000, console) as progress:
        progress(1_000_000, 12_000)
        progress(1_000_000, 12_000)
    text = out.getvalue()
    assert "2.0/2.0 MB" in text and "lines/s" in text


def test_plain_size_is_unknown_for_compressed_logs(tmp_path: Path) -> None:
    import gzip

    packed = tmp_path / "a.log.gz"
    packed.write_bytes(gzip.compress(LOG.read_bytes()))
    assert plain_size([str(LOG)]) == LOG.stat().st_size
    assert plain_size([str(LOG), str(packed)]) is None


def _run_on_pty(*args: str) -> str:
    """Run ietop with stdout and stderr on a pseudo-terminal; what the terminal received."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "ietop", *args], stdout=follower, stderr=follower,
                            stdin=subprocess.DEVNULL, cwd=REPO)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace")


def test_progress_on_a_terminal_not_with_json() -> None:
    assert "reading" in _run_on_pty("analyze", str(LOG))
    shown = _run_on_pty("analyze", str(LOG), "--json")
    assert "reading" not in shown and '"schema":"ietop.analyze/2"' in shown
