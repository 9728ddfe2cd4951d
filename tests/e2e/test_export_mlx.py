"""`ietop export` following a real mlx_lm.server while a client sends the request mix, scraped every second by a
real Prometheus (Debian's package): once the client is done, Prometheus's sums equal `ietop analyze --json` on
the server's log, and the engine is up under its own address."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mlx_client import run_request_mix
from mlx_env import MlxEnv, MlxModels
from mlx_server import MlxServer

from tests.e2e_support.procs import free_port
from tests.export.export_support import ROOT, analyze_sums
from tests.export.prometheus_support import needs_prometheus, running_child, running_prometheus

pytestmark = [pytest.mark.e2e, needs_prometheus]


def test_prometheus_follows_a_real_mlx_server(mlx_env: MlxEnv, mlx_models: MlxModels, tmp_path: Path) -> None:
    log_path = tmp_path / "server.log"
    server = MlxServer(mlx_models.default, log_level="DEBUG", log_path=log_path, server=mlx_env.server,
                       hf_hub_cache=mlx_models.hf_hub_cache).start()
    port = free_port()
    argv = [sys.executable, "-m", "ietop", "export", "--mlx", server.url, "--log", f"mlx:{log_path}",
            "--interval", "1", "--listen", f"127.0.0.1:{port}"]
    with server, running_child(argv, ready_url=f"http://127.0.0.1:{port}/metrics", logs=tmp_path, cwd=ROOT), \
            running_prometheus(tmp_path / "prom", [f"127.0.0.1:{port}"]) as prom:
        prom.wait_for_scrapes()
        records = run_request_mix(server.url, second_model=str(mlx_models.second), long_sentences=10)
        assert any(r.status == 200 for r in records)
        want = analyze_sums([log_path])
        assert want["ietop_requests_total"] >= len([r for r in records if r.status == 200])
        for name, value in want.items():
            prom.wait_for_value(f"sum({name}) or vector(0)", value)
        instance = server.url.removeprefix("http://")
        assert prom.value(f'ietop_engine_up{{engine="mlx",instance="{instance}"}}') == 1.0
