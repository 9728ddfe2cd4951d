"""The records `ietop.model.engines.vllm_join` keeps per logged request and per undecided access line, and the
enumeration of a group's possible owners (each line one owner among its candidates, each request at most one
line, a request known to have had its line has one). Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from ietop.model.records import Ref, Request

RECEIVED, ADDED = 0, 1
SEARCH_BUDGET = 20000
"""Steps of the enumeration of a group's assignments before it gives up (the group then states nothing)."""


@dataclass(slots=True, eq=False)
class Open:
    """A logged request (`Received request` / DEBUG `details`) that may still own an access line."""

    rid: str
    kind: str | None
    epoch: int
    """The stats line count when it was logged (an idle engine's requests of an interval ago are gone)."""
    stream: bool | None = None
    stage: int = RECEIVED
    closed: bool = False
    """It can own no later line (added as a stream, failed, answered for certain, stale)."""
    answered: bool = False
    """It certainly had its 200 line: a stream whose generator ran (added, failed, or streaming output)."""
    lines_while_received: int = 0
    """Access lines of its kind written between its received and added lines (0: it was no stream)."""
    prompt: int | None = None
    ref: Ref | None = None
    group: Group | None = None


@dataclass(slots=True, eq=False)
class Line:
    """An access line that several requests could own, and its row while it waits."""

    req: Request
    cands: list[tuple[Open, int]]
    """Each candidate with its stage when the line was written."""
    t: float
    held: bool = True


@dataclass(slots=True, eq=False)
class Group:
    """Undecided lines and the requests that could own them."""

    lines: list[Line] = field(default_factory=list)
    members: list[Open] = field(default_factory=list)
    opaque: bool = False
    """Too many assignments to enumerate: it states nothing more, and ends when none of its members is open."""


def edge(c: Open, stage: int) -> bool:
    """Could `c`, at `stage` when a line was written, own it, given what is known of it now?"""
    return c.stream is None or stage == (RECEIVED if c.stream else ADDED)


def assignments(group: Group, staged: bool) -> tuple[list[set[int]], list[int], int] | None:
    """Every way to give each line of the group its own owner among its candidates, where every member known to
    have had its line (a stream past its added line) has one; `staged`: the log has added lines (else a
    request's stage says nothing of whether it could own a line). Per line, the members it can go to; per member,
    in how many assignments it is used; and how many there are. None when there is none (the log contradicts
    the rules: state nothing) or the search exceeds SEARCH_BUDGET."""
    index = {id(m): j for j, m in enumerate(group.members)}
    options = [[index[id(c)] for c, s in line.cands if id(c) in index and (not staged or edge(c, s))]
               for line in group.lines]
    must = [j for j, m in enumerate(group.members) if m.answered]
    owners: list[set[int]] = [set() for _ in group.lines]
    used = [0] * len(group.members)
    count = 0
    steps = 0
    chosen: list[int] = []
    taken: set[int] = set()

    def walk(i: int) -> bool:
        nonlocal count, steps
        steps += 1
        if steps > SEARCH_BUDGET:
            return False
        if i == len(options):
            if all(j in taken for j in must):
                count += 1
                for k, j in enumerate(chosen):
                    owners[k].add(j)
                    used[j] += 1
            return True
        for j in options[i]:
            if j not in taken:
                taken.add(j)
                chosen.append(j)
                ok = walk(i + 1)
                chosen.pop()
                taken.discard(j)
                if not ok:
                    return False
        return True

    if not walk(0) or count == 0:
        return None
    return owners, used, count
