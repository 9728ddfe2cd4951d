"""Stand-ins for the commands a source runs (`docker`, `journalctl`): a real executable on a temporary PATH that
says what the real one says when it fails (the messages are Docker 28.2.2's and systemd's own)."""

from __future__ import annotations

from pathlib import Path

NO_DAEMON = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"
NO_CONTAINER = "Error response from daemon: No such container: ollama"
JOURNAL_REFUSED = "Failed to add filter for units: Invalid argument"


def fake_command(folder: Path, name: str, stderr: str, code: int, stdout: str = "") -> None:
    """An executable `name` in `folder` that writes `stdout`, then `stderr` to stderr, and exits with `code`."""
    script = folder / name
    body = "#!/bin/sh\n"
    if stdout:
        body += f"printf '%s\\n' '{stdout}'\n"
    body += f"printf '%s\\n' '{stderr}' >&2\nexit {code}\n"
    script.write_text(body)
    script.chmod(0o755)
