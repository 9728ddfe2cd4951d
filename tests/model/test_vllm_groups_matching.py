"""`vllm_groups.assignments` by matching agrees with the enumeration it replaced (issue 19's groups).

The reference below is the old enumeration, kept verbatim but for its budget, which it reports instead of
answering None: where it finishes, the matching must give the same owners per line, the same members used in
every assignment and in none, and None exactly where no assignment exists.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from ietop.model.engines.vllm_groups import (
    ADDED,
    RECEIVED,
    Assignments,
    Group,
    Line,
    Open,
    assignments,
    edge,
)
from ietop.model.records import Ref, Request

BUDGET = 20000
OVER = "over budget"


def enumerate_old(group: Group, staged: bool,
                  budget: int = BUDGET) -> tuple[list[set[int]], list[int], int] | str | None:
    """The old `assignments`: every assignment walked; OVER where it gave up (it then answered None too)."""
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
        if steps > budget:
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

    if not walk(0):
        return OVER
    if count == 0:
        return None
    return owners, used, count


def _request() -> Request:
    return Request(time=None, t_end=0.0, t_start=0.0, engine="vllm", method="POST", path="/v1/completions",
                   status=200, client=None, latency_s=None, ref=Ref(0, 1))


def make_group(members: list[tuple[bool | None, bool]], lines: list[list[tuple[int, int]]], gap: int = 0) -> Group:
    """Members as (stream, answered); lines as (member index, stage) candidates; index -1 is a request that is
    no longer a member (excluded after the line was written). `gap`: requests logged (and gone) between two
    members, which spreads their serials (the solver then numbers them by index)."""
    opened = []
    for j, (stream, answered) in enumerate(members):
        opened.append(Open(f"r{j}", None, 0, stream=stream, answered=answered))
        for _ in range(gap):
            Open("other", None, 0)
    gone = Open("gone", None, 0)
    return Group(lines=[Line(_request(), [(opened[j] if j >= 0 else gone, s) for j, s in cands], 0.0)
                        for cands in lines],
                 members=opened)


def check_same(group: Group, staged: bool, budget: int = BUDGET) -> bool:
    """The matching's answer equals the enumeration's; False where the enumeration gave up."""
    old = enumerate_old(group, staged, budget)
    new = assignments(group, staged)
    if old == OVER:
        return False
    if old is None:
        assert new is None
        return True
    assert isinstance(old, tuple) and new is not None
    owners, used, count = old
    seen = as_sets(new)
    assert seen is not None
    assert seen.owners == owners
    assert seen.always == {j for j, u in enumerate(used) if u == count}
    assert seen.never == {j for j, u in enumerate(used) if u == 0}
    assert [new.owner(i) for i in range(len(owners))] == [next(iter(o)) if len(o) == 1 else None for o in owners]
    return True


@st.composite
def groups(draw: st.DrawFn, max_members: int = 7, max_lines: int = 7) -> tuple[Group, bool]:
    gap = draw(st.sampled_from([0, 0, 0, 1, 40]))
    n = draw(st.integers(0, max_members))
    members = [(draw(st.sampled_from([None, True, False])), draw(st.booleans())) for _ in range(n)]
    lines = []
    for _ in range(draw(st.integers(0, max_lines))):
        who = draw(st.lists(st.integers(-1, n - 1), unique=True, max_size=n + 1)) if n else []
        lines.append([(j, draw(st.sampled_from([RECEIVED, ADDED]))) for j in who])
    return make_group(members, lines, gap), draw(st.booleans())


@settings(max_examples=1500, deadline=None)
@given(groups())
def test_matching_equals_enumeration(drawn: tuple[Group, bool]) -> None:
    group, staged = drawn
    check_same(group, staged)


@settings(max_examples=400, deadline=None)
@given(groups(), st.lists(st.tuples(st.integers(0, 6), st.integers(0, 10**6)), max_size=10))
def test_answers_follow_a_changing_group(drawn: tuple[Group, bool], steps: list[tuple[int, int]]) -> None:
    """The masks a line keeps from one solution to the next follow what the join changes in between."""
    group, staged = drawn
    check_same(group, staged)
    left: list[Open] = []
    for kind, k in steps:
        members = group.members
        if kind == 0 and members:  # the log tells a request's kind of answer
            members[k % len(members)].stream = (None, True, False)[k % 3]
        elif kind == 1 and members:  # a stream ran: it had its line
            members[k % len(members)].answered = True
        elif kind == 2 and members:  # a request leaves the group and every line (`VllmJoin._exclude`)
            m = members.pop(k % len(members))
            left.append(m)
            for line in group.lines:
                line.cands = [(c, s) for c, s in line.cands if c is not m]
        elif kind == 3:  # a new line, with a new request (or one that left) among its candidates
            new = left.pop() if left and k & 2 else Open("new", None, 0)
            members.append(new)
            old = [(m, k >> j & 1) for j, m in enumerate(members[:-1]) if k >> (j + 8) & 1]
            group.lines.append(Line(_request(), [*old, (new, k & 1)], 0.0))
        elif kind == 4:  # groups merged in another order
            group.members = members[::-1]
        elif kind == 5 and group.lines:  # one line drops a candidate
            line = group.lines[k % len(group.lines)]
            line.cands = line.cands[1:]
        elif kind == 6:
            staged = True
        check_same(group, staged)


@settings(max_examples=150, deadline=None)
@given(groups(max_members=11, max_lines=10))
def test_matching_equals_enumeration_larger(drawn: tuple[Group, bool]) -> None:
    group, staged = drawn
    check_same(group, staged, budget=200000)


# -- hand-made cases ----------------------------------------------------------------------------------------

@dataclass
class Sets:
    """An answer with its masks as sets, to compare with literals."""

    owners: list[set[int]]
    always: set[int]
    never: set[int]


def as_sets(found: Assignments | None) -> Sets | None:
    if found is None:
        return None
    members = range(len(found.bits))
    return Sets([found.owner_set(i) for i in range(len(found.owners))], {j for j in members if found.always_used(j)},
                {j for j in members if found.never_used(j)})


def answer(members: list[tuple[bool | None, bool]], lines: list[list[int]], compare: bool = True) -> Sets | None:
    group = make_group(members, [[(j, RECEIVED) for j in cands] for cands in lines])
    if compare:
        assert check_same(group, staged=False)
    return as_sets(assignments(group, staged=False))


PLAIN = (None, False)
ANSWERED = (True, True)


def test_two_lines_one_possible_owner_is_infeasible() -> None:
    assert answer([PLAIN, PLAIN], [[0], [0]]) is None


def test_answered_member_without_a_line_is_infeasible() -> None:
    assert answer([PLAIN, ANSWERED], [[0]]) is None
    assert answer([ANSWERED], []) is None


def test_no_lines_frees_every_member() -> None:
    found = answer([PLAIN, PLAIN], [])
    assert found is not None and found.owners == [] and found.always == set() and found.never == {0, 1}


def test_forced_chain() -> None:
    # line 0 can only be member 0's, so line 1 is 1's, so line 2 is 2's; member 3 is on no line.
    found = answer([PLAIN] * 4, [[0], [0, 1], [1, 2]])
    assert found is not None
    assert found.owners == [{0}, {1}, {2}]
    assert found.always == {0, 1, 2} and found.never == {3}


def test_must_member_decides_its_line() -> None:
    # member 1 had its line, and line 0 is the only one it could have had.
    found = answer([PLAIN, ANSWERED, PLAIN], [[0, 1], [0, 2]])
    assert found is not None
    assert found.owners == [{1}, {0, 2}]
    assert found.always == {1} and found.never == set()


def test_must_member_pushes_along_a_path() -> None:
    # member 2 had its line, and only line 1 could be it; line 0 stays 0's or 1's.
    found = answer([PLAIN, PLAIN, ANSWERED], [[0, 1], [1, 2]])
    assert found is not None
    assert found.owners == [{0, 1}, {2}] and found.always == {2} and found.never == set()
    # With a third line only 1 could own, line 0 is 0's.
    found = answer([PLAIN, PLAIN, ANSWERED], [[0, 1], [1, 2], [1]])
    assert found is not None
    assert found.owners == [{0}, {2}, {1}] and found.always == {0, 1, 2}


def test_member_used_in_every_assignment_without_a_decided_line() -> None:
    # three members for two lines that both may be 0's or 1's: 0 and 1 own them, which one unknown; 2 is free.
    found = answer([PLAIN] * 3, [[0, 1], [0, 1]])
    assert found is not None
    assert found.owners == [{0, 1}, {0, 1}] and found.always == {0, 1} and found.never == {2}
    found = answer([PLAIN] * 3, [[0, 1], [0, 1, 2]])
    assert found is not None and found.always == set() and found.never == set()


def test_stage_rules_apply_when_staged() -> None:
    stream, plain = (True, False), (False, False)
    group = make_group([stream, plain], [[(0, RECEIVED), (1, RECEIVED)], [(0, ADDED), (1, ADDED)]])
    found = as_sets(assignments(group, staged=True))
    assert found is not None and found.owners == [{0}, {1}]
    assert check_same(group, staged=True) and check_same(group, staged=False)


def test_decides_where_the_enumeration_gave_up() -> None:
    # 12 lines any of 14 requests could own: far beyond the old budget; the matching states only what holds.
    group = make_group([PLAIN] * 14, [[(j, RECEIVED) for j in range(14)] for _ in range(12)])
    assert enumerate_old(group, staged=False) == OVER
    found = as_sets(assignments(group, staged=False))
    assert found is not None
    assert found.owners == [set(range(14))] * 12 and found.always == set() and found.never == set()
    # The same with the two requests beyond the lines known to have had no line of theirs: all others are used.
    lines = [[(j, RECEIVED) for j in range(12)] for _ in range(12)]
    group = make_group([PLAIN] * 14, lines)
    found = as_sets(assignments(group, staged=False))
    assert found is not None and found.always == set(range(12)) and found.never == {12, 13}


def test_large_forced_chains() -> None:
    # 300 lines: line 0 can only be request 0's, line k request k-1's or k's, so each is k's; 300 is free.
    n = 300
    found = answer([PLAIN] * (n + 1), [[0]] + [[k - 1, k] for k in range(1, n)], compare=False)
    assert found is not None
    assert found.owners == [{k} for k in range(n)]
    assert found.always == set(range(n)) and found.never == {n}
    # Line k may be k's or k+1's, and all but request 0 had their line: every line is k+1's.
    found = answer([PLAIN] + [ANSWERED] * n, [[k, k + 1] for k in range(n)], compare=False)
    assert found is not None
    assert found.owners == [{k + 1} for k in range(n)]
    assert found.always == set(range(1, n + 1)) and found.never == {0}
    # Only the last had its line: it takes line n-1, the rest stay open, no one is certainly free or answered.
    found = answer([PLAIN] * n + [ANSWERED], [[k, k + 1] for k in range(n)], compare=False)
    assert found is not None
    assert found.owners == [{k, k + 1} for k in range(n - 1)] + [{n}]
    assert found.always == {n} and found.never == set()


def test_a_line_forgets_a_request_that_left_and_came_back() -> None:
    # Request a left the group (it owned no line of it); it comes back as a candidate of a new line only.
    a, b, c = (Open(rid, None, 0) for rid in "abc")
    first = Line(_request(), [(a, RECEIVED), (b, RECEIVED)], 0.0)
    group = Group(lines=[first], members=[a, b])
    assert check_same(group, staged=False)
    first.cands = [(b, RECEIVED)]
    group.members = [b]
    assert check_same(group, staged=False)
    group.lines.append(Line(_request(), [(a, RECEIVED), (c, RECEIVED)], 0.0))
    group.members += [a, c]
    found = as_sets(assignments(group, staged=False))
    assert found is not None and found.owners == [{0}, {1, 2}]
    assert check_same(group, staged=False)
