"""The live dashboard against a real mlx_lm.server: `ietop --mlx URL --log mlx:PATH`, exactly as a user
starts it, while a client sends the request mix. The panels must show the engine up, the requests with
the facts the DEBUG log gives, the model switch as loads, and the server process found by its port."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from mlx_client import MlxClient, RequestRecord, run_request_mix
from mlx_env import MlxEnv, MlxModels
from mlx_server import MlxServer

from ietop.pipeline.discover import plan
from ietop.tui.run import live_app
from ietop.tui.widgets.engines import EnginesBar
from ietop.tui.widgets.requests import RequestsTable

pytestmark = pytest.mark.e2e


async def test_dashboard_follows_a_real_mlx_server(mlx_env: MlxEnv, mlx_models: MlxModels, tmp_path: Path) -> None:
    log_path = tmp_path / "server.log"
    server = MlxServer(mlx_models.default, log_level="DEBUG", log_path=log_path, server=mlx_env.server,
                       hf_hub_cache=mlx_models.hf_hub_cache).start()
    with server:
        app = live_app(plan([], [], [server.url], [f"mlx:{log_path}"], [], []), poll_interval=0.5)
        records: list[RequestRecord] = []
        async with app.run_test(size=(160, 48)) as pilot:
            client = threading.Thread(target=lambda: records.extend(
                run_request_mix(server.url, second_model=str(mlx_models.second), long_sentences=10)))
            client.start()
            while client.is_alive():
                await pilot.pause(0.2)
            client.join()
            inference = [r for r in records if r.status == 200]
            for _ in range(100):  # the last access lines and facts arrive after the client is done
                await pilot.pause(0.1)
                app.refresh_view()
                if app.snap is not None and len([r for r in app.snap.requests if r.status == 200]) >= len(inference):
                    break
            snap = app.snap
            assert snap is not None
            header = str(app.query_one(EnginesBar).render())
            assert "mlx up" in header and server.url in header
            served = [r for r in app.query_one(RequestsTable).records if r.status == 200]
            assert len(served) == len(inference)
            # Non-stream requests: the DEBUG usage gives exact prompt and output tokens; match by count. The
            # concurrent ones were admitted together with identical bodies: whose usage block is whose cannot be
            # told, so theirs may be unknown, never another request's.
            want = sorted((r.prompt_tokens, r.completion_tokens) for r in inference
                          if not r.stream and not r.concurrent_group)
            together = [(r.prompt_tokens, r.completion_tokens) for r in inference if r.concurrent_group]
            got = sorted((r.prompt_tokens, r.output_tokens) for r in served if (r.prompt_tokens, r.output_tokens) in want)
            assert got == want
            stated = [(r.prompt_tokens, r.output_tokens) for r in served
                      if r.prompt_tokens is not None and (r.prompt_tokens, r.output_tokens) not in want]
            assert all(pair in together for pair in stated), (stated, together)
            # The model switch of the mix, as loads and switches in the events panel (paths shown by name).
            second = Path(mlx_models.second).name
            assert [(e.kind, e.model) for e in reversed(snap.events)] == [
                ("switch", "default"), ("load", second), ("switch", second), ("load", "default")]
            # The server process, found by its listening port, with its RSS.
            for _ in range(50):
                if app.hardware is not None and app.hardware.engines:
                    break
                await pilot.pause(0.1)
            assert app.hardware is not None
            assert [(e.engine, e.pid) for e in app.hardware.engines] == [("mlx", server.pid)]
            assert (app.hardware.engines[0].rss_bytes or 0) > 10 << 20
        await asyncio.sleep(0)


async def test_dashboard_started_after_the_server_reads_back_its_run(mlx_env: MlxEnv, mlx_models: MlxModels,
                                                                     tmp_path: Path) -> None:
    """A user opens ietop on a server that has been serving: what it did since it started is on screen at once
    (the log is read back to the server's `Starting httpd` line), and the model it loaded is resident."""
    log_path = tmp_path / "server.log"
    server = MlxServer(mlx_models.default, log_level="DEBUG", log_path=log_path, server=mlx_env.server,
                       hf_hub_cache=mlx_models.hf_hub_cache).start()
    with server:
        with MlxClient(server.url) as client:
            before = [client.chat(f"before-{i}", [{"role": "user", "content": "Say hi."}], max_tokens=4)
                      for i in range(2)]
        assert [r.status for r in before] == [200, 200]
        app = live_app(plan([], [], [server.url], [f"mlx:{log_path}"], [], []), poll_interval=0.5)
        async with app.run_test(size=(160, 48)) as pilot:
            for _ in range(100):
                await pilot.pause(0.1)
                app.refresh_view()
                if app.snap is not None and len([r for r in app.snap.requests if r.status == 200]) >= 2:
                    break
            served = [r for r in app.query_one(RequestsTable).records if r.status == 200]
            assert sorted((r.prompt_tokens, r.output_tokens) for r in served) == sorted(
                (r.prompt_tokens, r.completion_tokens) for r in before)
            assert app.snap is not None
            assert [r.engine for r in app.snap.resident] == ["mlx"]
        await asyncio.sleep(0)
