"""Timing and notes the e2e conftests collect and print in pytest's terminal summary."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NoReturn, Protocol, TypeVar

from e2e_support.cache import BuildError


class _Built(Protocol):
    @property
    def build_seconds(self) -> float: ...


B = TypeVar("B", bound=_Built)


def timed_build(timings: dict[str, float], what: str, build: Callable[[], B],
                on_error: Callable[[BuildError], NoReturn], *, cold: str = "(when it was made)") -> B:
    """Run ``build()`` (a cached ``ensure_*``), record ``"<what> ready (this session)"`` and
    ``"<what> cold build <cold>"`` in ``timings``; a :class:`BuildError` goes to ``on_error``."""
    t0 = time.monotonic()
    try:
        value = build()
    except BuildError as exc:
        on_error(exc)
    timings[f"{what} ready (this session)"] = time.monotonic() - t0
    timings[f"{what} cold build {cold}"] = value.build_seconds
    return value


def write_summary(terminalreporter: Any, title: str, timings: dict[str, float], notes: list[str]) -> None:
    """A section ``title`` with the notes, then one line a timing."""
    if not timings and not notes:
        return
    terminalreporter.section(title)
    for note in notes:
        terminalreporter.write_line(note)
    for name, seconds in timings.items():
        terminalreporter.write_line(f"{name:<45} {seconds:8.2f} s")
