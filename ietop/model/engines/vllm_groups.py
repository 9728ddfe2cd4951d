"""The records `ietop.model.engines.vllm_join` keeps per logged request and per undecided access line, and what
all of a group's possible assignments agree on (each line one owner among its candidates, each request at most
one line, a request known to have had its line has one). Pure, but for the masks a line keeps of its candidates.

The assignments are not enumerated (their number grows exponentially with a busy log's overlap): they are the
perfect matchings of a bipartite graph, and what they agree on follows from one of them (Dulmage–Mendelsohn):
an edge is in some perfect matching iff it is in the one found or both its ends lie in one strongly connected
component of the graph with the matching's edges reversed. A busy log's group has a hundred lines and members
and is solved again after each of its lines, so sets of members are bit masks (bit k: the request with serial
`lo + k`, the group's lowest), and a line keeps its candidates' masks from one solution to the next."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce
from itertools import count
from operator import attrgetter, or_

from ietop.model.records import Ref, Request

RECEIVED, ADDED = 0, 1
MAX_EDGES = 200_000
"""The most (line, candidate) pairs a group may have and still be solved, a guard against a pathological log
(a busy one's groups have some thousands, solved in a fraction of a millisecond): a larger one states
nothing more."""
_SERIALS = count()
_CANDS, _SERIAL = attrgetter("cands"), attrgetter("serial")


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
    serial: int = field(default_factory=lambda: next(_SERIALS))
    """Order of creation: its bit in the masks of `assignments` (the requests a group holds were logged close
    together, so their serials are too)."""


@dataclass(slots=True, eq=False)
class Line:
    """An access line that several requests could own, and its row while it waits."""

    req: Request
    cands: list[tuple[Open, int]]
    """Each candidate with its stage when the line was written. Replaced, never changed in place: the masks
    below are remade when it is another list."""
    t: float
    held: bool = True
    basis: list[tuple[Open, int]] | None = None
    """The `cands` the masks were made from."""
    base: int = 0
    """The serial of bit 0 of the masks."""
    received: int = 0
    """The candidates that were at their received stage when the line was written."""
    added: int = 0
    """The candidates that were past their added line."""


@dataclass(slots=True, eq=False)
class Group:
    """Undecided lines and the requests that could own them."""

    lines: list[Line] = field(default_factory=list)
    members: list[Open] = field(default_factory=list)
    opaque: bool = False
    """No assignment fits what the log said (or it is too large to solve): it states nothing more, and ends
    when none of its members is open."""
    solved: tuple[tuple[tuple[int, ...], int, int], Solution | None] | None = None
    """The last `solve` of its masks and what it gave: a third of a busy log's solves meet the same masks
    again (a request's added line that tells nothing new of it), and `solve` is a pure function of them."""


def edge(c: Open, stage: int) -> bool:
    """Could `c`, at `stage` when a line was written, own it, given what is known of it now?"""
    return c.stream is None or stage == (RECEIVED if c.stream else ADDED)


@dataclass(slots=True)
class Assignments:
    """What every assignment of a group's lines to its members agrees on. Its masks are over `bits`; its
    methods answer in indices into `Group.members`."""

    owners: list[int]
    """Per line, the members that own it in some assignment: a single one decides the line."""
    always: int
    """Members that own a line in every assignment: answered, though which line may be unknown."""
    never: int
    """Members that own a line in no assignment: free again."""
    bits: list[int]
    """Each member's bit."""

    def owner(self, i: int) -> int | None:
        """The member that owns line `i` in every assignment, if one does."""
        mask = self.owners[i]
        return self.bits.index(mask.bit_length() - 1) if mask & (mask - 1) == 0 else None

    def owner_set(self, i: int) -> set[int]:
        """The members that own line `i` in some assignment."""
        return {j for j, k in enumerate(self.bits) if self.owners[i] >> k & 1}

    def always_used(self, j: int) -> bool:
        return bool(self.always >> self.bits[j] & 1)

    def never_used(self, j: int) -> bool:
        return bool(self.never >> self.bits[j] & 1)


def assignments(group: Group, staged: bool) -> Assignments | None:
    """What all ways to give each line of the group its own owner among its candidates agree on, where every
    member known to have had its line (a stream past its added line) has one; `staged`: the log has added lines
    (else a request's stage says nothing of whether it could own a line). None when there is no such way (the
    log contradicts the rules: state nothing) or the group has more than MAX_EDGES pairs."""
    lines, members = group.lines, group.members
    if sum(map(len, map(_CANDS, lines))) > MAX_EDGES:
        return None
    serials = list(map(_SERIAL, members))
    lo = min(serials, default=0)
    # Bits by serial, if the members' serials are close together (they are, but for a request left open
    # long); else by index, the lines' masks made anew.
    window = max(serials, default=0) - lo < 4 * len(members) + 64
    bits = [k - lo for k in serials] if window else list(range(len(members)))
    everyone = fits_received = fits_added = must = 0
    for m, k in zip(members, bits, strict=True):
        b = 1 << k
        everyone |= b
        if m.stream is not False:  # `edge(m, RECEIVED)`, inline: this runs for every member of every call
            fits_received |= b
        if m.stream is not True:  # `edge(m, ADDED)`
            fits_added |= b
        if m.answered:
            must |= b
    if not staged:
        fits_received = fits_added = everyone
    where: dict[int, int] = {} if window else {id(m): 1 << j for j, m in enumerate(members)}
    options = []
    for line in lines:
        if not window:
            received, added = _made(line.cands, where)
        else:
            if line.basis is not line.cands:
                line.base = base = min((c.serial for c, _ in line.cands), default=0)
                line.received, line.added = _made(line.cands, None, base)
                line.basis = line.cands
            shift = line.base - lo
            if shift >= 0:
                received, added = line.received << shift, line.added << shift
            else:  # bits below `lo`: requests no longer in the group
                received, added = line.received >> -shift, line.added >> -shift
        # A request no longer in the group counts for nothing.
        options.append((received & fits_received | added & fits_added) & everyone)
    key = (tuple(options), must, everyone)
    if group.solved is not None and group.solved[0] == key:
        found = group.solved[1]
    else:
        found = solve(options, must, everyone)
        group.solved = (key, found)
    return None if found is None else Assignments(*found, bits)


def _made(cands: list[tuple[Open, int]], where: dict[int, int] | None, base: int = 0) -> tuple[int, int]:
    """The masks of the candidates at their received stage and past their added line: bits by `where` (id ->
    bit), or by serial from `base`."""
    received = added = 0
    for c, stage in cands:
        b = 1 << (c.serial - base) if where is None else where.get(id(c), 0)
        if stage == RECEIVED:
            received |= b
        else:
            added |= b
    return received, added


Solution = tuple[list[int], int, int]
"""`solve`'s answer: `Assignments`' owners, always and never."""


def solve(options: list[int], must: int, everyone: int) -> Solution | None:
    """The owners per line, the members always used and those never used (`Assignments`), of lines each of
    which may be owned by the members in its mask of `options`, where those in `must` own one each; None when
    no assignment exists."""
    lines = len(options)
    n = everyone.bit_length()
    mate = _cover(options, must, n)
    if mate is None:
        return None
    matched = reduce(or_, (1 << m for m in mate), 0)
    free = everyone & ~matched
    # The assignments are the perfect matchings of the lines plus `spare` placeholder lines, each of which any
    # member not in `must` may take (it then owns no real line); an edge is in one of them iff it is in the one
    # found or lies on a cycle that alternates between its edges and the others. The graph of those cycles
    # has a node per member (a matched member stands for its line too: its only way on is to another owner of
    # that line) and one, `pool`, for the interchangeable placeholders; a free member's only way on is to it.
    spare, pool = everyone.bit_count() - lines, n
    out = [0] * (n + 1)
    for i, m in enumerate(mate):
        out[m] = options[i] & ~(1 << m)
    rest = free
    while rest:
        low = rest & -rest
        out[low.bit_length() - 1] = 1 << pool
        rest ^= low
    # The pool may hand a placeholder to any member that may own no line; to the member holding one only
    # if there is another placeholder.
    out[pool] = (matched & ~must) | (free if spare > 1 else 0)
    nodes = everyone | (1 << pool if spare > 0 else 0)
    if not nodes:
        return [], 0, 0
    # A busy log's group is mostly one large component, which two sweeps over the masks find; the few nodes
    # outside it are sorted by Tarjan's algorithm.
    pivot = pool if spare > 0 else mate[0]
    hub = _forward(out, pivot, nodes) & _backward(out, pivot, nodes)
    comp = _tarjan(out, nodes & ~hub)
    owners = [options[i] & (hub if hub >> m & 1 else comp[m]) | 1 << m for i, m in enumerate(mate)]
    # A member owns a line in every assignment unless a placeholder can be its: its edge from the pool lies
    # on a cycle (free members hold one already).
    always = matched & (must | ~hub) if spare > 0 else matched
    return owners, always, everyone & ~reduce(or_, owners, 0)


def _cover(options: list[int], must: int, n: int) -> list[int] | None:
    """One assignment: each line's member, giving every line an owner and every `must` member a line; None
    when there is none."""
    lines = len(options)
    mate = [-1] * lines
    line_of = [-1] * n
    taken = 0
    pending = []
    for i, opts in enumerate(options):
        avail = opts & ~taken
        if not avail:
            pending.append(i)
            continue
        pick = avail & must or avail  # a must member first: it needs a line, the others may do without
        low = pick & -pick
        mate[i] = j = low.bit_length() - 1
        line_of[j] = i
        taken |= low
    for start in pending:
        # Breadth-first augmenting path from the line: the lines matched so far stay matched.
        via: dict[int, int] = {}  # member reached -> the line it was reached from
        queue, k, end, seen = [start], 0, -1, 0
        while k < len(queue):
            u = queue[k]
            k += 1
            new = options[u] & ~seen
            seen |= new
            if new & ~taken:
                low = new & ~taken
                end = (low & -low).bit_length() - 1
                via[end] = u
                break
            while new:
                low = new & -new
                j = low.bit_length() - 1
                new ^= low
                via[j] = u
                queue.append(line_of[j])
        if end < 0:
            return None  # these lines have too few possible owners among them
        taken |= 1 << end
        j = end
        while j >= 0:  # each line on the path takes the member after it; `start` had none
            u = via[j]
            prev = mate[u]
            mate[u], line_of[j] = j, u
            j = prev
    need = must & ~taken
    while need:
        low = need & -need
        need ^= low
        start = low.bit_length() - 1
        # Give it a line without taking one from any line or must member: an alternating path through lines
        # and their owners that ends at an owner that may do without (each line passes on down the path). If
        # there is none, no assignment covers it and the others (Kuhn's argument, the placeholders of `solve`
        # being the other side's free vertices).
        came: dict[int, int] = {}  # line reached -> the member that would take it
        todo, frontier, end = list(range(lines)), low, -1
        while frontier and end < 0:
            nxt, left = 0, []
            for i in todo:
                hit = options[i] & frontier
                if not hit:
                    left.append(i)
                    continue
                came[i] = (hit & -hit).bit_length() - 1
                if not must >> mate[i] & 1:
                    end = i
                    break
                nxt |= 1 << mate[i]
            todo, frontier = left, nxt
        if end < 0:
            return None
        line_of[mate[end]] = -1
        i = end
        while True:
            m = came[i]
            prev = line_of[m]
            mate[i], line_of[m] = m, i
            if m == start:
                break
            i = prev
    return mate


def _forward(out: list[int], start: int, nodes: int) -> int:
    """The nodes `start` reaches."""
    reach = frontier = 1 << start
    while frontier:
        nxt = 0
        while frontier:
            low = frontier & -frontier
            nxt |= out[low.bit_length() - 1]
            frontier ^= low
        frontier = nxt & nodes & ~reach
        reach |= frontier
    return reach


def _backward(out: list[int], target: int, nodes: int) -> int:
    """The nodes that reach `target`: sweeps over the nodes not yet known to, each node passing what it
    learns on to those after it, the next sweep in the other direction (a dense group's paths are short: a
    few sweeps), while that costs less than reversing the edges would; else over the reversed edges."""
    reach = 1 << target
    todo = [b for b in range(len(out)) if nodes >> b & 1 and b != target]
    budget = 2 * sum(map(int.bit_count, out))
    while todo and budget > 0:
        before = reach
        for b in todo:
            if out[b] & reach:
                reach |= 1 << b
        if reach == before:
            return reach
        todo = [b for b in reversed(todo) if not reach >> b & 1]
        budget -= len(todo)
    if not todo:
        return reach
    into = [0] * len(out)
    for b in range(len(out)):
        rest = out[b] & nodes if nodes >> b & 1 else 0
        while rest:
            low = rest & -rest
            into[low.bit_length() - 1] |= 1 << b
            rest ^= low
    return _forward(into, target, nodes)


def _tarjan(out: list[int], nodes: int) -> list[int]:
    """Each node's strongly connected component (a mask) among `nodes`, by Tarjan's algorithm (iterative: a
    large group must not hit Python's recursion limit)."""
    comp = [0] * len(out)
    order = [-1] * len(out)
    low = [0] * len(out)
    stack: list[int] = []
    counter = 0
    done = 0
    roots = nodes
    while roots:
        root = (roots & -roots).bit_length() - 1
        roots &= roots - 1
        if order[root] >= 0:
            continue
        order[root] = low[root] = counter
        counter += 1
        stack.append(root)
        work = [(root, out[root] & nodes)]
        while work:
            v, rest = work[-1]
            rest &= ~done  # edges into finished components close no cycle
            if rest:
                w = (rest & -rest).bit_length() - 1
                work[-1] = (v, rest & (rest - 1))
                if order[w] < 0:
                    order[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    work.append((w, out[w] & nodes))
                elif order[w] < low[v]:  # on the stack
                    low[v] = order[w]
                continue
            work.pop()
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] == order[v]:
                mask = 0
                while True:
                    w = stack.pop()
                    mask |= 1 << w
                    if w == v:
                        break
                done |= mask
                b = mask
                while b:
                    comp[(b & -b).bit_length() - 1] = mask
                    b &= b - 1
    return comp
