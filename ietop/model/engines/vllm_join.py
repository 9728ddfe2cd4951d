"""Which vLLM request an access line answers, where the log proves it (issue 19: truth when requests overlap).

uvicorn's access line has no request id and no time; vLLM's request logging has ids but no status. The real
prompt size (`prompt_token_ids`, DEBUG since 0.11.2) is stated on an access row only when exactly one logged
request can own that line; otherwise the row says why it is null. Never by order alone.

What the log proves, read from vLLM 0.32's own source (entrypoints/openai/*/serving.py, v1/engine/async_llm.py)
and starlette/uvicorn, and seen in the real runs of fixtures/vllm/:

* The API server logs `Received request <id>` (and DEBUG `Request <id> details`) while handling the request,
  before any response exists: an access line's owner was received before it. (vLLM before ~0.5 logged the
  engine's own `Received request … sampling_params:` when generation began, after a stream's access line: such
  a log is not joined.)
* A stream's access line is written when its headers go out, before the stream's generator runs, and the
  generator's first step is `add_request` (`Added request <id>-<8 hex>`): received < access < added.
* A non-stream answers after its whole generation: added < access.
* So a stream (DEBUG `JSON body` with `"stream":true`, or `Generated response … (streaming …)`) can own a line
  only between its received and added lines, a non-stream only after its added line; a request of unknown kind
  either. A request added with no line of its path in between was no stream; a stream past its added line has
  had its line.
* The id names the endpoint: `chatcmpl-…` a chat completion, `cmpl-…-<n>` a completion (older chat ids were
  `cmpl-` without the index: unknown). Other inference paths may use either: they exclude no one.

The owner is therefore always among a line's candidates. When several remain, the line joins a group: its lines,
their candidates, and the rule that each line has one owner and each request at most one line. What all the
group's possible assignments agree on is solved for (bipartite matching, vllm_groups) whenever the log says
more (a stream reaches its added line, a request fails): a line whose owner is the same in all of them gets
its facts, a request matched in all of them is answered, one matched in none is free again. A row waits (in
order) while a stream it could be is still before its added line, at most HOLD_S of log time; then it is
written with the reason its prompt size is null.
Until the log shows its server start (or an engine idle for a whole stats interval) nothing is joined: a line
may belong to a request received before the excerpt began.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable

from ietop.model.engines.vllm_groups import ADDED, RECEIVED, Assignments, Group, Line, Open, assignments, edge
from ietop.model.records import Ref, Request

HOLD_S = 3.0
"""How long (log time) a row may wait for a stream's added line that would tell whose it is."""
MAX_OPEN = 4096
"""Requests kept open per source at most (a log whose access lines are off never answers them)."""
_INDEXED = re.compile(r"cmpl-.+-\d+")
_BODY_ID = re.compile(r"(?:chatcmpl-(.+)|cmpl-(.+)-\d+)")


def id_kind(rid: str) -> str | None:
    """The endpoint a request id belongs to, where its prefix says so for certain."""
    if rid.startswith(("chatcmpl-", "chat-")):
        return "chat"
    if rid.startswith("cmpl-") and _INDEXED.fullmatch(rid) is not None:
        return "completions"
    return None


def path_kind(path: str) -> str | None:
    """The id kind an access path requires; None for a path whose ids are not known (it excludes no one)."""
    bare = path.split("?", 1)[0]
    if bare.endswith("/chat/completions"):
        return "chat"
    if bare.endswith("/completions"):
        return "completions"
    return None


