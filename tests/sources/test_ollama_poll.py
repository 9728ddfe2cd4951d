"""Polling Ollama's `/api/ps` and `/api/version` end to end: ``Poller`` → ``apply_poll`` → ``Store``.

An ``httpx.MockTransport`` serves the recorded bodies of fixtures/ollama/api (no socket, no patching);
the failure cases are the ones a live Ollama produces: not running (connect error), stuck (a handler
that outlives the poll timeout) and something else answering on its port (HTML).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from pathlib import Path

import httpx

from ietop.model.store import Store
from ietop.pipeline.polling import apply_poll
from ietop.sources.http import Poller, PollResult, get

API = Path(__file__).resolve().parents[2] / "fixtures" / "ollama" / "api"
BASE = "http://127.0.0.1:11434"
PS, VERSION = f"{BASE}/api/ps", f"{BASE}/api/version"
NOW = datetime(2025, 8, 12, 7, 45, tzinfo=timezone.utc)
Handler = Callable[[httpx.Request], Awaitable[httpx.Response]]


def _serving(ps_fixture: str, version_fixture: str = "version-0.12.3.json") -> Handler:
    bodies = {"/api/ps": (API / ps_fixture).read_bytes(), "/api/version": (API / version_fixture).read_bytes()}

    async def handler(request: httpx.Request) -> httpx.Response:
        assert request.method == "GET"  # a monitor never POSTs to Ollama: that could load a model
        body = bodies.get(request.url.path)
        if body is None:
            return httpx.Response(404, text="404 page not found")
        return httpx.Response(200, content=body, headers={"content-type": "application/json; charset=utf-8"})

    return handler


def _kind(url: str) -> str:
    return "ps" if url.endswith("/api/ps") else "version"


async def _poll_into(store: Store, handler: Handler, rounds: int = 1, timeout: float = 1.0) -> list[PollResult]:
    results: list[PollResult] = []

    def on_result(r: PollResult) -> None:
        results.append(r)
        apply_poll(store, "ollama", _kind(r.url), r.url, r.status, r.body, r.error, NOW)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        poller = Poller(client, [PS, VERSION], interval=0, timeout=timeout)
        for _ in range(rounds):
            await poller.poll_once(on_result)
    return results


async def test_resident_models_reach_the_store() -> None:
    store = Store()
    results = await _poll_into(store, _serving("ps-v0.10-two-models.json"))
    assert sorted((r.url, r.ok) for r in results) == [(PS, True), (VERSION, True)]
    residency = store.residency[PS]
    assert [(m.name, m.context_length) for m in residency.models] == [("llama3.2:latest", 8192), ("qwen2.5:0.5b", 4096)]
    assert (store.engines[PS].state, store.engines[PS].detail) == ("up", "2 models resident")
    assert (store.engines[VERSION].state, store.engines[VERSION].detail) == ("up", "version 0.12.3")


async def test_every_fixture_body_is_read() -> None:
    for fixture in sorted(p.name for p in API.glob("ps-*.json")):
        store = Store()
        await _poll_into(store, _serving(fixture))
        assert store.engines[PS].state == "up", fixture
        assert PS in store.residency, fixture


async def test_residency_follows_the_newest_answer() -> None:
    """A model that unloads between two polls is gone from the second snapshot."""
    store = Store()
    await _poll_into(store, _serving("ps-keep-alive-forever.json"))
    assert [m.name for m in store.residency[PS].models] == ["qwen2.5:0.5b"]
    await _poll_into(store, _serving("ps-empty.json"))
    assert store.residency[PS].models == ()
    assert store.engines[PS].detail == "no model resident"


async def test_engine_down() -> None:
    async def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    store = Store()
    results = await _poll_into(store, refused)
    assert {(r.url, r.status, r.error) for r in results} == {(PS, None, "refused"), (VERSION, None, "refused")}
    assert (store.engines[PS].state, store.engines[PS].detail) == ("down", "refused")
    assert store.engines[VERSION].state == "down"
    assert PS not in store.residency


async def test_slow_engine_times_out_and_the_next_round_still_runs() -> None:
    calls: list[str] = []
    fast = _serving("ps-loading.json")

    async def first_ps_hangs(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if calls.count("/api/ps") == 1 and request.url.path == "/api/ps":
            await asyncio.sleep(30)  # a scheduler stuck behind a deadlocked load (reference §6, #17408)
        return await fast(request)

    store = Store()
    seen: list[PollResult] = []
    stop = asyncio.Event()

    def on_result(r: PollResult) -> None:
        seen.append(r)
        apply_poll(store, "ollama", _kind(r.url), r.url, r.status, r.body, r.error, NOW)
        if len(seen) == 4:
            stop.set()

    async with httpx.AsyncClient(transport=httpx.MockTransport(first_ps_hangs)) as client:
        poller = Poller(client, [PS, VERSION], interval=0, timeout=0.2)
        await asyncio.wait_for(poller.run(on_result, stop), 10)
    ps_results = [r for r in seen if r.url == PS]
    assert [(r.ok, r.error) for r in ps_results] == [(False, "timeout"), (True, None)]
    assert 0.15 < ps_results[0].elapsed_s < 5
    assert poller.rounds == 2
    assert store.engines[PS].state == "up"  # the second round's answer replaced the timeout
    assert [m.name for m in store.residency[PS].models] == ["llama3.1:70b", "qwen2.5:0.5b"]


async def test_timeout_alone_marks_the_engine_down() -> None:
    async def stuck(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        raise AssertionError("unreachable")

    store = Store()
    await _poll_into(store, stuck, timeout=0.1)
    assert (store.engines[PS].state, store.engines[PS].detail) == ("down", "timeout")


async def test_garbage_body_is_unknown_and_nothing_raises() -> None:
    async def html(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html><head><title>Router login</title></head></html>",
                              headers={"content-type": "text/html"})

    store = Store()
    results = await _poll_into(store, html)
    assert all(r.ok for r in results)  # HTTP-wise fine; only the parser can tell it is not Ollama
    assert (store.engines[PS].state, store.engines[PS].detail) == ("unknown", "ps answer is not a model list")
    assert (store.engines[VERSION].state, store.engines[VERSION].detail) == ("unknown", "version answer unreadable")
    assert PS not in store.residency


async def test_server_error_is_unknown_not_down() -> None:
    async def error_500(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, json={"error": "llama runner process has terminated"})

    store = Store()
    results = await _poll_into(store, error_500)
    assert {r.error for r in results} == {"http 500"}
    assert (store.engines[PS].state, store.engines[PS].detail) == ("unknown", "ps answered 500")


async def test_get_alone_returns_the_fixture_bytes() -> None:
    async with httpx.AsyncClient(transport=httpx.MockTransport(_serving("ps-pre-v0.10-nirmato13.json"))) as client:
        r = await get(client, PS, 1.0)
    assert (r.ok, r.status, r.body) == (True, 200, (API / "ps-pre-v0.10-nirmato13.json").read_bytes())
