"""mlx_lm.server requests, rebuilt from a log that has no request id (reference/mlx-formats.md §4).

One request is: (DEBUG) its body at arrival → (a silent model switch) → admission (`Prompt Cache:`) →
its access line (written at admission, not at the end) → `Prompt processing progress: p/N` → (DEBUG)
one line per generated token → (DEBUG, non-stream) `Outgoing Response` with the usage block.

Admissions are matched to access lines first in, first out; progress lines are matched by their
denominator N (the uncached prompt size), which is all that separates concurrent requests; token lines
and usage blocks are attributed only when exactly one request can own them. Where two requests could own
a fact it is left unknown rather than guessed. One model is resident per process: a body naming another
model than the resident one is an unload plus a load, whose cost is the arrival→admission gap.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from ietop.model.loads import LoadTracker
from ietop.model.records import Load, Ref, Request
from parsers import events as ev

DEFAULT_MODEL = "default"
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
MIN_LOAD_S = 0.02
"""Loading even a 1 MB model takes longer: a "switch" admitted faster was the resident model under
another name (mlx_lm ≥ 0.27 does not reload `--model`'s path named explicitly)."""


@dataclass(slots=True)
class _Arrival:
    t: float
    ts: datetime | None
    ref: Ref
    model: str
    stream: bool | None
    load: Load | None = None
    max_tokens: int | None = None


@dataclass(slots=True)
class _Episode:
    """One admitted generation, and the access-line record it feeds."""

    admitted_t: float
    arrival: _Arrival | None
    request: Request | None = None
    total: int | None = None
    last_p: int = -1
    prefill_done_t: float | None = None
    first_token_t: float | None = None
    last_token_t: float | None = None
    tokens: int = 0
    tokens_ambiguous: bool = False
    usage: ev.Usage | None = None
    end_t: float | None = None
    last_t: float = 0.0
    done: bool = False
    facts: dict[str, object] = field(default_factory=dict)


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
        self._arrivals: deque[_Arrival] = deque()
        self._episodes: list[_Episode] = []
        self._unbound_episodes: deque[_Episode] = deque()
        self._unbound_access: deque[Request] = deque()
        self._order: deque[tuple[Request, _Episode | None]] = deque()
        self._stray_tokens = False
        self._last_rss: int | None = None

    # -- events --------------------------------------------------------------------------------
    def body(self, t: float, event: ev.RequestBody, ref: Ref) -> None:
        self.debug = True
        self._close_idle_streams(t)
        arrival = _Arrival(t, event.ts, ref, event.model or DEFAULT_MODEL, event.stream, max_tokens=event.max_tokens)
        pending_model = self._arrivals[-1].model if self._arrivals else self.resident
        if arrival.model != pending_model:
            load = Load(event.ts, t, "mlx", ref, model=arrival.model, runner="mlx_lm.server")
            load.t_start = t
            arrival.load = load
        self._arrivals.append(arrival)

    def admission(self, t: float, event: ev.Admission, ref: Ref) -> None:
        arrival = self._arrivals.popleft() if self._arrivals else None
        episode = _Episode(t, arrival, last_t=t)
        if arrival is not None and arrival.load is not None:
            self._switch(arrival, t, ref)
        self._episodes.append(episode)
        if self._unbound_access:
            self._bind(self._unbound_access.popleft(), episode)
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
                    failed.load.t_end = req.t_end
                    self.loads.record(failed.load)
            self._order.append((req, None))
        elif self._unbound_episodes:
            episode = self._unbound_episodes.popleft()
            self._bind(req, episode)
        else:
            self._unbound_access.append(req)
            self._order.append((req, None))
        self._drain()

    def progress(self, t: float, event: ev.PrefillProgress) -> None:
        total = event.total
        if total is None:
            return
        open_eps = [e for e in self._episodes if e.prefill_done_t is None and not e.done]
        matches = [e for e in open_eps if e.total == total and e.last_p <= event.n_tokens]
        unset = [e for e in open_eps if e.total is None]
        if len(matches) == 1 and not (unset and matches[0].last_p == event.n_tokens):
            episode = matches[0]
        elif not matches and unset:
            episode = unset[0]
        else:
            # Two requests with the same uncached size: both prefill N tokens, but whose line this is
            # cannot be told. N itself is still certain for each of them.
            self.unattributed_progress += 1
            if event.n_tokens == total:
                for e in matches:
                    e.facts["prefill_tokens"] = total
            return
        episode.total = total
        episode.last_p = event.n_tokens
        episode.last_t = t
        episode.facts["prefill_tokens"] = total
        if event.n_tokens >= total:
            episode.prefill_done_t = t
            if not self.debug:
                self._finish(episode, None)

    def token(self, t: float) -> None:
        self.debug = True
        generating = [e for e in self._episodes if e.prefill_done_t is not None and not e.done]
        if not generating:
            # A stream we closed at a new arrival is still producing: tokens cannot be told apart
            # until the log goes quiet again.
            self._stray_tokens = True
        if self._stray_tokens:
            for e in generating:
                e.tokens_ambiguous = True
        if len(generating) != 1:
            self.unattributed_tokens += 1
            for e in generating:
                e.tokens_ambiguous = True
                e.last_t = t
            return
        e = generating[0]
        e.tokens += 1
        e.first_token_t = e.first_token_t if e.first_token_t is not None else t
        e.last_token_t = t
        e.last_t = t

    def usage(self, t: float, event: ev.Usage) -> None:
        self.debug = True
        candidates = [e for e in self._episodes if not e.done and e.prefill_done_t is not None]
        if len(candidates) > 1 and event.prompt_tokens is not None:
            uncached = event.prompt_tokens - (event.cached_tokens or 0)
            candidates = [e for e in candidates if e.total == uncached]
        if len(candidates) == 1:
            candidates[0].usage = event
            self._finish(candidates[0], t)

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

    def engine_dead(self, t: float) -> None:
        self.state = "dead"
        for e in list(self._episodes):
            self._finish(e, None)

    def advance(self, t: float) -> None:
        for e in list(self._episodes):
            if t - e.last_t > IDLE_FINALIZE_S:
                self._finish(e, None)
            elif self._full(e) and e.last_token_t is not None and t - e.last_token_t > FULL_QUIET_S:
                # All the tokens it asked for are out: it ended then (the log says nothing more of a stream;
                # without this it waited for the next request, or a minute).
                self._finish(e, e.last_token_t)

    @staticmethod
    def _full(e: _Episode) -> bool:
        """It produced the max_tokens its body asked for, counted unambiguously, and its access line (a
        stream's comes first) is bound to it."""
        limit = e.arrival.max_tokens if e.arrival is not None else None
        if not limit or e.request is None or e.tokens_ambiguous or e.usage is not None:
            return False
        return e.tokens >= limit

    def flush(self) -> None:
        for e in list(self._episodes):
            self._finish(e, None)
        for episode in list(self._unbound_episodes):
            self._unbound_episodes.remove(episode)
        self._unbound_access.clear()
        self._drain(force=True)

    # -- internals -----------------------------------------------------------------------------
    def _switch(self, arrival: _Arrival, t: float, ref: Ref) -> None:
        load = arrival.load
        assert load is not None
        if t - arrival.t < MIN_LOAD_S:
            arrival.load = None
            return
        self.loads.unload(self.src, t, arrival.ts, arrival.ref, "mlx", "switched", self.resident, fold=False)
        self.loads.set_for_model(self.src, arrival.model)
        load.status = "ok"
        load.t_end = t
        load.duration_s = round(t - arrival.t, 3)
        load.done_ref = ref
        self.resident = arrival.model
        self.loads.record(load)

    def _bind(self, req: Request, episode: _Episode) -> None:
        episode.request = req
        arrival = episode.arrival
        if arrival is not None:
            req.model = arrival.model
            if arrival.load is not None and arrival.load.status == "ok":
                req.cold_load = True
                req.load_s = arrival.load.duration_s
                arrival.load.trigger = req
        elif not self.debug:
            req.model = None
        if not any(r is req for r, _ in self._order):
            self._order.append((req, episode))
        else:
            self._order = deque((r, episode if r is req else e) for r, e in self._order)

    def _close_idle_streams(self, t: float) -> None:
        """A new arrival ends the streams that were generating before it (a stream has no end line).
        If one was in fact still running, its next tokens arrive with no generating request, which
        marks the following requests' token facts as ambiguous (see `token`)."""
        self._stray_tokens = False
        for e in [e for e in self._episodes if e.prefill_done_t is not None and not e.done]:
            self._finish(e, e.last_token_t if not e.tokens_ambiguous else None)

    def _finish(self, e: _Episode, end_t: float | None) -> None:
        if e.done:
            return
        e.done = True
        e.end_t = end_t if end_t is not None else e.last_token_t
        self._episodes.remove(e)
        if e in self._unbound_episodes:
            self._unbound_episodes.remove(e)
        req = e.request
        if req is not None:
            self._apply(req, e)
        self._drain()

    def _apply(self, req: Request, e: _Episode) -> None:
        n = e.facts.get("prefill_tokens")
        req.prefill_tokens = n if isinstance(n, int) else None
        arrival_t = e.arrival.t if e.arrival is not None else None
        if e.usage is not None:
            req.prompt_tokens = e.usage.prompt_tokens
            req.prompt_tokens_source = "log"
            req.cached_tokens = e.usage.cached_tokens
            req.output_tokens = e.usage.completion_tokens
        elif not e.tokens_ambiguous and e.tokens and e.end_t is not None:
            req.output_tokens = e.tokens
        if req.prompt_tokens is not None and req.prefill_tokens is not None and req.cached_tokens is None:
            req.cached_tokens = max(0, req.prompt_tokens - req.prefill_tokens)
        if not e.tokens_ambiguous and e.first_token_t is not None and arrival_t is not None:
            req.ttft_s = round(e.first_token_t - arrival_t, 6)
            if e.tokens >= 2 and e.last_token_t is not None:
                req.itl_s = round((e.last_token_t - e.first_token_t) / (e.tokens - 1), 6)
        if e.end_t is not None and arrival_t is not None and not e.tokens_ambiguous:
            req.latency_s = round(e.end_t - arrival_t, 6)

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
