"""Rounds of overlapping requests for the engines' overlap scorers (tests/e2e/test_mlx_concurrency.py,
tests/e2e_vllm/test_vllm_concurrency.py), and waiting for a server's log to go quiet."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from e2e_support.score import Score, rows_in, score_round

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
ROUNDS = 8
ROUND_GAP_S = 2.5
"""Between rounds: access lines have one-second resolution, so rounds stay apart in the log's own time."""
SHAPES = ((CHAT, False), (CHAT, True), (COMPLETIONS, False), (COMPLETIONS, True))
WORDS = ("river", "stone", "lantern", "orchard", "copper", "meadow", "harbor", "violet", "thunder", "marble")

Post = Callable[[str, str, dict[str, Any], bool], Any]
"""(name, path, body, stream) → the client's record of the request."""


def plan_rounds(seed: int) -> list[list[dict[str, Any]]]:
    """Rounds of 3–4 requests: shapes drawn with repeats, distinct prompt lengths and max_tokens within a
    round (so a swap between two requests shows in the numbers), delays 0–100 ms after the previous one."""
    rng = random.Random(seed)
    rounds = []
    for r in range(ROUNDS):
        n = rng.choice((3, 4))
        lengths = rng.sample(range(3, 40), n)
        limits = rng.sample(range(6, 40), n)
        calls = []
        delay = 0.0
        for i in range(n):
            path, stream = rng.choice(SHAPES)
            text = f"Round {r} item {i}: " + " ".join(rng.choice(WORDS) for _ in range(lengths[i]))
            calls.append({"name": f"r{r}-{i}", "path": path, "stream": stream, "max_tokens": limits[i],
                          "text": text, "delay": delay})
            delay += rng.uniform(0.0, 0.1)
        rounds.append(calls)
    return rounds


def send_round(post: Post, calls: list[dict[str, Any]]) -> list[Any]:
    """Each call from its own thread, released together, each after its own delay; records in call order."""
    results: dict[int, Any] = {}
    barrier = threading.Barrier(len(calls))

    def worker(i: int, call: dict[str, Any]) -> None:
        barrier.wait()
        time.sleep(call["delay"])
        if call["path"] == CHAT:
            body: dict[str, Any] = {"messages": [{"role": "user", "content": call["text"]}]}
        else:
            body = {"prompt": call["text"]}
        body["max_tokens"] = call["max_tokens"]
        results[i] = post(call["name"], call["path"], body, call["stream"])

    threads = [threading.Thread(target=worker, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [results[i] for i in range(len(calls))]


def wait_until_quiet(log_path: Path, quiet_s: float = 0.5, limit_s: float = 15.0) -> None:
    """Until the log has not grown for `quiet_s`: the server being done is read from its log, not guessed by a
    fixed sleep (0.3 s was one; a test failed once in a full local run and did not again in 8 runs)."""
    size, since = -1, time.monotonic()
    deadline = since + limit_s
    while time.monotonic() < deadline:
        now_size = log_path.stat().st_size
        if now_size != size:
            size, since = now_size, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.05)


def follow_rounds(log_path: Path, engine: str, seed: int, post_with: Callable[[], Any],
                  stop: Callable[[], object]) -> tuple[list[list[Any]], Any]:
    """Send the seed's rounds from a thread (`post_with()` is a context manager giving the Post) while ietop
    follows the log as the dashboard does, then `stop()` the server and finish reading. Returns the client's
    records per round and the store's sink."""
    from ietop.model.store import ListSink, Store
    from ietop.pipeline.livelog import LiveLog

    sink = ListSink()
    store = Store(sink)
    live = LiveLog(store, str(log_path), engine)
    rounds: list[list[Any]] = []
    failure: list[BaseException] = []

    def client() -> None:
        try:
            with post_with() as post:
                for calls in plan_rounds(seed):
                    rounds.append(send_round(post, calls))
                    time.sleep(ROUND_GAP_S)
        except BaseException as exc:  # surfaced in the test's thread
            failure.append(exc)

    worker = threading.Thread(target=client)
    worker.start()
    while worker.is_alive():
        live.pump()
        time.sleep(0.05)
    worker.join()
    if failure:
        raise failure[0]
    wait_until_quiet(log_path)
    live.pump()
    stop()
    live.pump()
    live.close()
    store.flush()
    assert store.sources[0].unparsed_lines == 0
    return rounds, sink


def score_rounds(rounds: list[list[Any]], sink: Any, knowable: tuple[str, ...]) -> Score:
    """Every round scored (tests/e2e_support/score.py); every request of them must have been served."""
    total = Score()
    for records in rounds:
        assert all(r.status == 200 for r in records), [(r.name, r.status, r.error) for r in records]
        total.add(score_round(rows_in(sink.records.get("request", []), records), records, knowable))
    return total
