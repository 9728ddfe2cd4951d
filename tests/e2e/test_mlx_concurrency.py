"""Truth under overlap, against a real mlx_lm.server: rounds of 3–4 overlapping requests (chat and
completions, stream and non-stream, 0–100 ms apart), followed live by ietop at DEBUG and at INFO, and every
fact ietop states scored against the client's usage blocks and timings (tests/e2e_support/score.py).

The log has no request id: a fact may be stated only when the lines it rests on can belong to one request
alone, so the bar is **0 wrong facts**; how many knowable facts are stated is reported, not required.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_support.rounds import Post, follow_rounds, score_rounds
from e2e_support.score import Score
from mlx_client import MlxClient, RequestRecord, dump_jsonl
from mlx_env import MlxEnv, MlxModels
from mlx_server import MlxServer

from ietop.model.store import ListSink

pytestmark = pytest.mark.e2e


@contextlib.contextmanager
def _poster(url: str) -> Iterator[Post]:
    """The client's post as the shared rounds send it: usage asked for, the server's default model."""
    with MlxClient(url) as client:
        yield lambda name, path, body, stream: client.post(name, path, body, stream=stream, include_usage=True,
                                                            model=None)


def run_rounds(server: MlxServer, log_path: Path, seed: int) -> tuple[list[list[RequestRecord]], ListSink]:
    rounds, sink = follow_rounds(log_path, "mlx", seed, lambda: _poster(server.url), server.stop)
    # Kept beside the log: a failure can be replayed offline (the log, and what the client saw).
    dump_jsonl([rec for records in rounds for rec in records], str(log_path.with_suffix(".client.jsonl")))
    return rounds, sink


def score(rounds: list[list[RequestRecord]], sink: ListSink, knowable: tuple[str, ...]) -> Score:
    return score_rounds(rounds, sink, knowable)


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
