"""ietop against a real mlx_lm.server: follow its log with ietop's own tailer while a client sends the
request mix, and compare what ietop derives with the usage blocks the client received.

At DEBUG ietop must recover, per request: the full prompt size, cached and output tokens (non-stream:
from the logged usage), the uncached prefill size (all), TTFT of streams (from the arrival and first
token lines), the model switch as unload + load. At INFO only the uncached prefill size is logged, and
ietop must claim nothing more. Stopping the server must show the engine down. Servers end by PID.
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2e_support.rounds import wait_until_quiet
from mlx_client import RequestRecord, run_request_mix
from mlx_env import MlxEnv, MlxModels
from mlx_server import MlxServer, port_refuses

from ietop.model.records import Request
from ietop.model.store import ListSink, Store
from ietop.pipeline.livelog import LiveLog
from ietop.pipeline.polling import apply_poll, sample_engine_process
from ietop.sources.http import get

pytestmark = pytest.mark.e2e


def holder_report(pid: int | None, server_pid: int) -> str:
    """Who ietop found on the server's port instead of the server (CI saw this twice; keep the facts)."""
    import psutil

    if pid is None:
        return "no process found on the port"
    try:
        proc = psutil.Process(pid)
        return (f"found pid {pid} (ppid {proc.ppid()}, ancestors {[p.pid for p in proc.parents()]}, "
                f"cmdline {proc.cmdline()[:4]}) instead of the server {server_pid}")
    except psutil.Error as exc:
        return f"found pid {pid}, gone: {exc!r}"


def poll_health(store: Store, url: str) -> None:
    async def once() -> None:
        async with httpx.AsyncClient(trust_env=False) as client:
            result = await get(client, url + "/health", timeout=5.0)
        apply_poll(store, "mlx", "health", result.url, result.status, result.body, result.error,
                   datetime.now().astimezone())

    asyncio.run(once())


def follow_run(server: MlxServer, log_path: Path, second_model: str) -> tuple[list[RequestRecord], Store, ListSink]:
    """Run the client mix in a thread while ietop follows the log, samples the process and polls."""
    sink = ListSink()
    store = Store(sink)
    live = LiveLog(store, str(log_path), "mlx")
    records: list[RequestRecord] = []
    failure: list[BaseException] = []

    def client() -> None:
        try:
            records.extend(run_request_mix(server.url, second_model=second_model, long_sentences=40))
        except BaseException as exc:  # surfaced below, in the test's thread
            failure.append(exc)

    worker = threading.Thread(target=client)
    worker.start()
    poll_health(store, server.url)
    while worker.is_alive():
        live.pump()
        # As the dashboard does: the process is found by its listening port, not told.
        found = sample_engine_process(store, live.src, datetime.now().astimezone(), port=server.port)
        assert found == server.pid, holder_report(found, server.pid)
        time.sleep(0.05)
    worker.join()
    if failure:
        raise failure[0]
    wait_until_quiet(log_path)  # the server writes its last token/response lines just after the client returns
    live.pump()
    assert store.engines[server.url + "/health"].state == "up"
    server.stop()
    assert port_refuses(server.port)
    poll_health(store, server.url)
    live.pump()
    live.close()
    store.flush()
    return records, store, sink


def served(sink: ListSink) -> list[Request]:
    return [r for r in sink.records.get("request", []) if r.inference and r.status == 200]


def split_concurrent(records: list[RequestRecord], got: list[Request]) -> tuple[list[tuple[RequestRecord, Request]],
                                                                                  list[RequestRecord], list[Request]]:
    """Sequential requests pair in order; the concurrent group is admitted in an order of its own."""
    seq = [r for r in records if not r.concurrent_group]
    conc = [r for r in records if r.concurrent_group]
    first = records.index(conc[0])
    got_conc = got[first:first + len(conc)]
    got_seq = got[:first] + got[first + len(conc):]
    assert len(got_seq) == len(seq), ([r.name for r in seq], len(got_seq))
    return list(zip(seq, got_seq, strict=True)), conc, got_conc


