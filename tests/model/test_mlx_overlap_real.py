"""Truth under overlap on saved real runs (fixtures/mlx/overlap/): rounds of 3–4 overlapping requests to a real
mlx_lm.server 0.32.2, its log and the client's usage blocks and timings. Every fact ietop states is scored with
the e2e scorer; none may be wrong. The live suite (tests/e2e/test_mlx_concurrency.py) makes new runs each
time; these keep the ones that once caught a wrong fact (a stream's count cut at the next arrival, a usage
block given to a request admitted in the same millisecond as its owner)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ietop.model.store import ListSink, Store
from ietop.pipeline.livelog import LiveLog
from tests.e2e_support.score import SavedRecord, Score, rounds_of, rows_in, score_round

OVERLAP = Path(__file__).resolve().parents[2] / "fixtures" / "mlx" / "overlap"
DEBUG_FACTS = ("prompt_tokens", "cached_tokens", "output_tokens", "prefill_tokens", "ttft_s", "latency_s")


def _score(run: str, knowable: tuple[str, ...]) -> Score:
    records = [SavedRecord.from_json(json.loads(line))
               for line in (OVERLAP / f"{run}-client.jsonl").read_text().splitlines()]
    sink = ListSink()
    store = Store(sink)
    live = LiveLog(store, str(OVERLAP / f"{run}-server.log"), "mlx")
    live.pump()
    live.close()
    store.flush()
    requests = sink.records.get("request", [])
    total = Score()
    for records_of_round in rounds_of(records):
        total.add(score_round(rows_in(requests, records_of_round), records_of_round, knowable))
    return total


@pytest.mark.parametrize("run", ["seed1919-debug", "seed2026-debug"])
def test_debug_runs_state_no_wrong_fact(run: str) -> None:
    s = _score(run, DEBUG_FACTS)
    assert s.wrong == 0, "\n".join(s.problems)
    assert s.stated >= 0.6 * s.knowable  # what honesty leaves: shared token lines count for no one


def test_info_run_states_no_wrong_fact() -> None:
    s = _score("seed2026-info", ("prefill_tokens",))
    assert s.wrong == 0, "\n".join(s.problems)
    assert s.stated > 0


def test_info_cannot_say_whether_a_request_waited_for_a_load() -> None:
    # At INFO no body names a model, so a switch leaves no line: "waited for a load: no" would be a guess.
    sink = ListSink()
    store = Store(sink)
    live = LiveLog(store, str(OVERLAP / "seed2026-info-server.log"), "mlx")
    live.pump()
    live.close()
    store.flush()
    served = [r for r in sink.records["request"] if r.inference and r.status == 200]
    assert served and all(r.cold_load is None for r in served)
    assert all((r.unknown or {}).get("cold_load", "").startswith("not logged at INFO") for r in served)
