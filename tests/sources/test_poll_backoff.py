"""``Poller``'s backoff (issue 24): an address where nothing listens is polled less and less often, the engine's
state stays "down" meanwhile, and the first answer puts it back on the interval at once.

The engines are ``httpx.MockTransport`` handlers; "refused" is raised as httpx raises it for a closed port
(``ConnectError`` "[Errno 111] Connection refused", as in test_http.py), the answers are the recorded bodies of
fixtures/ollama/api and fixtures/vllm/metrics. ``poll_once`` runs on a fake clock, so the schedule is exact.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from pathlib import Path

import httpx

from ietop.model.store import Store
from ietop.pipeline.polling import apply_poll
from ietop.sources.http import BACKOFF_AFTER, Poller, PollResult

FIX = Path(__file__).resolve().parents[2] / "fixtures"
PS_BODY = (FIX / "ollama" / "api" / "ps-empty.json").read_bytes()
VERSION_BODY = (FIX / "ollama" / "api" / "version-0.12.3.json").read_bytes()
METRICS_BODY = sorted((FIX / "vllm" / "metrics").glob("real-basic-metrics-*.txt"))[0].read_bytes()
OLLAMA = "http://127.0.0.1:11434"
VERSION, PS = OLLAMA + "/api/version", OLLAMA + "/api/ps"  # poll_urls' order: the version is the probe
METRICS = "http://127.0.0.1:8000/metrics"
NOW = datetime(2026, 12, 2, 9, 0, tzinfo=timezone.utc)


class Engines:
    """Ollama refusing until `ollama` says otherwise; vLLM always answering. Records every request."""

    def __init__(self) -> None:
        self.ollama = "refused"
        self.requests: list[str] = []

    async def handler(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        self.requests.append(url)
        if url == METRICS:
            return httpx.Response(200, content=METRICS_BODY)
        if self.ollama == "refused":
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        if self.ollama == "500":
            return httpx.Response(500, text="Internal Server Error")
        return httpx.Response(200, content=PS_BODY if url == PS else VERSION_BODY)


def _kind(url: str) -> tuple[str, str, str]:
    if url == METRICS:
        return "vllm", "metrics", METRICS.rsplit("/", 1)[0]
    return "ollama", "ps" if url == PS else "version", OLLAMA


async def _every_2s(
    engines: Engines, until: float, change: dict[float, str]
) -> tuple[dict[float, list[str]], list[PollResult], Store]:
    """poll_once every 2 s of fake time (what `run` does while vLLM answers); `change` sets Ollama's state."""
    now = [0.0]
    polled: dict[float, list[str]] = {}
    reported: list[PollResult] = []
    store = Store()

    def on_result(r: PollResult) -> None:
        reported.append(r)
        engine, kind, base = _kind(r.url)
        apply_poll(store, engine, kind, base, r.status, r.body, r.error, NOW)

    async with httpx.AsyncClient(transport=httpx.MockTransport(engines.handler)) as client:
        poller = Poller(client, [VERSION, PS, METRICS], interval=2.0, backoff_max=10.0, clock=lambda: now[0])
        while now[0] <= until:
            engines.ollama = change.get(now[0], engines.ollama)
            before = len(engines.requests)
            await poller.poll_once(on_result)
            polled[now[0]] = sorted(engines.requests[before:])
            now[0] += 2.0
    return polled, reported, store


async def test_a_refusing_engine_is_polled_less_often_and_stays_down() -> None:
    engines = Engines()
    polled, reported, store = await _every_2s(engines, 60.0, {})
    ollama_at = [t for t, urls in polled.items() if any(u.startswith(OLLAMA) for u in urls)]
    # Three full rounds, then tries 4, 8 and 10 s (the cap) after the last.
    assert ollama_at == [0.0, 2.0, 4.0, 8.0, 16.0, 26.0, 36.0, 46.0, 56.0]
    assert polled[8.0] == [VERSION, METRICS] and polled[16.0] == [VERSION, METRICS]  # a try is one GET
    assert all(METRICS in urls for urls in polled.values())  # the answering engine: every round
    refused = [(r.url, r.error) for r in reported if r.url != METRICS]
    assert sorted(refused) == sorted([(VERSION, "refused"), (PS, "refused")] * BACKOFF_AFTER)  # tries are silent
    assert (store.engines[OLLAMA].state, store.engines[OLLAMA].detail) == ("down", "refused")


