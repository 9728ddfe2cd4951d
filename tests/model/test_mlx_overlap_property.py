"""Property: whatever the overlap, no fact the MLX tracker states belongs to another request (issue 19).

The logs here are SYNTHETIC, written by a small model of mlx_lm 0.32's batched server in its real line shapes
(fixtures/mlx/debug-server.stderr): each request's handler thread logs its body on arrival; the generation
thread admits queued requests between steps, in arrival order (`Prompt Cache:` and its three type lines); each
handler then writes its access line and `Starting stream:`/`Starting completion:` in whatever order the threads
wake; prefill logs `N-1/N` then `N/N` per request; every step gives each running sequence one token line (in
any order within the step); a non-stream request ends with `Outgoing Response` and its usage. Hypothesis draws
the workloads (2–4 requests, chat or completions, stream or not, sizes that may collide, gaps of 0–100 ms) and
the thread races. The access line each request's handler wrote is known here, so each row is checked against its
own request, with one allowance: the access lines of same-endpoint requests admitted in the same step are
identical (path, status, the same second) and their handlers race, so which of them is whose cannot be seen by
anyone; rows may be swapped within such a class, never across it, and every fact must then be true.
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ietop.model.records import Request
from ietop.model.store import ListSink, Store
from ietop.pipeline.feeds import Evidence, TailParse

T0 = datetime(2026, 12, 1, 21, 0, 0)
STEP_S = 0.004
CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"


@dataclass
class Req:
    path: str
    stream: bool
    max_tokens: int
    output: int
    uncached: int
    cached: int
    arrival: float
    access_line: int = 0
    admitted: float | None = None
    prefilled: float | None = None
    tokens: list[float] = field(default_factory=list)
    end: float | None = None


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def at(self, t: float, level: str, text: str) -> int:
        stamp = (T0 + timedelta(seconds=t)).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
        first, *rest = text.split("\n")
        self.lines.append(f"{stamp} - {level} - {first}")
        self.lines.extend(rest)
        return len(self.lines)

    def access(self, t: float, path: str) -> int:
        stamp = (T0 + timedelta(seconds=t)).strftime("%d/%b/%Y %H:%M:%S")
        self.lines.append(f'127.0.0.1 - - [{stamp}] "POST {path} HTTP/1.1" 200 -')
        return len(self.lines)


def simulate(reqs: list[Req], rng: random.Random) -> Log:
    """One run of the model server; fills in each request's truth (admission, tokens, end)."""
    log = Log()
    pending = sorted(reqs, key=lambda r: r.arrival)
    queue: list[Req] = []
    running: list[Req] = []
    t = 0.0
    while pending or queue or running:
        step_end = t + STEP_S
        while pending and pending[0].arrival < step_end:  # handler threads log bodies as requests come in
            r = pending.pop(0)
            body: dict[str, object] = ({"messages": [{"role": "user", "content": "hi"}]} if r.path == CHAT
                                       else {"prompt": "hi"})
            body["max_tokens"] = r.max_tokens
            if r.stream:
                body["stream"] = True
            log.at(max(r.arrival, t), "DEBUG", "Incoming Request Body: " + json.dumps(body, indent="\t"))
            queue.append(r)
        t = step_end
        if queue:  # admitted between steps, in the order they were queued
            admitted, queue = queue, []
            for r in admitted:
                r.admitted = t
                log.at(t, "INFO", "Prompt Cache: 0 sequences, 0.00 GB")
                for kind in ("assistant", "user", "system"):
                    log.at(t, "INFO", f"- {kind}: 0 sequences, 0.00 GB")
            for r in rng.sample(admitted, len(admitted)):  # the handlers wake in any order
                r.access_line = log.access(t, r.path)
                log.at(t, "DEBUG", "Starting stream:" if r.stream else "Starting completion:")
            t += STEP_S
            for r in rng.sample(admitted, len(admitted)):
                if r.uncached > 1:
                    log.at(t, "INFO", f"Prompt processing progress: {r.uncached - 1}/{r.uncached}")
            t += STEP_S
            for r in rng.sample(admitted, len(admitted)):
                log.at(t, "INFO", f"Prompt processing progress: {r.uncached}/{r.uncached}")
                r.prefilled = t
            running.extend(admitted)
            continue
        if running:
            for r in rng.sample(running, len(running)):
                r.tokens.append(t)
                log.at(t, "DEBUG", rng.choice(("lorem", " ipsum", "dolor", " sit", "amet")))
                if len(r.tokens) == r.output:
                    r.end = t
                    running.remove(r)
                    if not r.stream:
                        doc = {"object": "chat.completion" if r.path == CHAT else "text_completion",
                               "model": "default_model",
                               "choices": [{"index": 0, "finish_reason":
                                            "length" if r.output == r.max_tokens else "stop"}],
                               "usage": {"prompt_tokens": r.uncached + r.cached, "completion_tokens": r.output,
                                         "total_tokens": r.uncached + r.cached + r.output,
                                         "prompt_tokens_details": {"cached_tokens": r.cached}}}
                        log.at(t, "DEBUG", "Outgoing Response: " + json.dumps(doc, indent="\t"))
    return log