def assert_only_true_sizes(got: list[Request], sent: list[RequestRecord]) -> None:
    """The concurrent group is admitted in the same milliseconds and its progress lines carry no id: a row
    states an uncached size only where it is provable, and never one no request of the group had (the
    overlap scorer, test_mlx_concurrency.py, checks each row against its own request)."""
    assert len(got) == len(sent)
    truth = [uncached(r) for r in sent]
    stated = [r.prefill_tokens for r in got if r.prefill_tokens is not None]
    assert all(n in truth for n in stated), (stated, truth)


def uncached(rec: RequestRecord) -> int:
    assert rec.prompt_tokens is not None
    return rec.prompt_tokens - (rec.cached_tokens or 0)


def test_debug_log_gives_exact_per_request_facts(mlx_env: MlxEnv, mlx_models: MlxModels, tmp_path: Path,
                                                 e2e_timings: dict[str, float]) -> None:
    log_path = tmp_path / "server-debug.log"
    server = MlxServer(mlx_models.default, log_level="DEBUG", log_path=log_path, server=mlx_env.server,
                       hf_hub_cache=mlx_models.hf_hub_cache).start()
    t0 = time.monotonic()
    with server:
        records, store, sink = follow_run(server, log_path, str(mlx_models.second))
    e2e_timings["ietop follows a DEBUG run"] = time.monotonic() - t0
    assert store.sources[0].unparsed_lines == 0
    pairs, conc, got_conc = split_concurrent(records, served(sink))
    checked_ttft = 0
    for rec, req in pairs:
        assert req.prefill_tokens == uncached(rec), rec.name
        if not rec.stream:
            assert (req.prompt_tokens, req.cached_tokens, req.output_tokens) == (
                rec.prompt_tokens, rec.cached_tokens, rec.completion_tokens), rec.name
        elif rec.ttft_s is not None and req.ttft_s is not None:
            assert abs(req.ttft_s - rec.ttft_s) <= max(0.05, 0.1 * rec.ttft_s), (rec.name, req.ttft_s, rec.ttft_s)
            checked_ttft += 1
    assert checked_ttft >= 2
    assert_only_true_sizes(got_conc, conc)

    # The switch: an unload of the default model and a load of the second, then back.
    loads = [ld for ld in sink.records.get("load", []) if ld.status == "ok"]
    assert [ld.model for ld in loads] == [str(mlx_models.second), "default"]
    assert all(ld.duration_s is not None and ld.duration_s > 0 for ld in loads)
    unloads = sink.records.get("unload", [])
    assert [(u.reason, u.model, u.for_model) for u in unloads if u.reason == "switched"] == [
        ("switched", "default", str(mlx_models.second)), ("switched", str(mlx_models.second), "default")]
    switch_req = next(req for rec, req in pairs if rec.name == "switch")
    assert switch_req.cold_load and switch_req.model == str(mlx_models.second)

    # Stopped: the poll is refused, the engine shows down.
    assert store.engines[server.url + "/health"].state == "down"


def test_info_log_gives_the_uncached_prompt_size_and_nothing_more(mlx_env: MlxEnv, mlx_models: MlxModels,
                                                                  tmp_path: Path) -> None:
    log_path = tmp_path / "server-info.log"
    server = MlxServer(mlx_models.default, log_level="INFO", log_path=log_path, server=mlx_env.server,
                       hf_hub_cache=mlx_models.hf_hub_cache).start()
    with server:
        records, store, sink = follow_run(server, log_path, str(mlx_models.second))
    assert store.sources[0].unparsed_lines == 0
    pairs, conc, got_conc = split_concurrent(records, served(sink))
    for rec, req in pairs:
        assert req.prefill_tokens == uncached(rec), rec.name
        facts: dict[str, Any] = {"prompt": req.prompt_tokens, "ttft": req.ttft_s, "out": req.output_tokens}
        assert facts == {"prompt": None, "ttft": None, "out": None}, rec.name
    assert_only_true_sizes(got_conc, conc)
    assert store.engines[server.url + "/health"].state == "down"
