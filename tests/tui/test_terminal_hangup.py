"""When its terminal goes away without a SIGHUP, the dashboard exits (129) instead of spinning a core.

Textual's input thread finds a hung-up stdin readable and empty on every try; before ietop watched for
the hangup, an orphaned `ietop demo` ran at 96 % of a core for 48 minutes. Here the dashboard runs in its
own session on a pseudo-terminal (so no SIGHUP comes), draws its first frame, and the terminal's side of
the pty is closed.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")


def test_dashboard_exits_when_its_terminal_hangs_up() -> None:
    master, slave = os.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    env.pop("TEXTUAL", None)
    proc = subprocess.Popen([sys.executable, "-m", "ietop", "demo", "--speed", "0"], stdin=slave, stdout=slave,
                            stderr=slave, cwd=REPO, env=env, start_new_session=True)
    os.close(slave)
    try:
        screen = b""
        deadline = time.monotonic() + 60
        while b"Residency" not in screen and time.monotonic() < deadline:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    screen += os.read(master, 65536)
                except OSError:
                    break
        assert b"Residency" in screen, screen[-2000:]
        assert proc.poll() is None
        os.close(master)
        master = -1
        assert proc.wait(timeout=30) == 129
    finally:
        if master >= 0:
            os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
