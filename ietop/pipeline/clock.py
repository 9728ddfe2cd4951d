"""The replay's virtual clock: what `ietop replay` and `ietop demo` pace their feed by (ietop.pipeline.feeds)."""

from __future__ import annotations

import math
import threading
import time


class ReplayClock:
    """Virtual time for replay: `speed`× the wall clock, with pause and single steps.

    Idle stretches longer than `max_gap_s` of wall time are skipped, so an incident with an hour of
    silence in the middle does not stall the screen.

    A jump (`jump()`) releases events unpaced until whoever applies them finds the one it was looking for
    and pauses there (`pause(at=…)`); the feed posts what it released while jumping one batch at a time,
    and `ack()` tells it how many of that batch were applied, so it can release the rest again later."""

    def __init__(self, speed: float = 1.0, max_gap_s: float = 3.0) -> None:
        self.speed = _checked(speed)
        self.max_gap_s = max_gap_s
        self.paused = False
        self._steps = 0
        self._cond = threading.Condition()
        self._virtual: float | None = None
        self._wall = time.monotonic()
        self._jumping = False
        self._acked: int | None = None

    def now(self) -> float | None:
        with self._cond:
            return self._now_locked()

    def _now_locked(self) -> float | None:
        if self._virtual is None or self.paused or self.speed <= 0:
            return self._virtual
        return self._virtual + (time.monotonic() - self._wall) * self.speed

    def _rebase(self, virtual: float) -> None:
        self._virtual, self._wall = virtual, time.monotonic()

    def toggle_pause(self) -> bool:
        with self._cond:
            self._jumping = False
            now = self._now_locked()
            self.paused = not self.paused
            if now is not None:
                self._rebase(now)
            self._cond.notify_all()
            return self.paused

    @property
    def jumping(self) -> bool:
        return self._jumping

    def jump(self) -> None:
        """Release events as fast as they come until `pause()` (the next notable event, found by the caller)."""
        with self._cond:
            self._jumping = True
            if self.paused:
                self.paused = False
                if self._virtual is not None:
                    self._rebase(self._virtual)
            self._cond.notify_all()

    def ack(self, applied: int) -> None:
        """The batch the feed posted while jumping was applied up to its `applied` first items."""
        with self._cond:
            self._acked = applied
            self._cond.notify_all()

    def wait_ack(self, stop: threading.Event) -> int | None:
        """The feed's side of `ack()`: how many items of its last jump batch were applied (None: stopped)."""
        with self._cond:
            while self._acked is None:
                if stop.is_set():
                    return None
                self._cond.wait(0.25)
            applied, self._acked = self._acked, None
            return applied

    def pause(self, at: float | None = None) -> None:
        """Stop the clock (at virtual time `at`, when given: `--until`, or the end of a jump)."""
        with self._cond:
            self._jumping = False
            if not self.paused:
                now = self._now_locked()
                self.paused = True
                if at is not None or now is not None:
                    self._rebase(at if at is not None else now)  # type: ignore[arg-type]
            self._cond.notify_all()

    def step(self) -> None:
        """While paused: release the next event."""
        with self._cond:
            self._steps += 1
            self._cond.notify_all()

    def set_speed(self, speed: float) -> None:
        with self._cond:
            now = self._now_locked()
            self.speed = _checked(speed)
            if now is not None:
                self._rebase(now)
            self._cond.notify_all()

    def wait_until(self, t: float, stop: threading.Event, timeout: float) -> bool:
        """Block until virtual time reaches `t` (True), or `timeout` passes or `stop` is set (False)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            if self._virtual is None:
                self._rebase(t)
            while not stop.is_set():
                if self._jumping:
                    self._rebase(max(t, self._virtual or t))
                    return True
                if self.paused:
                    if self._steps:
                        self._steps -= 1
                        self._rebase(max(t, self._virtual or t))
                        return True
                else:
                    now = self._now_locked()
                    assert now is not None
                    if self.speed <= 0 or now >= t:
                        return True
                    if (t - now) / self.speed > self.max_gap_s:
                        self._rebase(t - self.max_gap_s * 0.1 * self.speed)
                        continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                wait = remaining if self.paused else min(remaining, (t - (self._now_locked() or t)) / self.speed)
                self._cond.wait(max(0.001, min(wait, 0.25)))
            return False


def _checked(speed: float) -> float:
    """A speed the clock can divide by: NaN or infinity would make every wait NaN (and kill the feed thread)."""
    if not math.isfinite(speed) or speed < 0:
        raise ValueError(f"replay speed must be a finite number >= 0, not {speed!r}")
    return speed
