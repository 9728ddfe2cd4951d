"""The recent loads of a LoadTracker, with an index on their end times for the load ↔ request join.

`LoadTracker.attribute` matches every finished inference request against the loads that ended inside its
lifetime (± the tolerance). Testing every recent load (up to MAX_RECENT = 256) for every request is quadratic
on logs that load often; here each engine's loads are also kept sorted by end time, so a request finds its
candidates by two bisections and visits only those. While there are only a few loads, it gets them all: cheaper.

What keeps the index right:
- a load's `engine` and `t_end` are set before it is appended (`LoadTracker._close`, and the MLX tracker
  before `record`) and never change afterwards, so each entry's key is read once, at `append`;
- entries leave only from the left (`popleft`, the oldest first), so within one end time the entries are
  in arrival order and the one leaving is the first of its end time;
- a rename (`learn_alias`) changes `model`, which is no part of the key;
- the same load appended twice is two entries, as in the deque, and a request meets it twice, as before.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Collection, Iterator

from ietop.model.records import Load

SCAN_MAX = 8
"""Up to this many recent loads, testing each one costs less than the bisections (most logs keep a handful)."""


class _EngineIndex:
    """One engine's indexed loads, sorted by (end, arrival): parallel lists, for bisect without key objects."""

    __slots__ = ("ends", "ends_tol", "loads", "seqs")

    def __init__(self) -> None:
        self.ends: list[float] = []
        self.ends_tol: list[float] = []
        """end + tol, computed as the join's condition computes it (float addition rounds, so
        `t_start <= end + tol` is not quite `end >= t_start - tol`); it is monotone in `end`, hence sorted."""
        self.seqs: list[int] = []
        """Arrival numbers: the order the deque (and so the old scan) visits the loads in."""
        self.loads: list[Load] = []


class RecentLoads:
    """A deque of finished loads in arrival order, plus a per-engine index on `t_end` (see the module doc)."""

    def __init__(self, tol: float) -> None:
        self._tol = tol
        """The join's tolerance (loads.TOL_S): added to ends here exactly as the join's condition adds it."""
        self._loads: deque[Load] = deque()
        self._keys: deque[tuple[int, str, float] | None] = deque()
        """Per deque entry: (arrival number, engine, end) as indexed, or None when it has no usable end."""
        self._next_seq = 0
        self._by_engine: dict[str, _EngineIndex] = {}

    # -- the deque's face: what LoadTracker does with its recent loads ---------------------------------
    def __len__(self) -> int:
        return len(self._loads)

    def __bool__(self) -> bool:
        return bool(self._loads)

    def __iter__(self) -> Iterator[Load]:
        return iter(self._loads)

    def __reversed__(self) -> Iterator[Load]:
        return reversed(self._loads)

    def __getitem__(self, i: int) -> Load:
        return self._loads[i]

    def append(self, load: Load) -> None:
        seq = self._next_seq
        self._next_seq += 1
        self._loads.append(load)
        end = load.t_end
        # No end, or NaN (which no comparison admits, and which would break the sort): never a candidate.
        if end is None or end != end:
            self._keys.append(None)
            return
        self._keys.append((seq, load.engine, end))
        idx = self._by_engine.get(load.engine)
        if idx is None:
            idx = self._by_engine[load.engine] = _EngineIndex()
        # After the equal ends: their arrival numbers are all smaller, so ties stay in arrival order.
        i = bisect_right(idx.ends, end)
        idx.ends.insert(i, end)
        idx.ends_tol.insert(i, end + self._tol)
        idx.seqs.insert(i, seq)
        idx.loads.insert(i, load)

    def popleft(self) -> Load:
        load = self._loads.popleft()
        key = self._keys.popleft()
        if key is not None:
            seq, engine, end = key
            idx = self._by_engine[engine]
            # The oldest entry of all is the oldest of its end time: the first of the run of equal ends.
            i = bisect_left(idx.ends, end)
            assert idx.seqs[i] == seq, "load index out of step with the deque"
            del idx.ends[i], idx.ends_tol[i], idx.seqs[i], idx.loads[i]
        return load

    # -- the join's question -------------------------------------------------------------------------
    def ending_within(self, engine: str, t_start: float, t_end: float) -> Collection[Load]:
        """The loads of `engine` whose end satisfies `t_start <= end + tol and t_end + tol >= end`, in arrival
        order (the order the join updates triggers and waiters in), or a superset in that order: the caller tests
        the condition on each. Few loads: all of them. Else exact for finite request times (with a NaN one,
        bisect would admit everything, which the caller's test then rejects)."""
        if len(self._loads) <= SCAN_MAX:
            return self._loads
        idx = self._by_engine.get(engine)
        if idx is None:
            return []
        lo = bisect_left(idx.ends_tol, t_start)  # first with end + tol >= t_start
        hi = bisect_right(idx.ends, t_end + self._tol)  # first with end > t_end + tol
        if hi - lo <= 1:
            return idx.loads[lo:hi]
        seqs, loads = idx.seqs, idx.loads
        return [loads[i] for i in sorted(range(lo, hi), key=seqs.__getitem__)]
