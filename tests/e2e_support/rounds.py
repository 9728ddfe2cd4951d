"""Rounds of overlapping requests for the engines' overlap scorers (tests/e2e/test_mlx_concurrency.py,
tests/e2e_vllm/test_vllm_concurrency.py), and waiting for a server's log to go quiet."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
