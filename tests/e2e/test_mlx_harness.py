"""Smoke test of the e2e harness: a real mlx_lm.server (INFO) serves the standard request mix."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from mlx_client import CHAT, COMPLETIONS, MlxClient, dump_jsonl, run_request_mix
from mlx_env import MlxEnv, MlxModels
from mlx_server import MlxServer, pid_alive, port_refuses

pytestmark = pytest.mark.e2e


def test_real_mlx_server_serves_the_mix(mlx_env: MlxEnv, mlx_models: MlxModels, e2e_timings: dict[str, float],
                                        tmp_path: Path) -> None:
    log_path = tmp_path / "server.log"
    server = MlxServer(mlx_models.default, log_level="INFO", log_path=log_path, server=mlx_env.server,
                       hf_hub_cache=mlx_models.hf_hub_cache)
    t0 = time.monotonic()
    server.start()
    try:
        e2e_timings["server start → /health 200"] = time.monotonic() - t0
        assert server.url == f"http://127.0.0.1:{server.port}"
        assert pid_alive(server.pid)

        models = httpx.get(server.url + "/v1/models", trust_env=False, timeout=30)
        assert models.status_code == 200
        listed = [m["id"] for m in models.json()["data"]]
        assert mlx_models.hf_repo_id in listed, listed

        t1 = time.monotonic()
        records = run_request_mix(server.url, second_model=str(mlx_models.second))
        e2e_timings["request mix"] = time.monotonic() - t1
        dump_jsonl(records, str(tmp_path / "transcript.jsonl"))
        pid, port = server.pid, server.port
    finally:
        t2 = time.monotonic()
        code = server.stop()
        e2e_timings["server stop (SIGTERM → reaped)"] = time.monotonic() - t2
    assert code == -signal.SIGTERM
    assert server.stop() == code  # idempotent

    # Ground truth: every request succeeded and carries a usage block.
    names = [r.name for r in records]
    assert names[:6] == ["chat", "chat-repeat", "chat-stream", "text", "text-stream", "long"]
    assert names[-2:] == ["switch", "back-to-default"]
    for rec in records:
        assert rec.status == 200, (rec.name, rec.status, rec.error)
        assert rec.usage is not None, rec.name
        assert rec.prompt_tokens is not None and rec.prompt_tokens > 0, (rec.name, rec.usage)
        # the builder suppresses EOS, so greedy decoding always runs to max_tokens
        assert rec.completion_tokens == rec.max_tokens, (rec.name, rec.usage)
        assert rec.t_start <= rec.t_end
        assert rec.path in (CHAT, COMPLETIONS)
        if rec.stream:
            assert rec.ttft_s is not None and rec.ttft_s > 0, rec.name
            assert rec.chunk_times == sorted(rec.chunk_times) and len(rec.chunk_times) >= 2, rec.name
        else:
            assert rec.ttft_s is None and rec.chunk_times == []
    by_name = {r.name: r for r in records}
    assert by_name["chat-repeat"].prompt_tokens == by_name["chat"].prompt_tokens
    assert (by_name["chat-repeat"].cached_tokens or 0) > 0, by_name["chat-repeat"].usage
    assert by_name["long"].prompt_tokens is not None and by_name["long"].prompt_tokens > 2000
    assert by_name["switch"].model == str(mlx_models.second)
    assert by_name["back-to-default"].model is None
    concurrent = [r for r in records if r.concurrent_group == "concurrent"]
    assert len(concurrent) == 4
    assert max(r.t_start for r in concurrent) < min(r.t_end for r in concurrent)  # really overlapped

    # The log is the server's own output.
    log = log_path.read_text()
    assert "Prompt processing progress" in log
    assert "Starting httpd" in log

    # Stopped by PID: the process is gone and nothing listens on the port.
    assert not pid_alive(pid)
    assert port_refuses(port)

    print()
    for rec in records:
        ttft = f"{rec.ttft_s * 1000:7.1f} ms" if rec.ttft_s is not None else "      -   "
        print(f"  {rec.name:<16} {rec.status} stream={rec.stream!s:<5} prompt={rec.prompt_tokens:>5} "
              f"cached={rec.cached_tokens!s:>5} completion={rec.completion_tokens:>3} ttft={ttft} "
              f"elapsed={rec.elapsed_s:6.2f} s")
    for name, seconds in e2e_timings.items():
        print(f"  {name:<45} {seconds:8.2f} s")


def test_debug_level_and_repo_id_via_factory(mlx_server_factory: Callable[..., MlxServer], mlx_models: MlxModels,
                                            tmp_path: Path) -> None:
    log_path = tmp_path / "debug.log"
    server = mlx_server_factory(log_level="DEBUG", log_path=log_path)
    with MlxClient(server.url) as client:
        rec = client.chat("debug-stream", [{"role": "user", "content": "Count to three."}], max_tokens=5, stream=True)
        by_repo = client.chat("by-repo-id", [{"role": "user", "content": "hi"}], max_tokens=3,
                              model=mlx_models.hf_repo_id)
    assert rec.status == 200 and rec.usage is not None and rec.completion_tokens == 5
    assert by_repo.status == 200 and by_repo.completion_tokens == 3, by_repo.error
    server.stop()
    log = log_path.read_text()
    assert " - DEBUG - " in log
    assert "Prompt processing progress" in log
    assert mlx_models.hf_repo_id in log  # the DEBUG request body names the model
