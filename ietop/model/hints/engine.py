"""HintEngine: watches finalized records stream past (bounded) and applies every rule to what it saw."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ietop.model.hints.rules import RULES
from ietop.model.hints.types import EVIDENCE_MAX, KV_HIGH, Hint, HintContext, _Seen
from ietop.model.records import Load, Unload


class HintEngine:
    """Sink hook (`observe`) plus the rules (`evaluate`)."""

    def __init__(self) -> None:
        self.seen = _Seen()
        self._observed = 0
        self._window: tuple[int, float, float, _Seen] | None = None
        """(records observed, cut, earliest time kept, the copy): the last window, reused while no record came
        in and the cut has not passed its earliest time (the dashboard asks again every second)."""

    def _since(self, t: float) -> _Seen:
        w = self._window
        if w is not None and w[0] == self._observed and w[1] <= t <= w[2]:
            return w[3]
        seen, floor = self.seen.since(t)
        self._window = (self._observed, t, floor, seen)
        return seen

    def observe(self, kind: str, record: Any) -> None:
        self._observed += 1
        s = self.seen
        if kind == "request":
            if record.inference:
                s.requests.append(record)
            if record.truncated:
                # Every truncated request, as since() counts them (truncation is of inference prompts).
                s.truncated_ok += record.status < 400
        elif kind == "load":
            s.loads.append(record)
        elif kind == "unload":
            s.unloads.append(record)
        elif kind == "truncation":
            s.truncation_count += 1
            s.truncations.append(record)
            if s.largest_truncation is None or (record.data.get("prompt") or 0) > (
                    s.largest_truncation.data.get("prompt") or 0):
                s.largest_truncation = record
        elif kind == "error":
            bucket = s.errors.setdefault(record.data["kind"], [])
            if len(bucket) < EVIDENCE_MAX:
                bucket.append(record)
        elif kind == "stats":
            if (record.data.get("waiting") or 0) >= 1 and len(s.stats_waiting) < 1000:
                s.stats_waiting.append(record)
            if (record.data.get("kv_usage") or 0) >= KV_HIGH and len(s.stats_kv) < 1000:
                s.stats_kv.append(record)
        elif kind == "preemption":
            s.preemption_count += 1
            if len(s.preemptions) < EVIDENCE_MAX:
                s.preemptions.append(record)

    def evaluate(self, ctx: HintContext, since: float | None = None, extra_loads: Sequence[Load] = (),
                 extra_unloads: Sequence[Unload] = ()) -> list[Hint]:
        """Every rule over what was seen — or, with `since` (the dashboard's window), over the records
        at or after that time only, so a hint clears once its symptom is no longer in the window.
        `extra_*`: records the store has not finalized yet (the dashboard cannot wait for them)."""
        seen = self.seen if since is None else self._since(since)
        if extra_loads or extra_unloads:
            # A copy: the extras must not stick (to what was seen, nor to the window kept for the next call).
            seen = seen.since(float("-inf"))[0]
            low = float("-inf") if since is None else since
            known = {id(x) for x in (*seen.loads, *seen.unloads)}
            seen.loads.extend(ld for ld in extra_loads if id(ld) not in known and (ld.t_end or ld.t_begin) >= low)
            seen.unloads.extend(u for u in extra_unloads if id(u) not in known and u.t >= low)
        hints: list[Hint] = []
        for rule in RULES:
            hint = rule(seen, ctx)
            if hint is not None:
                hints.append(hint)
        order = {"crit": 0, "warn": 1, "info": 2}
        return sorted(hints, key=lambda h: order[h.severity])
