"""The MLX poller end to end without a server: `ietop.sources.http.Poller` over a MockTransport that
replays the recorded answer shapes (reference/mlx-formats.md §7), fed into the store with apply_poll.
Rounds never overlap; a refused connection, a 503 and an empty 200 are states, never exceptions."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import httpx

from ietop.model.store import Store
from ietop.pipeline.polling import apply_poll
from ietop.sources.http import Poller, PollResult

BASE = "http://127.0.0.1:8080"
ANSWERS = [
    (200, b'{"status": "ok"}', 200, b""),  # healthy; /v1/models crashed after its headers (no HF cache)
    (503, b'{"status": "unavailable"}', 200, b'{"object":"list","data":[{"id":"/tmp/tinymlx"}]}'),
    (None, b"", None, b""),  # stopped: connection refused
]


def test_poller_states_through_the_store() -> None:
    store = Store()
    states: list[tuple[str, tuple[str, ...] | None]] = []
    rnd = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        health_status, health_body, models_status, models_body = ANSWERS[rnd["n"]]
        if health_status is None:
            raise httpx.ConnectError("refused", request=request)
        if request.url.path == "/health":
            return httpx.Response(health_status, content=health_body)
        return httpx.Response(models_status or 500, content=models_body)

    async def run() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            poller = Poller(client, [BASE + "/health", BASE + "/v1/models"], interval=0.01, timeout=1.0)

            def on_result(result: PollResult) -> None:
                kind = "health" if result.url.endswith("/health") else "models"
                apply_poll(store, "mlx", kind, result.url, result.status, result.body, result.error,
                           datetime(2026, 11, 29, tzinfo=timezone.utc))

            for n in range(len(ANSWERS)):
                rnd["n"] = n
                await poller.poll_once(on_result)
                health = store.engines[BASE + "/health"]
                models = store.engines.get(BASE + "/v1/models")
                states.append((health.state, models.models if models else None))

    asyncio.run(run())
    assert states == [("up", None), ("dead", ("/tmp/tinymlx",)), ("down", None)]
