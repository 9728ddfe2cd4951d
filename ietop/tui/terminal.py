"""Notice that the terminal went away, so that the dashboard exits instead of spinning."""

from __future__ import annotations

import os
import select

TERMINAL_FD = 0
"""Textual's Linux/macOS driver reads keys from stdin's descriptor."""


def hung_up(fd: int = TERMINAL_FD) -> bool:
    """True when the terminal on ``fd`` has hung up: its other side is closed.

    The kernel usually sends SIGHUP then, and that ends the process. Without one (a process in its own
    session, a pseudo-terminal whose owner was killed) Textual's input thread finds stdin readable and
    empty on every try and turns a core into heat: an `ietop demo` orphaned that way ran at 96 % of a core
    for 48 minutes here, and Textual's minimal app does the same. poll() says POLLHUP at no cost.
    """
    if not hasattr(select, "poll"):  # Windows: no poll(), and no pseudo-terminal to lose
        return False
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    try:
        ready = poller.poll(0)
    except OSError:
        return True
    return any(mask & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _fd, mask in ready)


def is_terminal(fd: int = TERMINAL_FD) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False