def truth(r: Req) -> dict[str, float | int | None]:
    assert r.end is not None and r.tokens
    return {"prefill_tokens": r.uncached, "prompt_tokens": r.uncached + r.cached, "cached_tokens": r.cached,
            "output_tokens": r.output, "ttft_s": r.tokens[0] - r.arrival, "latency_s": r.end - r.arrival,
            "itl_s": (r.tokens[-1] - r.tokens[0]) / (len(r.tokens) - 1) if len(r.tokens) > 1 else None}


def check(row: Request, r: Req) -> list[str]:
    wrong = []
    for fact, true in truth(r).items():
        stated = getattr(row, fact)
        if stated is None:
            continue
        # Times: the log's clock has milliseconds, each line rounds down.
        ok = stated == true if fact.endswith("tokens") else true is not None and abs(stated - true) <= 0.0021
        if not ok:
            wrong.append(f"{fact}: stated {stated}, truth {true}")
    return wrong


requests = st.builds(
    lambda path, stream, limit, short, uncached, cached, gap: (path, stream, limit, short, uncached, cached, gap),
    st.sampled_from((CHAT, COMPLETIONS)), st.booleans(), st.integers(2, 12), st.integers(0, 3),
    st.sampled_from((3, 4, 9, 17)), st.integers(0, 3), st.floats(0.0, 0.1))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(requests, min_size=2, max_size=4), st.integers(0, 2**32 - 1))
def test_no_fact_goes_to_another_request(drawn: list[tuple[str, bool, int, int, int, int, float]], seed: int) -> None:
    reqs: list[Req] = []
    t = 0.001
    for path, stream, limit, short, uncached, cached, gap in drawn:
        t += gap
        # `short`: ended by a stop token before max_tokens (0: ran to its max_tokens).
        reqs.append(Req(path, stream, limit, max(1, limit - short), uncached, cached, t))
    log = simulate(reqs, random.Random(seed))
    sink = ListSink()
    store = Store(sink)
    parse = TailParse(store, "sim.log", "mlx", Evidence(), year=2026)
    store.apply_all(parse.parse(log.lines))
    store.flush()
    by_line = {r.access_line: r for r in reqs}
    rows = [r for r in sink.records.get("request", []) if r.inference]
    assert sorted(row.ref.line for row in rows) == sorted(by_line), "every access line is one row"
    classes: dict[tuple[float | None, str], list[Request]] = {}
    for row in rows:
        own = by_line[row.ref.line]
        classes.setdefault((own.admitted, own.path), []).append(row)
    problems: list[str] = []
    for members in classes.values():
        owners = [by_line[row.ref.line] for row in members]
        best: list[str] | None = None
        for perm in itertools.permutations(owners):
            found = [f"line {row.ref.line}: {p}" for row, r in zip(members, perm, strict=True) for p in check(row, r)]
            if best is None or len(found) < len(best):
                best = found
        problems += best or []
    assert not problems, "\n".join(problems + log.lines)
