"""mlx_lm.server requests, rebuilt from a log that has no request id (reference/mlx-formats.md §4).

One request is: (DEBUG) its body at arrival → (a silent model switch) → admission (`Prompt Cache:`) →
its access line (written at admission, not at the end) → `Prompt processing progress: p/N` → (DEBUG)
one line per generated token → (DEBUG, non-stream) `Outgoing Response` with the usage block.

Bodies are matched to admissions in arrival order (the generation thread takes requests from a queue); an
access line goes to the earliest admitted request of its endpoint (handlers admitted together write theirs
in any order); progress lines are matched by their denominator N (the uncached prompt size), and requests
admitted together whose lines cannot be told apart form a group; token lines and usage blocks are attributed
only when exactly one request can own them. Where two requests could own a fact it is left unknown, with the
reason, rather than guessed (mlx_episode.py). One model is resident per process: a body naming another model
than the resident one is an unload plus a load, whose cost is the arrival→admission gap.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from ietop.model.engines.mlx_episode import Arrival, Episode, Group, apply_facts, full, same_path, usage_fits
from ietop.model.loads import LoadTracker
from ietop.model.records import Load, Ref, Request
from parsers import events as ev

DEFAULT_MODEL = "default"
NOTHING = ""
"""No model loaded: after a switch that failed (mlx_lm had let go of the previous one)."""
SWITCH_FAILED = "switch_failed"
NOT_FOUND = "model not found"
"""The label of the model the server was started with (`--model`); the log never names it."""
IDLE_FINALIZE_S = 60.0
"""A request with no new fact for this long is finished (streams have no end marker)."""
FULL_QUIET_S = 0.5
"""A stream that produced the max_tokens its body asked for is finished once this long has passed after its
last token (a usage line, if any, is written right after it)."""
RSS_STEP_MIN = 64 << 20
RSS_STEP_FRACTION = 0.25
"""An RSS change at least this large (bytes, and fraction of the RSS) is weights coming or going."""
RSS_STEP_WINDOW_S = 10.0
SILENT_STEPS = 3.0
"""A running stream writes a token every generation step (its mean inter-token gap); silent for this many steps
before a new request was admitted, it had ended."""
MIN_LOAD_S = 0.02
"""Loading even a 1 MB model takes longer: a "switch" admitted faster was the resident model under
another name (mlx_lm ≥ 0.27 does not reload `--model`'s path named explicitly)."""


class MlxTracker:
    """Per-source state for one mlx_lm.server log."""

    def __init__(self, src: int, loads: LoadTracker, emit: Callable[[Request], None]) -> None:
        self.src = src
        self.loads = loads
        self._emit_request = emit
        self.resident = DEFAULT_MODEL
        self.debug = False
        self.unattributed_progress = 0
        self.unattributed_tokens = 0
        self.state: str | None = None
        self.cache_peak: tuple[float, Ref, str] | None = None
        """The largest prompt-cache size a stats line gave (GB, the line, the model then): its KV in memory."""
        self._arrivals: deque[Arrival] = deque()
        self._episodes: list[Episode] = []
        self._unbound_episodes: deque[Episode] = deque()
        self._unbound_access: deque[Request] = deque()
        self._order: deque[tuple[Request, Episode | None]] = deque()
        self._last_rss: int | None = None
        self._group = Group()
        self._last_token_t: float | None = None
        self._step_s: float | None = None
        self._last_prefill_t = float("-inf")
        """When the last prefill before now ended: the generation thread may give no tokens while prefilling."""

    # -- events --------------------------------------------------------------------------------
    def body(self, t: float, event: ev.RequestBody, ref: Ref) -> None:
        self.debug = True
        arrival = Arrival(t, event.ts, ref, event.model or DEFAULT_MODEL, event.stream, max_tokens=event.max_tokens,
                           path=event.path)
        pending_model = self._arrivals[-1].model if self._arrivals else self.resident
        if arrival.model != pending_model:
            load = Load(event.ts, t, "mlx", ref, model=arrival.model, runner="mlx_lm.server")
            load.t_start = t
            arrival.load = load
        self._arrivals.append(arrival)

    def admission(self, t: float, event: ev.Admission, ref: Ref) -> None:
        arrival = self._arrivals.popleft() if self._arrivals else None
        if event.cache_gb is not None and (self.cache_peak is None or event.cache_gb > self.cache_peak[0]):
            self.cache_peak = (event.cache_gb, ref, arrival.model if arrival is not None else self.resident)
        episode = Episode(t, arrival, last_t=t)
        if arrival is not None and arrival.load is not None:
            self._switch(arrival, t, ref)
        self._episodes.append(episode)
        waiting = next((r for r in self._unbound_access if same_path(r.path, arrival)), None)
        if waiting is not None:
            self._unbound_access.remove(waiting)
            self._bind(waiting, episode)
        else:
            self._unbound_episodes.append(episode)

    def access(self, req: Request) -> None:
        """An access line. Non-inference and failed inference requests are final at once."""
        if not req.inference:
            self._order.append((req, None))
        elif req.status != 200:
            # Failed before admission (bad body, unknown model → 404): its arrival will never be admitted.
            if self._arrivals and self._arrivals[0].t <= req.t_end + 1.0:
                failed = self._arrivals.popleft()
                req.model = failed.model
                # mlx_lm answers a model that cannot be loaded with 404; a 400 is a bad request.
                if failed.load is not None and req.status == 404:
                    failed.load.status = "failed"
                    # mlx_lm answers 404 when the name resolves to no model (no such path, repo or cache).
                    failed.load.failure = NOT_FOUND
                    failed.load.done_ref = req.ref
                    failed.load.t_end = req.t_end
                    self.loads.record(failed.load)
                    self._dropped_by(failed)
            self._order.append((req, None))
        elif (episode := next((e for e in self._unbound_episodes if same_path(req.path, e.arrival)), None)):
            # Handlers admitted in the same millisecond write their access lines in either order: an access line
            # goes to the earliest admitted request whose body was for its endpoint, not simply to the earliest.
            self._unbound_episodes.remove(episode)
            self._bind(req, episode)
        else:
            self._unbound_access.append(req)
            self._order.append((req, None))
        self._drain()

    def progress(self, t: float, event: ev.PrefillProgress, ref: Ref) -> None:
        total, n = event.total, event.n_tokens
        if total is None:
            return
        group = self._group
        if group.members and total in group.totals:
            self._group_line(t, total, n, ref)
            return
        open_eps = [e for e in self._episodes if e.prefill_done_t is None and not e.done and e not in group.members]
        matches = [e for e in open_eps if e.total == total and e.last_p <= n]
        unset = [e for e in open_eps if e.total is None]
        undeclared = len(group.members) > len(group.totals)
        """A member of the group has not shown its denominator yet: this line may be its first."""
        if len(matches) == 1 and not (unset and matches[0].last_p == n) and not undeclared:
            episode = matches[0]
        elif not matches and len(unset) == 1 and not undeclared:
            episode = unset[0]
        else:
            # Which of several admitted requests this line belongs to cannot be told from the log (no id;
            # admission order is not evidence of it): they become one group whose lines are counted together.
            self.unattributed_progress += 1
            for e in matches + unset:
                if e not in group.members:
                    group.members.append(e)
            self._group_line(t, total, n, ref)
            return
        episode.total = total
        episode.last_p = n
        episode.last_t = t
        episode.facts["prefill_tokens"] = total
        if n >= total:
            episode.refs["prefill"] = ref
            self._prefill_done(episode, t)

    def _group_line(self, t: float, total: int, n: int, ref: Ref) -> None:
        """A progress line of the group: once every member has written its last (`N/N`), all have prefilled;
        each one's size is known only if they all had the same."""
        group = self._group
        group.totals.setdefault(total, 0)
        for e in group.members:
            e.last_t = t
        if n < total:
            return
        group.totals[total] += 1
        group.finished += 1
        if group.finished < len(group.members):
            return
        sizes = set(group.totals)
        members, self._group = group.members, Group()
        for e in members:
            if len(sizes) == 1:
                e.facts["prefill_tokens"] = total
                e.refs["prefill"] = ref
            else:
                e.why["prefill_tokens"] = (f"ambiguous: admitted with {len(members) - 1} other request(s) whose "
                                           "progress lines carry no id")
            e.tokens_ambiguous = True  # their first tokens follow prefills that cannot be told apart
            self._prefill_done(e, t)

    def _prefill_done(self, e: Episode, t: float) -> None:
        e.prefill_done_t = t
        if not self.debug:
            self._finish(e, None)
        else:
            self._end_silent_streams(e)
        self._last_prefill_t = max(self._last_prefill_t, t)

    def token(self, t: float, ref: Ref) -> None:
        self.debug = True
        last = self._last_token_t
        if last is not None and 0 < t - last < 1.0:
            # The engine's step, from consecutive token lines: what a silence is measured in when a request's
            # own token lines cannot be told apart (a mean over recent gaps; a pause between requests is excluded).
            self._step_s = t - last if self._step_s is None else 0.8 * self._step_s + 0.2 * (t - last)
        self._last_token_t = t
        generating = [e for e in self._episodes if e.prefill_done_t is not None and not e.done]
        if self._group.finished:
            # A member of a group has prefilled, but which one is unknown: it may be generating already.
            generating += self._group.members
        if len(generating) != 1:
            self.unattributed_tokens += 1
            for e in generating:
                e.tokens_ambiguous = True
                e.last_t = t
            return
        e = generating[0]
        e.tokens += 1
        if e.first_token_t is None:
            e.first_token_t = t
            e.refs["first"] = ref
        e.last_token_t = t
        e.refs["last"] = ref
        e.last_t = t
        if e.arrival is not None and e.arrival.stream and full(e):
            # All the tokens it asked for: a stream can write no more (no usage line follows a stream's).
            self._finish(e, t)

    def usage(self, t: float, event: ev.Usage, ref: Ref) -> None:
        self.debug = True
        candidates = [e for e in self._episodes if not e.done and e.prefill_done_t is not None
                      and usage_fits(e, event)]
        if len(candidates) == 1:
            candidates[0].usage = event
            candidates[0].refs["usage"] = ref
            self._finish(candidates[0], t)
        else:
            for e in candidates:
                e.why["prompt_tokens"] = (f"ambiguous: a usage block (line {ref.line}) fits {len(candidates)} "
                                          "open requests")

    def rss(self, t: float, rss_bytes: int) -> None:
        """A sample of the server process RSS. A step is a load or an unload of weights: confirm a
        pending switch with it, or, at INFO (no bodies to say which model), record a switch to an
        unnamed model with the cost unknown."""
        last = self._last_rss
        self._last_rss = rss_bytes
        if last is None:
            return
        step = rss_bytes - last
        if abs(step) < max(RSS_STEP_MIN, RSS_STEP_FRACTION * last):
            return
        recent = self.loads.last_load_of(self.src)
        if recent is not None and recent.t_end is not None and abs(t - recent.t_end) <= RSS_STEP_WINDOW_S:
            recent.rss_step = step
            return
        if not self.debug and step > 0:
            load = Load(None, t, "mlx", Ref(self.src, 0), model=None, runner="mlx_lm.server")
            load.status, load.t_end, load.rss_step = "ok", t, step
            self.loads.unload(self.src, t, None, Ref(self.src, 0), "mlx", "switched", self.resident, fold=False)
            self.loads.set_for_model(self.src, None)
            self.resident = "unknown"
            self.loads.record(load)

    def server_down(self, t: float) -> None:
        """Its server stopped answering (connection refused): no model is loaded in a process that is gone."""
        self.state = "down"
        for e in list(self._episodes):
            self._finish(e, None)

    def server_up(self) -> None:
        """It answers again: a new process, started with its `--model` (the log's next lines say more)."""
        self.state = None
        self.resident = DEFAULT_MODEL

    def engine_dead(self, t: float) -> None:
        self.state = "dead"
        for e in list(self._episodes):
            self._finish(e, None)

    def advance(self, t: float) -> None:
        for e in list(self._episodes):
            if t - e.last_t > IDLE_FINALIZE_S:
                self._finish(e, None)
            elif full(e) and e.last_token_t is not None and t - e.last_token_t > FULL_QUIET_S:
                # All the tokens it asked for are out: it ended then (the log says nothing more of a stream;
                # without this it waited for the next request, or a minute).
                self._finish(e, e.last_token_t)

    def flush(self) -> None:
        for e in list(self._episodes):
            self._finish(e, None)
        for episode in list(self._unbound_episodes):
            self._unbound_episodes.remove(episode)
        self._unbound_access.clear()
        self._drain(force=True)

    # -- internals -----------------------------------------------------------------------------
    def _dropped_by(self, failed: Arrival) -> None:
        """mlx_lm lets go of its model before it loads another (ModelProvider.load), so a switch that failed
        left nothing loaded: the model went when the failed load began, and the next request loads afresh."""
        if self.resident:
            u = self.loads.unload(self.src, failed.t, failed.ts, failed.ref, "mlx", SWITCH_FAILED, self.resident,
                                  fold=False)
            if u is not None:
                u.for_model = failed.model
        self.resident = NOTHING

    def _switch(self, arrival: Arrival, t: float, ref: Ref) -> None:
        load = arrival.load
        assert load is not None
        if t - arrival.t < MIN_LOAD_S:
            arrival.load = None
            return
        if self.resident:
            self.loads.unload(self.src, t, arrival.ts, arrival.ref, "mlx", "switched", self.resident, fold=False)
            self.loads.set_for_model(self.src, arrival.model)
        load.status = "ok"
        load.t_end = t
        load.duration_s = round(t - arrival.t, 3)
        load.done_ref = ref
        self.resident = arrival.model
        self.loads.record(load)

    def _bind(self, req: Request, episode: Episode) -> None:
        episode.request = req
        arrival = episode.arrival
        if arrival is not None:
            req.model = arrival.model
            if arrival.load is not None and arrival.load.status == "ok":
                req.cold_load = True
                req.load_s = arrival.load.duration_s
                req.cite("load_s", arrival.load.done_ref or arrival.load.ref)
                req.waited_for = arrival.load
                arrival.load.trigger = req
        elif not self.debug:
            req.model = None
        if not any(r is req for r, _ in self._order):
            self._order.append((req, episode))
        else:
            self._order = deque((r, episode if r is req else e) for r, e in self._order)

    def _end_silent_streams(self, started: Episode) -> None:
        """`started` begins generating: from now on a token line could be its or another open request's. A running
        sequence gets one token per generation step until a new request is admitted, so one that wrote no token
        from before `started` arrived until it was admitted, for several steps, had already ended. A request whose
        own tokens are known ends at its last one; one whose token lines were shared (ambiguous) is judged by the
        last token line of all, and ends with its end unknown. The others stay open, and the token lines they
        could own count for none of them."""
        arrival = started.arrival
        if arrival is None:
            return
        # Only requests that were generating before it arrived: one that began with it has written nothing yet.
        for e in [e for e in self._episodes if e is not started and e.prefill_done_t is not None
                  and e.prefill_done_t < arrival.t and not e.done]:
            own = not e.tokens_ambiguous and e.tokens >= 2 and e.first_token_t is not None
            last = e.last_token_t if not e.tokens_ambiguous else self._last_token_t
            if last is None or last >= arrival.t:
                continue
            step = (last - e.first_token_t) / (e.tokens - 1) if own and e.first_token_t is not None else self._step_s
            # A prefill may hold every running sequence back: silence counts only after the last one.
            quiet_since = max(last, self._last_prefill_t)
            if step is not None and started.admitted_t - quiet_since >= SILENT_STEPS * step:
                self._finish(e, last if not e.tokens_ambiguous else None)

    def _finish(self, e: Episode, end_t: float | None) -> None:
        if e.done:
            return
        e.done = True
        e.end_t = end_t if end_t is not None else e.last_token_t
        self._episodes.remove(e)
        if e in self._unbound_episodes:
            self._unbound_episodes.remove(e)
        req = e.request
        if req is not None:
            apply_facts(req, e, self.debug)
        self._drain()

    def _drain(self, force: bool = False) -> None:
        """Emit requests in access-line order as soon as the head is final."""
        while self._order:
            req, episode = self._order[0]
            if not force and episode is not None and not episode.done:
                return
            if not force and episode is None and any(r is req for r in self._unbound_access):
                return
            self._order.popleft()
            self._emit_request(req)
