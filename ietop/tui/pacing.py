"""When the next timer redraw may run: each redraw's whole cost, paid off at a share of the main thread.

A redraw's cost is not only the time `refresh_view` takes. Textual does part of the work later, on the same
thread: the compositor renders the changed lines at the next screen update (and a DataTable measures its
new rows when it is next idle). When the Requests and Events panels were DataTables, that deferred part was
about four times what a stopwatch around `refresh_view` saw (py-spy of bench/dashboard_loaded.py's burst),
so pacing by the stopwatch let rendering take a large share of the main thread and the feeds ingested half
of what the pipeline does outside the app.

So the pacer reads the main thread's CPU clock from the start of a redraw until the screen has been
refreshed after it (the app asks Textual for a callback then), less what applying events took meanwhile:
that is the redraw's cost. CPU time rather than wall time: a feed thread holding the GIL is not the
redraw's cost. The next timer redraw waits until the cost is paid off at the share.

(A replay's jump redraws in the middle of applying a batch: that redraw is counted as applying, so it
looks free. It is one redraw, after which the replay is paused.)
"""

from __future__ import annotations

import time
from collections.abc import Callable

REDRAW_SHARE = 0.5
"""Timer redraws take at most this share of the main thread: when each is dear (a burst of lines into a full
view rebuilds the tables), the screen updates less often and the feeds keep their pace."""
BURST_ITEMS = 5_000
BURST_SHARE = 0.1
"""While a flood comes in (a feed posted a batch with more to read behind it, or BURST_ITEMS events were applied
since the last redraw), a smaller share: a full view then redraws about once a second and the feeds keep nine
tenths of the main thread. A backlog is the signal that does not depend on how fast this machine is."""


Mark = tuple[float, float, float]
"""When a redraw began: the monotonic clock, the main thread's CPU clock and RedrawPacer's apply CPU total."""


class RedrawPacer:
    """Main-thread bookkeeping only (the app calls it from its handlers); the clocks are given for tests."""

    def __init__(self, cpu: Callable[[], float] = time.thread_time,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._cpu, self._clock = cpu, clock
        self._apply_cpu = 0.0
        """CPU seconds spent applying events, in all."""
        self._mark: Mark = (0.0, 0.0, 0.0)
        self._share = REDRAW_SHARE
        self._pending = 0
        """The redraw whose rendering is awaited (0: none)."""
        self.drawn = 0
        """Redraws so far (the token of the last)."""
        self.applied = 0
        """Events applied since the last redraw."""
        self.behind = False
        """A feed had more to read when it posted a batch applied since the last redraw."""
        self.after = 0.0
        """A timer's redraw waits until then (monotonic clock)."""
        self.cost = 0.0
        """The last redraw's cost in main-thread CPU seconds, as far as it is known yet."""

    def apply_began(self) -> float:
        return self._cpu()

    def apply_ended(self, began_cpu: float, events: int, behind: bool = False) -> None:
        """Applying `events` began at `began_cpu` (apply_began()) and has just ended; `behind`: their feed had
        more to read (Batch.behind)."""
        self._apply_cpu += self._cpu() - began_cpu
        self.applied += events
        self.behind = self.behind or behind

    def began(self) -> Mark:
        """A redraw begins; give the mark to drew() if it draws (it may find nothing to do)."""
        return self._clock(), self._cpu(), self._apply_cpu

    def drew(self, mark: Mark) -> int:
        """The redraw that began at `mark` has run its own code: its cost so far holds the next one back.
        Returns a token for rendered(), to be called once the screen has been refreshed after it."""
        self._mark = mark
        self._share = BURST_SHARE if self.behind or self.applied >= BURST_ITEMS else REDRAW_SHARE
        self.applied, self.behind = 0, False
        self.drawn += 1
        self._pending = self.drawn
        self._pay()
        return self.drawn

    def rendered(self, token: int) -> None:
        """The screen has been refreshed after redraw `token`: its whole cost is known now (a later redraw's
        token supersedes it)."""
        if token == self._pending:
            self._pending = 0
            self._pay()

    def _pay(self) -> None:
        began, began_cpu, apply_cpu = self._mark
        self.cost = max(0.0, self._cpu() - began_cpu - (self._apply_cpu - apply_cpu))
        self.after = began + self.cost / self._share

    def wait(self) -> float:
        """Seconds until a timer's redraw may run (<= 0: now)."""
        return self.after - self._clock()
