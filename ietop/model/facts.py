"""Per-request facts that the log prints before the request's access line: the real prompt size
(truncation lines, DEBUG cache-slot lines, llama-server task lines), cache use and timings.

An access line is written when its request finishes, so these facts wait in a per-source FIFO and the
next access line whose lifetime [end − latency, end] contains a fact takes it (reference/ollama-summary.md
"Real prompt size"). Facts older than any request that could own them are dropped: they belonged to a
request whose access line is not in the log.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ietop.model.config import Settings
from ietop.model.loads import TOL_S
from ietop.model.records import Ref, Request, Simple
from parsers import events as ev

MAX_PENDING_FACTS = 4096


CITED = frozenset({"prompt_tokens", "cached_tokens", "prefill_tokens", "output_tokens", "ttft_s", "itl_s"})
"""The facts a request cites a line for (the others here are flags and labels)."""


@dataclass(slots=True)
class _Fact:
    t: float
    data: dict[str, Any] = field(default_factory=dict)
    refs: dict[str, Ref] = field(default_factory=dict)
    task: bool = False
    """From a runner task (llama-server, llama.cpp timings): every request those runners serve logs one, pushed
    when the task ends (just before its access line)."""
    start: bool = False
    """Logged when its request's slot starts (DEBUG `loading cache slot`): every served request logs one."""
    new: int | None = None
    """A truncation's size after cutting: the task that runs the cut prompt logs it as its n_tokens."""
    why: dict[str, str] = field(default_factory=dict)
    """Facts this one cannot state for its request, and why."""


@dataclass(slots=True)
class _Task:
    ref: Ref
    t: float
    data: dict[str, Any] = field(default_factory=dict)
    refs: dict[str, Ref] = field(default_factory=dict)
    """Timing kind (`prompt`, `eval`) → its line."""


def _iso(ts: datetime | None) -> str | None:
    return ts.isoformat() if ts is not None else None


