"""Score what ietop states per request against the client's own ground truth (usage blocks, timings).

A stated fact is *wrong* when no assignment of ietop's rows to the client's requests of the same round (same
path) makes it true: the scorer tries every assignment and keeps the one with the fewest wrong facts, so it
never blames ietop for an identity it could not observe, and never forgives a number that fits no request.
*Coverage* is the share of knowable facts (those the client knows and the log level can show) that were stated.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

INT_FACTS = ("prompt_tokens", "cached_tokens", "output_tokens", "prefill_tokens")
TIME_FACTS = ("ttft_s", "latency_s")


def truth_of(rec: Any) -> dict[str, float | int | None]:
    """What the client knows of one request (an e2e RequestRecord)."""
    prompt, cached, output = rec.prompt_tokens, rec.cached_tokens or 0, rec.completion_tokens
    return {
        "prompt_tokens": prompt,
        "cached_tokens": cached if prompt is not None else None,
        "output_tokens": output,
        "prefill_tokens": None if prompt is None else prompt - cached,
        "ttft_s": rec.ttft_s if rec.stream else None,
        "latency_s": rec.elapsed_s,
    }


def fact_ok(name: str, stated: float | int, true: float | int | None, *, elapsed: float) -> bool | None:
    """True/False, or None when the client cannot check it (a non-stream's TTFT: only bounded by its latency)."""
    if name in INT_FACTS:
        return None if true is None else stated == true
    if name == "ttft_s" and true is None:
        return 0 <= stated <= elapsed + 0.05
    assert true is not None
    # The log's clock starts at the body line and ends at the last token line; the client's includes the
    # HTTP round trip on loopback and the SSE framing.
    return abs(float(stated) - float(true)) <= max(0.1, 0.15 * float(true))


@dataclass
class Score:
    stated: int = 0
    wrong: int = 0
    knowable: int = 0
    unchecked: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def coverage(self) -> float:
        return self.stated / self.knowable if self.knowable else 1.0

    def add(self, other: Score) -> None:
        self.stated += other.stated
        self.wrong += other.wrong
        self.knowable += other.knowable
        self.unchecked += other.unchecked
        self.problems += other.problems


def _pair(row: Any, rec: Any, knowable_facts: Sequence[str]) -> Score:
    s = Score()
    true = truth_of(rec)
    if row.path != rec.path:
        s.wrong += 1
        s.problems.append(f"{rec.name}: a {row.path} row given a {rec.path} request")
    for name in (*INT_FACTS, *TIME_FACTS):
        stated = getattr(row, name)
        if name in knowable_facts and true[name] is not None:
            s.knowable += 1
        if stated is None:
            continue
        s.stated += 1
        ok = fact_ok(name, stated, true[name], elapsed=rec.elapsed_s)
        if ok is None:
            s.unchecked += 1
        elif not ok:
            s.wrong += 1
            s.problems.append(f"{rec.name}: {name} {stated} stated, truth {true[name]}")
    return s


def score_round(rows: Sequence[Any], records: Sequence[Any], knowable_facts: Sequence[str]) -> Score:
    """The best assignment of rows to records (fewest wrong facts); rows beyond the records are wrong."""
    if len(rows) != len(records):
        s = Score(wrong=abs(len(rows) - len(records)))
        s.problems.append(f"{len(rows)} rows for {len(records)} requests ({[r.name for r in records]})")
        return s
    best: Score | None = None
    for perm in itertools.permutations(records):
        total = Score()
        for row, rec in zip(rows, perm, strict=True):
            total.add(_pair(row, rec, knowable_facts))
        if best is None or total.wrong < best.wrong:
            best = total
    assert best is not None
    return best


class UsageView:
    """What a client record's usage block and timings say, read the same way for every engine's client:
    counts are ints or None (vLLM gives cached tokens only with --enable-prompt-tokens-details)."""

    usage: dict[str, Any] | None
    t_start: float
    t_end: float

    @property
    def elapsed_s(self) -> float:
        return self.t_end - self.t_start

    def _count(self, key: str) -> int | None:
        value = (self.usage or {}).get(key)
        return value if isinstance(value, int) else None

    @property
    def prompt_tokens(self) -> int | None:
        return self._count("prompt_tokens")

    @property
    def completion_tokens(self) -> int | None:
        return self._count("completion_tokens")

    @property
    def cached_tokens(self) -> int | None:
        details = (self.usage or {}).get("prompt_tokens_details") or {}
        value = details.get("cached_tokens") if isinstance(details, dict) else None
        return value if isinstance(value, int) else None


@dataclass
class SavedRecord(UsageView):
    """A client record read back from the JSONL an overlap run keeps beside its log (fixtures/*/overlap/)."""

    name: str
    path: str
    stream: bool
    t_start: float
    t_end: float
    status: int | None
    usage: dict[str, Any] | None
    ttft_s: float | None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SavedRecord:
        return cls(d["name"], d["path"], d["stream"], d["t_start"], d["t_end"], d["status"], d["usage"], d["ttft_s"])


def rounds_of(records: Sequence[Any]) -> list[list[Any]]:
    """Records named `r<round>-<i>`, grouped by round in order."""
    rounds: dict[str, list[Any]] = {}
    for rec in records:
        rounds.setdefault(rec.name.split("-")[0], []).append(rec)
    return list(rounds.values())


def rows_in(requests: Sequence[Any], records: Sequence[Any]) -> list[Any]:
    """ietop's served inference rows whose access line falls in this round's span (one-second stamps)."""
    lo = min(r.t_start for r in records) - 1.0
    hi = max(r.t_end for r in records) + 1.0
    return [r for r in requests if r.inference and r.status == 200 and lo <= r.t_end <= hi]