async def test_an_answer_resets_the_backoff_at_once() -> None:
    engines = Engines()
    polled, reported, store = await _every_2s(engines, 34.0, {20.0: "up"})
    # Refusing until 20 s: tried at 16 s (silent), then 26 s, when the answer comes: both paths in that round.
    assert polled[16.0] == [VERSION, METRICS] and polled[20.0] == [METRICS]
    assert polled[26.0] == sorted([VERSION, PS, METRICS])
    assert all(polled[t] == sorted([VERSION, PS, METRICS]) for t in (28.0, 30.0, 32.0, 34.0))  # every round again
    answered = [r for r in reported if r.url.startswith(OLLAMA) and r.ok]
    assert {r.url for r in answered} == {VERSION, PS}
    assert store.engines[OLLAMA].state == "up"


async def test_another_failure_is_reported_and_polls_the_whole_address() -> None:
    engines = Engines()
    polled, reported, store = await _every_2s(engines, 30.0, {10.0: "500"})
    assert polled[16.0] == sorted([VERSION, PS, METRICS])  # the try met a 500: not "nothing listens"
    at_16 = [(r.url, r.error) for r in reported if r.url.startswith(OLLAMA)][2 * BACKOFF_AFTER :][:2]
    assert sorted(at_16) == [(PS, "http 500"), (VERSION, "http 500")]  # both reported
    assert all(len(polled[t]) == 3 for t in (18.0, 20.0, 30.0))  # an answer, even an error status: every round
    assert store.engines[OLLAMA].state == "unknown"


async def test_run_reports_a_refusal_backoff_after_times_then_sees_the_engine_come_back() -> None:
    # The real loop and clock: whatever the machine's speed, a refusing address is reported BACKOFF_AFTER times
    # per URL and no more, the answering one keeps coming, and the engine is seen once it listens.
    engines = Engines()
    stop = asyncio.Event()
    reported: list[PollResult] = []

    def on_result(r: PollResult) -> None:
        reported.append(r)
        if sum(1 for x in reported if x.url == METRICS) == 30:
            engines.ollama = "up"
        if any(x.url == PS and x.ok for x in reported):
            stop.set()

    async with httpx.AsyncClient(transport=httpx.MockTransport(engines.handler)) as client:
        poller = Poller(client, [VERSION, PS, METRICS], interval=0.01, backoff_max=0.05)
        await asyncio.wait_for(poller.run(on_result, stop), 20)
    ollama = [(r.url, r.error) for r in reported if r.url.startswith(OLLAMA)]
    refusals = [x for x in ollama if x[1] == "refused"]
    assert sorted(refusals) == sorted([(VERSION, "refused"), (PS, "refused")] * BACKOFF_AFTER)
    assert (PS, None) in ollama and (VERSION, None) in ollama
    # While it refused, the tries were silent: more GETs went to it than were reported.
    assert engines.requests.count(VERSION) > sum(1 for x in ollama if x[0] == VERSION)


async def test_without_backoff_every_round_polls_every_url() -> None:
    engines = Engines()
    async with httpx.AsyncClient(transport=httpx.MockTransport(engines.handler)) as client:
        poller = Poller(client, [VERSION, PS, METRICS], interval=2.0, clock=lambda: 0.0)
        for _ in range(BACKOFF_AFTER + 3):
            await poller.poll_once(lambda r: None)
    assert engines.requests.count(VERSION) == engines.requests.count(PS) == BACKOFF_AFTER + 3
