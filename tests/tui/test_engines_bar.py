"""The header's engine segment reads as `uptime` says it: `ollama up 5m v0.12.3`, not `ollama up v0.12.3 up 5m`
(`mlx up up 5m` for an engine with no version). The answers are the recorded ones in fixtures/ollama/api."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ietop.pipeline.polling import apply_poll
from ietop.pipeline.setup import new_store
from ietop.tui.widgets.engines import header_text
from tests.tui.support import ROOT

API = ROOT / "fixtures" / "ollama" / "api"
BASE = "http://127.0.0.1:11434"
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


def test_up_then_uptime_then_version() -> None:
    store, view, _evidence = new_store()
    for kind, body in (("version", "version-0.12.3.json"), ("ps", "ps-empty.json")):
        apply_poll(store, "ollama", kind, BASE, 200, (API / body).read_bytes(), None, T0)
    later = T0 + timedelta(minutes=5)
    apply_poll(store, "ollama", "ps", BASE, 200, (API / "ps-empty.json").read_bytes(), None, later)
    header = header_text(view.snapshot(later.timestamp(), 300)).plain
    assert header.startswith(f"ollama up 5m v0.12.3 {BASE}"), header