class RequestFacts:
    """The FIFO of per-request facts and the runner-slot tasks they are assembled from."""

    def __init__(self, sink: Callable[[str, Any], None], settings: Settings) -> None:
        self.sink = sink
        self.settings = settings
        self._facts: dict[int, deque[_Fact]] = {}
        self._tasks: dict[int, dict[int | None, _Task]] = {}
        self._arrivals: dict[int, deque[tuple[float, str]]] = {}
        """DEBUG `evaluating already loaded model=…` lines: which model each request went to, in order."""
        self._done: dict[int, dict[int | None, dict[str, Any]]] = {}
        """Facts of tasks already finished by their `total` line, for the `release` line that follows."""

    def _parallel(self) -> bool:
        slots = self.slots()
        return slots is not None and slots > 1

    def slots(self) -> int | None:
        """How many requests a runner serves at once: the effective parallel of the last load, else the
        configured OLLAMA_NUM_PARALLEL; None when the log says neither."""
        value = self.settings.effective.get("parallel")
        if value is None:
            value = self.settings.configured.get("num_parallel")
        return value if isinstance(value, int) else None

    def enrich(self, src: int, req: Request, bounded: bool = True) -> None:
        """Give a finished request the per-request facts logged inside its lifetime. `bounded=False` when the
        access line gives no latency to bound the lifetime with.

        One slot serves one request at a time, so facts and access lines keep one order: the oldest fact in
        its lifetime is the request's (FIFO). With parallel slots, access lines come in completion order and
        a line names no request: a fact is the request's only when it is a runner task's (each request has
        exactly one, pushed when the task ends, just before its access line) and the only fact in the
        request's lifetime, or a cache-slot line (logged as each request's slot starts) and the only one left
        there. Anything else is ambiguous, and stays null with the reason."""
        facts = self._facts.get(src)
        slots = self.slots()
        if slots is not None and slots > 1 and bounded:
            self._enrich_parallel(facts, req, slots)
            return
        while facts:
            fact = facts[0]
            if bounded and fact.t < req.t_start - TOL_S:
                facts.popleft()  # belonged to a request whose access line we never saw
                continue
            if fact.t > req.t_end + TOL_S:
                return
            facts.popleft()
            self._give(fact, req)
            return

    @staticmethod
    def _give(fact: _Fact, req: Request) -> None:
        for key, value in fact.data.items():
            setattr(req, key, value)
            if key in fact.refs:
                req.cite(key, fact.refs[key])
        for key, why in fact.why.items():
            req.unknown_because(key, why)

    def _enrich_parallel(self, facts: deque[_Fact] | None, req: Request, slots: int) -> None:
        if not facts:
            return
        inside = [f for f in facts if req.t_start - TOL_S <= f.t <= req.t_end + TOL_S]
        if not inside:
            return
        starts = [f for f in inside if f.start]
        # An ended task's fact alone in its lifetime is its own (a running request's is not pushed yet). A served
        # request's own start fact always lies in its lifetime, and start facts leave the queue only when so
        # claimed: one alone there is its own.
        owned = inside[0] if len(inside) == 1 and inside[0].task else (
            starts[0] if len(starts) == 1 and req.status < 400 else None)
        if owned is not None:
            facts.remove(owned)
            self._give(owned, req)
            return
        # A fact older than an earlier-started request's lifetime may still be that request's: kept, not
        # dropped, until the queue's bound. What lies inside this lifetime belongs to no one provably.
        why = (f"ambiguous: {slots} parallel slots and {len(inside)} request line(s) in its lifetime; "
               "no line names its request" if len(inside) > 1 else
               f"ambiguous: {slots} parallel slots; the line in its lifetime names no request")
        for fact in inside:
            for key in fact.data:
                if key in CITED and getattr(req, key) is None:
                    req.unknown_because(key, why)
            if fact.data.get("truncated") and not req.truncated:
                # A cut prompt in its lifetime that may be its own: "not truncated" would be a guess.
                req.truncated = None
                req.unknown_because("truncated", why)
            if len(inside) > 1 and fact.task:
                facts.remove(fact)  # a task fact is pushed as its task ends: no later request can prove it either

    def arrival(self, src: int, t: float, model: str) -> None:
        arrivals = self._arrivals.setdefault(src, deque())
        arrivals.append((t, model))
        if len(arrivals) > MAX_PENDING_FACTS:
            arrivals.popleft()

    def model_for(self, src: int, req: Request) -> str | None:
        """The model the oldest arrival inside the request's lifetime named (requests finish out of
        order under parallelism, so this is exact only for one request at a time per source)."""
        arrivals = self._arrivals.get(src)
        while arrivals:
            t, model = arrivals[0]
            if t < req.t_start - TOL_S:
                arrivals.popleft()  # its request's access line never came (or came unbounded)
                continue
            if t > req.t_end + TOL_S:
                return None
            arrivals.popleft()
            return model
        return None

    def push(self, src: int, t: float, data: dict[str, Any], merge_with_truncation: bool,
             refs: dict[str, Ref], *, task: bool = False, start: bool = False, new: int | None = None) -> None:
        """`refs`: the line each fact of `data` rests on. `task`: a runner task's fact; `new`: a truncation's
        size after cutting."""
        facts = self._facts.setdefault(src, deque())
        into = self._truncation_of(facts, t, data) if merge_with_truncation else None
        if into is not None:
            for key, value in data.items():
                if key not in ("prompt_tokens", "prompt_tokens_source") or "prompt_tokens" not in into.data:
                    into.data[key] = value
                    if key in refs:
                        into.refs[key] = refs[key]
            into.task = into.task or task
            into.start = into.start or start
            return
        fact = _Fact(t, data, {k: r for k, r in refs.items() if k in data}, task, start, new)
        if merge_with_truncation and self._parallel() and self._maybe_cut(facts, t, data):
            # Its n_tokens is the size after a cut, and which truncation was its cannot be told: the prompt's
            # real size is not known, nor whether it was cut.
            for key in ("prompt_tokens", "prompt_tokens_source", "cached_tokens"):
                data.pop(key, None)
            fact.why["prompt_tokens"] = ("ambiguous: several truncations cut prompts to its size at the time; no "
                                         "line names its request")
        facts.append(fact)
        while len(facts) > MAX_PENDING_FACTS:
            facts.popleft()

    @staticmethod
    def _maybe_cut(facts: deque[_Fact], t: float, data: dict[str, Any]) -> bool:
        size = data.get("prompt_tokens")
        return size is not None and any(f.data.get("truncated") and not (f.task or f.start) and f.new == size
                                        and abs(t - f.t) <= 2.0 for f in facts)

    def _truncation_of(self, facts: deque[_Fact], t: float, data: dict[str, Any]) -> _Fact | None:
        """The truncation a task ran the cut prompt of: the one just before it. With parallel slots several
        may be, and only the one whose size after cutting is the task's prompt can be told to be its."""
        slots = self.slots()
        if slots is None or slots <= 1:
            last = facts[-1] if facts else None
            return last if last is not None and last.data.get("truncated") and t - last.t <= 2.0 else None
        size = data.get("prompt_tokens")
        fits = [f for f in facts if f.data.get("truncated") and not (f.task or f.start) and abs(t - f.t) <= 2.0
                and f.new is not None and f.new == size]
        return fits[0] if len(fits) == 1 else None

    def truncation(self, src: int, t: float, event: ev.Truncation, ref: Ref) -> None:
        self.sink(
            "truncation",
            Simple("truncation", {
                "time": _iso(event.ts), "limit": event.limit, "prompt": event.prompt, "keep": event.keep,
                "new": event.new, "truncated": event.truncated, "form": event.form,
            }, ref, t),
        )
        if event.form != "input_truncated":
            self.settings.observe("ctx_per_slot_limit", event.limit, ref)
        data: dict[str, Any] = {"truncated": event.truncated}
        if event.prompt is not None:
            data["prompt_tokens"] = event.prompt
            data["prompt_tokens_source"] = "truncation"
        self.push(src, t, data, merge_with_truncation=False, refs={"prompt_tokens": ref}, new=event.new)

    def task_event(self, src: int, t: float, event: ev.Event, ref: Ref) -> None:
        tasks = self._tasks.setdefault(src, {})
        if isinstance(event, ev.CacheSlot):
            self.push(src, t, {
                "prompt_tokens": event.prompt, "prompt_tokens_source": "log",
                "cached_tokens": event.used, "prefill_tokens": event.remaining,
            }, merge_with_truncation=True, refs=dict.fromkeys(("prompt_tokens", "cached_tokens", "prefill_tokens"),
                                                               ref), start=True)
            self.sink("task", Simple("task", {
                "time": _iso(event.ts), "slot": event.slot, "task": None, "prompt_tokens": event.prompt,
                "cached_tokens": event.used, "prefill_tokens": event.remaining,
            }, ref))
            return
        key = getattr(event, "task", None)
        if isinstance(event, ev.PromptTask):
            if key in tasks:
                self.finish_task(src, key)
            tasks[key] = _Task(ref, t, {
                "time": _iso(event.ts), "slot": event.slot, "task": event.task, "n_ctx_slot": event.n_ctx_slot,
                "n_keep": event.n_keep, "prompt_tokens": event.n_tokens,
            })
            self.settings.observe("ctx_per_slot", event.n_ctx_slot, ref)
            return
        task = tasks.get(key)
        done = self._done.get(src, {})
        if task is None and isinstance(event, ev.SlotRelease) and key in done:
            # llama-server logs `release` after `total time`: it belongs to the finished task. Opening a
            # new one here would queue an empty fact that the next concurrent request would take.
            fact = done.pop(key)
            if event.truncated:
                fact["truncated"] = True
            return
        if task is None:
            task = tasks[key] = _Task(ref, t, {"time": _iso(event.ts), "task": key})
        d = task.data
        if isinstance(event, ev.PrefillProgress):
            d.setdefault("progress", []).append(
                {"n_tokens": event.n_tokens, "progress": event.progress, "t_s": event.t_s})
        elif isinstance(event, ev.Timing):
            name = "prompt_eval" if event.kind == "prompt" else event.kind
            task.refs[name] = ref
            d[f"{name}_ms"] = event.ms
            d[f"{name}_tokens"] = event.tokens
            if event.kind == "total":
                self.finish_task(src, key)
        elif isinstance(event, ev.SlotRelease):
            d["truncated"] = event.truncated
            self.finish_task(src, key)

    def finish_task(self, src: int, key: int | None) -> None:
        task = self._tasks.get(src, {}).pop(key, None)
        if task is None:
            return
        d = task.data
        fact: dict[str, Any] = {}
        prompt = d.get("prompt_tokens")  # the whole prompt (llama-server task.n_tokens)
        evaluated = d.get("prompt_eval_tokens")  # only the tokens computed, not served from cache
        if prompt is not None or evaluated is not None:
            # Without a task line (E0/E2 print_timings) the evaluated count is the whole prompt.
            fact["prompt_tokens"] = prompt if prompt is not None else evaluated
            fact["prompt_tokens_source"] = "log"
        if evaluated is not None:
            fact["prefill_tokens"] = evaluated
            if prompt is not None:
                fact["cached_tokens"] = max(0, prompt - evaluated)
            # A lower bound: prefill only, not queueing or a load (those lines carry no time).
            fact["ttft_s"] = round(d["prompt_eval_ms"] / 1000.0, 6)
        if d.get("eval_tokens"):
            fact["output_tokens"] = d["eval_tokens"]
            fact["itl_s"] = round(d["eval_ms"] / d["eval_tokens"] / 1000.0, 6)
        if d.get("truncated"):
            fact["truncated"] = True
        self.sink("task", Simple("task", d, task.ref))
        if not fact:
            return  # nothing learned (a lone release or slot line): no fact to hand to a request
        prompt_line = task.refs.get("prompt_eval", task.ref)
        eval_line = task.refs.get("eval", task.ref)
        refs = {"prompt_tokens": task.ref if prompt is not None else prompt_line, "prefill_tokens": prompt_line,
                "cached_tokens": prompt_line, "ttft_s": prompt_line, "output_tokens": eval_line, "itl_s": eval_line}
        self.push(src, task.t, fact, merge_with_truncation=True, refs=refs, task=True)
        done = self._done.setdefault(src, {})
        done[key] = fact
        while len(done) > 64:
            del done[next(iter(done))]

    def flush(self) -> None:
        for src, tasks in self._tasks.items():
            for key in list(tasks):
                self.finish_task(src, key)
