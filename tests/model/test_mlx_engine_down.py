"""An mlx_lm.server that stops answering `/health` (connection refused) holds nothing: its model is no
longer shown resident (issue 19: it stayed on screen as if loaded). The log is our own real run
(fixtures/mlx/README.md: a switch to `tiny-b`, which is resident at the end); the poll answers are the
recorded shapes of reference/mlx-formats.md §7."""

from __future__ import annotations

from datetime import datetime, timezone

from ietop.model.live import LiveView
from ietop.model.store import Store
from ietop.pipeline.feeds import Evidence, TailParse
from ietop.pipeline.setup import new_store
from parsers.api.engine_api import mlx_health
from tests.tui.support import ROOT

LOG = ROOT / "fixtures" / "mlx" / "real-stream-no-usage-server.log"
URL = "http://127.0.0.1:8080"


def _replayed() -> tuple[Store, LiveView]:
    store, view, _evidence = new_store()
    tail = TailParse(store, str(LOG), "mlx", Evidence())
    store.apply_all(tail.parse(LOG.read_text().splitlines()))
    return store, view


def _poll(store: Store, status: int | None, body: bytes, error: str | None) -> None:
    now = store.now + 5
    store.apply_poll(now, mlx_health(URL + "/health", datetime.fromtimestamp(now, timezone.utc), status, body, error))


def test_a_server_that_refuses_health_holds_no_model() -> None:
    store, view = _replayed()
    _poll(store, 200, b'{"status": "ok"}', None)
    snap = view.snapshot(store.now, 10**6)
    assert [(r.engine, r.model) for r in snap.resident] == [("mlx", "tiny-b")]
    _poll(store, None, b"", "refused")
    snap = view.snapshot(store.now, 10**6)
    assert list(snap.resident) == []
    assert any("stopped" in e.text and "tiny-b" in e.text for e in snap.events), [e.text for e in snap.events]


def test_a_timeout_is_not_a_stop() -> None:
    store, view = _replayed()
    _poll(store, None, b"", "timeout")
    snap = view.snapshot(store.now, 10**6)
    assert [(r.engine, r.model) for r in snap.resident] == [("mlx", "tiny-b")]