class VllmJoin:
    """Per-source join of access rows to request-logging facts; rows go to `emit` in the log's order."""

    def __init__(self, emit: Callable[[Request], None]) -> None:
        self._emit = emit
        self._open: dict[str, Open] = {}
        self._streams: dict[str, bool] = {}
        """DEBUG `JSON body` stream flags by the id part the body line prints, until the request's own lines."""
        self._queue: deque[tuple[Request, Line | None]] = deque()
        self._groups: list[Group] = []
        self._complete = False
        self._added_seen = False
        self._late = False
        self._logged = False
        self._epoch = 0
        self._idle_epoch: int | None = None
        self._busy: dict[str | None, bool] = {}

    # -- the request-logging lines ---------------------------------------------------------------------
    def logged(self, t: float, rid: str, phase: str, prompt: int | None, stream: bool | None, late: bool,
               ref: Ref) -> None:
        self._tick(t)
        if phase == "body":
            if stream is not None:
                self._streams[rid] = stream
                if len(self._streams) > MAX_OPEN:
                    del self._streams[next(iter(self._streams))]
            return
        if rid.startswith("tokenize-"):
            return  # /tokenize is logged like a request but answers no inference access line
        req = self._open.get(rid)
        if phase in ("received", "details"):
            self._logged = True
            self._late = self._late or late
            if req is None:
                req = self._open[rid] = Open(rid, id_kind(rid), self._epoch, stream=self._body_stream(rid))
                if len(self._open) > MAX_OPEN:
                    self._close(next(iter(self._open.values())))
            if req.prompt is None and prompt is not None:
                req.prompt, req.ref = prompt, ref
            return
        if req is None:
            return
        if phase == "added":
            self._added_seen = True
            req.stage = ADDED
            if req.stream is None and req.lines_while_received == 0:
                req.stream = False  # a stream writes its access line before it is added
            if req.stream:
                req.answered = True
                self._close(req)  # its line is behind it
        elif phase == "output" and stream is not None and req.stream is None:
            req.stream = stream
            if stream:  # its generator ran: its headers, and its line, went out before
                req.answered = True
                if req.stage == ADDED:
                    self._close(req)
        elif phase in ("aborted", "failed"):
            # Both come from the engine client's generator: a stream's headers went out before it ran.
            req.answered = req.answered or req.stream is True
            if req.stream is False and req.group is not None:
                self._exclude(req)  # a non-stream that failed answered with an error: it owns no 200 line
            self._close(req)
        else:
            return
        if req.group is not None:
            self._infer(req.group)
        self._drain()

    def _body_stream(self, rid: str) -> bool | None:
        m = _BODY_ID.fullmatch(rid)
        if m is None:
            return None
        return self._streams.pop(m.group(1) or m.group(2), None)

    def _close(self, req: Open) -> None:
        req.closed = True
        self._open.pop(req.rid, None)

    @staticmethod
    def _exclude(req: Open) -> None:
        group = req.group
        assert group is not None
        for line in group.lines:
            line.cands = [(c, s) for c, s in line.cands if c is not req]
        group.members.remove(req)
        req.group = None

    # -- server and engine state -----------------------------------------------------------------------
    def server(self, started: bool) -> None:
        """A server start (its listen line) or stop: the requests of the one before will answer nothing more."""
        for req in list(self._open.values()):
            self._close(req)
        for group in list(self._groups):
            self._dissolve(group)
        self._busy.clear()
        self._idle_epoch = None
        self._complete = started
        self._drain()

    def stats(self, t: float, engine: str | None, running: int | None, waiting: int | None) -> None:
        """A stats line of one engine (data-parallel rank). When no engine has had a request running or waiting
        for a whole interval (this line and the one before), what was logged before that interval and is still
        unanswered never will be (its access line was lost, or was not an inference path), and the log from here
        on holds every open request (one logged before a log read from the middle had its line long ago)."""
        self._tick(t)
        if running is None and waiting is None:
            return  # V0's separate prefix-cache line: no queue in it
        self._epoch += 1
        self._busy[engine] = running != 0 or waiting != 0
        if any(self._busy.values()):
            self._idle_epoch = None
            return
        if self._idle_epoch is not None:
            for req in [r for r in self._open.values() if r.epoch < self._idle_epoch]:
                self._close(req)
            for group in list(self._groups):
                self._infer(group)
            self._complete = True
        self._idle_epoch = self._epoch
        self._drain()

    # -- access rows -----------------------------------------------------------------------------------
    def passthrough(self, req: Request) -> None:
        """A row with nothing to join: it only keeps its place."""
        self._queue.append((req, None))
        self._drain()

    def access(self, req: Request) -> None:
        """An inference access row: the facts of the one request that can own it, or, when that is not known
        yet, the row waits (in order) for the lines that may tell; else it says why its prompt size is null."""
        self._tick(req.t_end)
        if req.status != 200 or not self._logged:
            return self.passthrough(req)  # an error may come before its request is logged (404, 400)
        kind = path_kind(req.path)
        candidates = [r for r in self._open.values() if self._may_own(r, kind)]
        for r in self._open.values():
            if r.stage == RECEIVED and (kind is None or r.kind in (kind, None)):
                r.lines_while_received += 1
        if self._late or not self._complete:
            why = ("vLLM logged these requests when generation began, after a stream's access line: any of "
                   "them could be this one" if self._late else
                   "the log begins while requests were open: one logged before it began could be this one")
            self._unknown(req, candidates, why)
            return self.passthrough(req)
        if len(candidates) == 1 and candidates[0].group is None:
            self._state(req, candidates[0])
            self._close(candidates[0])
            return self.passthrough(req)
        if not candidates:
            self._unknown(req, self._open.values(), "no logged request can be this one")
            return self.passthrough(req)
        # A row waits only if it may gain a number: at INFO since 0.11.2 no request logs its prompt size.
        line = Line(req, [(r, r.stage) for r in candidates], req.t_end,
                     held=any(r.prompt is not None for r in candidates))
        group = self._merge(candidates)
        group.lines.append(line)
        self._queue.append((req, line))
        self._infer(group)
        self._drain()
        return None

    def _may_own(self, r: Open, kind: str | None) -> bool:
        if kind is not None and r.kind is not None and r.kind != kind:
            return False
        if not self._added_seen or r.stream is None:
            return True
        return r.stage == (RECEIVED if r.stream else ADDED)

    def _merge(self, candidates: list[Open]) -> Group:
        merged = Group()
        groups = {id(r.group): r.group for r in candidates if r.group is not None}
        for group in groups.values():
            merged.lines += group.lines
            merged.members += group.members
            merged.opaque = merged.opaque or group.opaque
            self._groups.remove(group)
        merged.members += [r for r in candidates if r.group is None]
        for r in merged.members:
            r.group = merged
        self._groups.append(merged)
        return merged

    # -- what a group's assignments prove --------------------------------------------------------------
    def _infer(self, group: Group) -> None:
        if not group.opaque:
            found = assignments(group, self._added_seen)
            if found is None:
                group.opaque = True  # too large to solve, or none fits what the log said: state nothing
            else:
                self._conclude(group, found)
        if not group.lines or not any(not m.closed for m in group.members):
            self._dissolve(group)  # nothing left to decide, or no member can own a later line
        elif group.opaque or not any(self._pending(m) for m in group.members):
            self._release(group)  # no added line to wait for: what is undecided stays so

    def _conclude(self, group: Group, found: Assignments) -> None:
        # In one pass over the group's candidates (a busy log's group has thousands: per member or per decided
        # line a pass of its own made this quadratic).
        decided: set[int] = set()
        gone: set[int] = set()  # ids of requests no undecided line can be: owners of decided lines, unused ones
        for i, line in enumerate(group.lines):
            j = found.owner(i)
            if j is not None:
                owner = group.members[j]
                if line.held:
                    self._state(line.req, owner)
                    line.held = False
                decided.add(i)
                self._close(owner)
                gone.add(id(owner))
        if decided:
            group.lines = [line for i, line in enumerate(group.lines) if i not in decided]
        for j, member in enumerate(group.members):
            if found.always_used(j):
                self._close(member)  # answered by one of the group's lines, which one unknown
            if found.never_used(j):
                gone.add(id(member))  # it owns none of them: free again
        if not decided and not gone:
            return  # every member is still some line's candidate (it joined the group as one)
        for line in group.lines:
            if any(id(c) in gone for c, _ in line.cands):
                line.cands = [(c, s) for c, s in line.cands if id(c) not in gone]
        present = {id(c) for line in group.lines for c, _ in line.cands}
        for member in group.members:
            if id(member) not in present:
                member.group = None  # free again, or accounted for by a decided line
        group.members = [m for m in group.members if id(m) in present]

    @staticmethod
    def _pending(m: Open) -> bool:
        """Its added line (or failure) is still to come and would tell whether it owned a line before it."""
        return not m.closed and m.stage == RECEIVED and m.stream is not False

    def _release(self, group: Group) -> None:
        for line in group.lines:
            if line.held:
                line.held = False
                n = len({id(c) for c, s in line.cands if not self._added_seen or edge(c, s)}) or len(line.cands)
                self._unknown(line.req, (c for c, _ in line.cands), f"ambiguous: {n} requests could be this one")

    def _dissolve(self, group: Group) -> None:
        self._release(group)
        for m in group.members:
            m.group = None
        if group in self._groups:
            self._groups.remove(group)

    def _tick(self, t: float) -> None:
        """Rows that waited HOLD_S of log time are written with what is known."""
        for group in self._groups:
            if any(line.held and t - line.t > HOLD_S for line in group.lines):
                self._release(group)
        self._drain()

    def _drain(self) -> None:
        queue = self._queue
        while queue and (queue[0][1] is None or not queue[0][1].held):
            self._emit(queue.popleft()[0])

    def flush(self) -> None:
        for group in list(self._groups):
            self._dissolve(group)
        self._drain()

    @staticmethod
    def _state(req: Request, owner: Open) -> None:
        if owner.prompt is not None and owner.ref is not None:
            req.prompt_tokens, req.prompt_tokens_source = owner.prompt, "log"
            req.cite("prompt_tokens", owner.ref)

    @staticmethod
    def _unknown(req: Request, candidates: Iterable[Open], why: str) -> None:
        """Null, with the reason, where some candidate's log did state a prompt size (at INFO since 0.11.2 none
        does: the log then does not speak of the prompt size at all)."""
        if any(r.prompt is not None for r in candidates):
            req.unknown_because("prompt_tokens", why)
