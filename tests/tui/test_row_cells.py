"""What the Requests and Residency widgets make of the records: names and times as a user reads them."""

from __future__ import annotations

from ietop.model.snapshot import ResidentRow
from ietop.pipeline.feeds import Evidence, TailParse
from ietop.pipeline.setup import new_store
from ietop.tui.widgets.requests import request_cells
from ietop.tui.widgets.residency import since_process_start
from tests.tui.support import ROOT

# Our own real mlx_lm.server run (fixtures/mlx/README.md): three chats to the default model, then a stream
# to a second model asked for by its path.
LOG = ROOT / "fixtures" / "mlx" / "real-stream-no-usage-server.log"


def test_requests_name_a_path_named_model_by_its_last_element() -> None:
    store, view, _evidence = new_store()
    tail = TailParse(store, str(LOG), "mlx", Evidence())
    store.apply_all(tail.parse(LOG.read_text().splitlines()))
    snap = view.snapshot(store.now, 10**6)
    assert [request_cells(r, snap.model_name(r.model))[2][0] for r in snap.requests] == ["tiny-b", *["default"] * 3]
    assert snap.requests[0].model is not None and snap.requests[0].model.endswith("/tiny-b")  # kept whole


def test_a_polled_server_is_resident_since_its_process_started() -> None:
    # ietop started 16 minutes after the server: the row /v1/models gave was "resident 9 s" (since ietop
    # first saw it up), next to a header saying "up 16m".
    polled = ResidentRow("vllm", "tinyllm", "models", ctx=512, loaded_since=1_000.0)
    logged = ResidentRow("vllm", "tinyllm", "log", loaded_since=1_000.0)
    ollama = ResidentRow("ollama", "qwen3:8b", "api/ps", loaded_since=1_000.0)
    rows = since_process_start([polled, logged, ollama], {"vllm": 40.0, "ollama": 10.0})
    assert [r.loaded_since for r in rows] == [40.0, 1_000.0, 1_000.0]
    assert since_process_start([polled], {}) == [polled]  # a replay: no process on this host
