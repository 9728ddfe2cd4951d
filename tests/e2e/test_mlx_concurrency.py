"""Truth under overlap, against a real mlx_lm.server: rounds of 3–4 overlapping requests (chat and
completions, stream and non-stream, 0–100 ms apart), followed live by ietop at DEBUG and at INFO, and every
fact ietop states scored against the client's usage blocks and timings (tests/e2e_support/score.py).

The log has no request id: a fact may be stated only when the lines it rests on can belong to one request
alone, so the bar is **0 wrong facts**; how many knowable facts are stated is reported, not required.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from e2e_support.rounds import ROUND_GAP_S, plan_rounds, send_round, wait_until_quiet
from e2e_support.score import Score, rows_in, score_round
from mlx_client import MlxClient, RequestRecord, dump_jsonl
from mlx_env import MlxEnv, MlxModels
from mlx_server import MlxServer

from ietop.model.store import ListSink, Store
from ietop.pipeline.livelog import LiveLog

pytestmark = pytest.mark.e2e


def _poster(client: MlxClient) -> Any:
    """The client's post as the shared rounds send it: usage asked for, the server's default model."""

    def post(name: str, path: str, body: dict[str, Any], stream: bool) -> RequestRecord:
        return client.post(name, path, body, stream=stream, include_usage=True, model=None)
    return post


def run_rounds(server: MlxServer, log_path: Path, seed: int) -> tuple[list[list[RequestRecord]], ListSink]:
    sink = ListSink()
    store = Store(sink)
    live = LiveLog(store, str(log_path), "mlx")
    rounds: list[list[RequestRecord]] = []
    failure: list[BaseException] = []

    def client() -> None:
        try:
            with MlxClient(server.url) as c:
                for calls in plan_rounds(seed):
                    rounds.append(send_round(_poster(c), calls))
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
    assert store.sources[0].unparsed_lines == 0
    # Kept beside the log: a failure can be replayed offline (the log, and what the client saw).
    dump_jsonl([rec for records in rounds for rec in records], str(log_path.with_suffix(".client.jsonl")))
    return rounds, sink


def score(rounds: list[list[RequestRecord]], sink: ListSink, knowable: tuple[str, ...]) -> Score:
    total = Score()
    for records in rounds:
        assert all(r.status == 200 for r in records), [(r.name, r.status, r.error) for r in records]
        total.add(score_round(rows_in(sink.records.get("request", []), records), records, knowable))
    return total


def report(level: str, s: Score, notes: list[str]) -> None:
    notes.append(f"mlx overlap {level}: {s.stated} facts stated, {s.wrong} wrong, coverage "
                 f"{s.stated - s.unchecked}/{s.knowable} knowable ({s.coverage:.0%})")


@pytest.mark.parametrize("seed", [1919, 2026])
def test_debug_overlap_states_no_wrong_fact(mlx_env: MlxEnv, mlx_models: MlxModels, tmp_path: Path, seed: int,
                                            e2e_notes: list[str]) -> None:
    log_path = tmp_path / "server-debug.log"
    server = MlxServer(mlx_models.default, log_level="DEBUG", log_path=log_path, server=mlx_env.server,
                       hf_hub_cache=mlx_models.hf_hub_cache).start()
    with server:
        rounds, sink = run_rounds(server, log_path, seed)
    s = score(rounds, sink, ("prompt_tokens", "cached_tokens", "output_tokens", "prefill_tokens", "ttft_s",
                             "latency_s"))
    report("DEBUG", s, e2e_notes)
    assert s.wrong == 0, "\n".join(s.problems)
    assert s.stated > 0


@pytest.mark.parametrize("seed", [1919, 2026])
def test_info_overlap_states_no_wrong_fact(mlx_env: MlxEnv, mlx_models: MlxModels, tmp_path: Path, seed: int,
                                           e2e_notes: list[str]) -> None:
    log_path = tmp_path / "server-info.log"
    server = MlxServer(mlx_models.default, log_level="INFO", log_path=log_path, server=mlx_env.server,
                       hf_hub_cache=mlx_models.hf_hub_cache).start()
    with server:
        rounds, sink = run_rounds(server, log_path, seed)
    s = score(rounds, sink, ("prefill_tokens",))
    report("INFO", s, e2e_notes)
    assert s.wrong == 0, "\n".join(s.problems)
