"""Property: whatever the overlap, no prompt size ietop states on a vLLM access row is another request's (issue 19).

The logs here are SYNTHETIC, written by a small model of vLLM 0.32's API server at DEBUG with request logging,
in the line shapes of our real runs (fixtures/vllm/overlap/): each request logs its `JSON body` on arrival, then
(after tokenising) `Request <id> details` with its prompt token ids and `Received request <id>`; a stream's
access line goes out with its headers, before its generator adds it to the engine (`Added request`); a
non-stream is added, generates, and writes its access line when it is done. Every request is its own asyncio
task, so other requests' lines fall anywhere between these. The engine's stats line comes every 10 s with the
requests then running. Hypothesis draws the workloads (2–6 requests, chat or completions, stream or not, prompt
sizes that may collide, arrival gaps and durations) and where the log begins (a tail read from the middle of the
traffic). The access line each request wrote is known here, so each row is checked against its own request.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ietop.model.records import Request
from ietop.model.store import ListSink, Store
from ietop.pipeline.feeds import Evidence, TailParse

T0 = datetime(2026, 12, 1, 21, 0, 0)
CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
API = "(APIServer pid=27257) "


def build_log(drawn: list[tuple[str, bool, int, float, float]], seed: int) -> tuple[list[str], dict[int, tuple[int, int]]]:
    """The log lines, and for each access line (1-based) the prompt size of the request that wrote it and the line
    that logged that size."""
    rng = random.Random(seed)
    events: list[tuple[float, float, str, int | None]] = []  # (time, tie-break, text, request of an access line)

    def at(t: float, text: str, owner: int | None = None) -> None:
        events.append((t, rng.random(), text, owner))

    def rec(t: float, level: str, where: str, msg: str) -> None:
        stamp = (T0 + timedelta(seconds=t)).strftime("%m-%d %H:%M:%S")
        at(t, f"{API}{level} {stamp} [{where}] {msg}")

    at(0.0, f"{API}INFO 12-01 21:00:00 [entrypoints/.../launchers/entry.py:140] Starting vLLM server on "
            "http://127.0.0.1:45421")
    running: list[tuple[float, float]] = []
    rids: list[str] = []
    t = 1.0
    for i, (path, stream, prompt, gap, duration) in enumerate(drawn):
        t += gap
        hexid = f"{i:04x}{rng.getrandbits(48):012x}"
        rid = f"chatcmpl-{hexid}" if path == CHAT else f"cmpl-{hexid}-0"
        rids.append(rid)
        body = '{"messages":[{"content":"x","role":"user"}]' if path == CHAT else '{"prompt":"x"'
        flag = ',"stream":true' if stream else ""
        rec(t, "DEBUG", "entrypoints/.../utils/request_logger.py:74",
            f'Request {hexid} JSON body: {body}{flag},"max_tokens":8}}')
        received = t + rng.uniform(0.0, 0.05)  # tokenising: other tasks run meanwhile
        ids = ", ".join(str(7 + k) for k in range(prompt))
        rec(received, "DEBUG", "entrypoints/.../utils/request_logger.py:55",
            f"Request {rid} details: prompt: 'x', prompt_token_ids: [{ids}], prompt_embeds shape: None.")
        rec(received, "INFO", "entrypoints/.../utils/request_logger.py:65",
            f"Received request {rid}: params: SamplingParams(n=1, max_tokens=8), lora_request: None.")
        access = f'INFO:     127.0.0.1:{40000 + i} - "POST {path} HTTP/1.1" 200 OK'
        if stream:
            sent = received + rng.uniform(0.0, 0.05)
            at(sent, access, i)
            added = sent + rng.uniform(0.0, 0.05)
        else:
            added = received + rng.uniform(0.0, 0.05)
        rec(added, "INFO", "v1/engine/async_llm.py:578", f"Added request {rid}-{rng.getrandbits(32):08x}.")
        done = added + duration
        running.append((added, done))
        if not stream:
            at(done + rng.uniform(0.0, 0.02), access, i)
    end = max(e[0] for e in events) + 25.0
    for k in range(1, int(end // 10) + 1):
        now = 10.0 * k
        n = sum(1 for a, d in running if a <= now < d)
        rec(now, "INFO", "v1/metrics/loggers.py:335",
            f"Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 1.0 tokens/s, Running: {n} "
            "reqs, Waiting: 0 reqs, CPU KV cache usage: 0.0%")
    events.sort(key=lambda e: (e[0], e[1]))
    lines = [e[2] for e in events]
    details = {i: next(n for n, text in enumerate(lines, 1) if f"Request {rid} details" in text)
               for i, rid in enumerate(rids)}
    return lines, {n: (drawn[e[3]][2], details[e[3]]) for n, e in enumerate(events, 1) if e[3] is not None}


def replay(lines: list[str]) -> list[Request]:
    sink = ListSink()
    store = Store(sink)
    tail = TailParse(store, "synthetic.log", "vllm", Evidence(), year=2026)
    store.apply_all(tail.parse(lines))
    store.flush()
    assert store.sources[0].unparsed_lines == 0
    return sink.records.get("request", [])


requests = st.tuples(st.sampled_from((CHAT, COMPLETIONS)), st.booleans(), st.sampled_from((3, 4, 9, 17)),
                     st.floats(0.0, 0.1), st.floats(0.01, 1.5))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(requests, min_size=2, max_size=6), st.integers(0, 2**32 - 1), st.floats(0.0, 1.0))
def test_no_prompt_size_goes_to_another_request(drawn: list[tuple[str, bool, int, float, float]], seed: int,
                                                 cut: float) -> None:
    lines, owners = build_log(drawn, seed)
    # The whole log, and a tail that begins somewhere in the traffic (its server start not in it).
    skip = int(cut * len(lines)) if cut > 0.5 else 0
    rows = replay(lines[skip:])
    assert len(rows) == sum(1 for n in owners if n > skip)
    for row in rows:
        owner_prompt, details_line = owners[row.ref.line + skip]
        if row.prompt_tokens is not None:
            assert row.prompt_tokens == owner_prompt, (row, lines)
            assert row.evidence is not None and row.evidence["prompt_tokens"].line + skip == details_line
        elif details_line > skip:  # the log read speaks of its prompt size: the row says why it is null
            assert row.unknown is not None and "prompt_tokens" in row.unknown, row
    assert [r.ref.line for r in rows] == sorted(r.ref.line for r in rows)  # in the log's order


def test_a_lone_request_and_its_neighbours_get_their_own_sizes() -> None:
    # A stream starting while a non-stream of its endpoint runs: its added line, right after its access line,
    # tells whose the line is; the non-stream's own line then has one candidate left.
    lines, owners = build_log([(CHAT, False, 9, 0.0, 1.0), (CHAT, True, 4, 0.3, 0.2)], seed=7)
    rows = replay(lines)
    assert [r.prompt_tokens for r in rows] == [owners[r.ref.line][0] for r in rows] == [4, 9]
