"""The README's keys played in a real terminal (tmux) at 80x24 and 120x40: tests/tmux/play_keys.py.

The pilot tests (tests/tui/) drive the app in-process; this drives the installed command through a pty, as a
user does, so what it catches is what only a terminal shows: a key tmux sends differently (ctrl+s, shift+tab,
a lone escape), a screen that does not fit, a traceback printed as the app exits, an exit status.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("play_keys.py")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux; .ci/run "
                                                          "installs it where it can)")
@pytest.mark.parametrize("size", ["80x24", "120x40"])
def test_every_readme_key_in_a_real_terminal(size: str) -> None:
    # The script polls each screen with its own generous limits; this cap only stops a wedged tmux.
    done = subprocess.run([sys.executable, str(SCRIPT), "--size", size], capture_output=True, text=True,
                          timeout=900, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = done.stdout.splitlines()
    # Every key had its verdict, and the last one is `q`'s: the dashboard exited with status 0.
    assert any(line.startswith("ok   ctrl+s") for line in verdicts), done.stdout
    assert any(line.startswith("ok   q: exit status 0") for line in verdicts), done.stdout
