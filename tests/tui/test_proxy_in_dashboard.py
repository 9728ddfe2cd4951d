"""`ietop --proxy PORT`: the proxy runs inside the dashboard and its measurements reach the panels.

The upstream is a loopback ASGI app replaying a REAL mlx_lm.server stream (fixtures/streams/
mlx-chat-stream-usage.json) at its recorded times."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from ietop.pipeline.command_feeds import ProxyFeed
from ietop.pipeline.discover import Plan
from ietop.sources.proxy import BackgroundServer
from ietop.tui.run import live_app
from ietop.tui.widgets.requests import RequestsTable

FIXTURE = json.loads((Path(__file__).resolve().parents[2] / "fixtures" / "streams" /
                      "mlx-chat-stream-usage.json").read_text())


async def replay_upstream(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    while (await receive()).get("more_body"):
        pass
    await asyncio.sleep(FIXTURE["t_headers"])
    headers = [(k.encode(), v.encode()) for k, v in FIXTURE["headers"]]
    await send({"type": "http.response.start", "status": FIXTURE["status"], "headers": headers})
    last = FIXTURE["t_headers"]
    for t, text in FIXTURE["chunks"]:
        await asyncio.sleep(max(0.0, t - last))
        last = t
        await send({"type": "http.response.body", "body": text.encode(), "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def test_proxy_measurements_reach_the_requests_panel() -> None:
    with BackgroundServer(replay_upstream) as upstream:
        app = live_app(Plan(proxy="127.0.0.1:0", proxy_upstream=upstream.url))
        app.setup.hardware = False
        feed = next(f for f in app.setup.feeds if isinstance(f, ProxyFeed))
        async with app.run_test(size=(140, 40)) as pilot:
            for _ in range(100):
                if feed.url:
                    break
                await pilot.pause(0.05)
            assert feed.url, "the in-dashboard proxy did not start"
            async with httpx.AsyncClient() as client:
                answer = await client.post(f"{feed.url}{FIXTURE['path']}", json=FIXTURE["request"])
            assert answer.content == "".join(text for _t, text in FIXTURE["chunks"]).encode()
            for _ in range(100):
                if app.store.counts.get("inference_requests"):
                    break
                await pilot.pause(0.05)
            app.refresh_view()
            await pilot.pause()
            (req,) = app.query_one(RequestsTable).records
            expect = FIXTURE["expect"]
            assert (req.model, req.prompt_tokens, req.output_tokens) == (
                expect["model"], expect["prompt_tokens"], expect["output_tokens"])
            assert req.prompt_tokens_source == "proxy"
            # The proxy's timing accuracy is tested in tests/sources/test_proxy.py on a quiet loop; here the
            # dashboard shares the GIL with the proxy thread, so only bound it: never before the upstream sent.
            assert req.ttft_s is not None and expect["ttft_s"] - 0.005 <= req.ttft_s < expect["ttft_s"] + 1.0
            ttft = next(row for row in app.snap.latency if row.metric == "TTFT")
            assert ttft.count == 1 and ttft.source == "requests"
