"""Which Ollama models the Residency panel shows once `/api/ps` answers: what the server holds now, not what
its log loaded. At INFO Ollama writes no line when a keep-alive expires, so a model the log saw load would
otherwise stay "resident" for the rest of the session.

The log is the bundled incident (Ollama 0.32.13), cut where qwen3:8b is resident; the `/api/ps` bodies are
the recorded ones in fixtures/ollama/api."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from ietop.model.live import LiveView
from ietop.model.store import Store
from ietop.pipeline.ingest import run_files
from ietop.pipeline.polling import apply_poll
from ietop.pipeline.setup import new_store
from tests.tui.support import INCIDENT, ROOT

API = ROOT / "fixtures" / "ollama" / "api"
BASE = "http://127.0.0.1:11434"
NOW = datetime(2026, 11, 28, 14, 5, tzinfo=timezone.utc)


def _loaded(tmp_path: Path) -> tuple[Store, LiveView]:
    head = tmp_path / "head.log"
    head.write_text("".join(INCIDENT.read_text().splitlines(keepends=True)[:116]))
    store, view, _evidence = new_store()
    run_files(store, [str(head)])
    return store, view


def _resident(store: Store, view: LiveView) -> list[tuple[str, str]]:
    return [(r.model, r.source) for r in view.snapshot(store.now, 10**6).resident]


def _ps(store: Store, body: str | None) -> None:
    if body is None:
        apply_poll(store, "ollama", "ps", BASE, None, b"", "connection refused", NOW)
    else:
        apply_poll(store, "ollama", "ps", BASE, 200, (API / body).read_bytes(), None, NOW)


def test_log_rows_until_the_server_answers(tmp_path: Path) -> None:
    store, view = _loaded(tmp_path)
    assert _resident(store, view) == [("qwen3:8b", "log")]
    _ps(store, None)  # a poller that never reached a server: the log is all there is
    assert _resident(store, view) == [("qwen3:8b", "log")]


def test_what_ps_lists_replaces_what_the_log_loaded(tmp_path: Path) -> None:
    store, view = _loaded(tmp_path)
    _ps(store, "ps-empty.json")  # the keep-alive ran out, unlogged at INFO
    assert _resident(store, view) == []
    _ps(store, "ps-v0.10-two-models.json")
    listed = _resident(store, view)
    assert listed and all(source == "api/ps" for _model, source in listed)


def test_a_server_that_went_down_holds_nothing(tmp_path: Path) -> None:
    store, view = _loaded(tmp_path)
    _ps(store, "ps-v0.10-two-models.json")
    assert _resident(store, view)
    _ps(store, None)
    assert _resident(store, view) == []
