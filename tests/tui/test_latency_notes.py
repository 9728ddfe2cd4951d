"""The Latency panel's notes under its table: where the figures come from, or why a row has none. A note that
is about some rows only names them: a log with access lines but no per-request timings, read back on a live
dashboard, has end-to-end times from before the window and no TTFT or ITL at all; the panel said both "no
timings in these sources" and "none finished in this window" without saying which row each was about.

Logs: fixtures/ollama/039 (Ollama 0.7, macOS, three chats as GIN access lines only) and the bundled incident
(Ollama 0.32.13, with llama-server timings)."""

from __future__ import annotations

from ietop.pipeline.ingest import run_files
from ietop.pipeline.setup import new_store
from ietop.tui.widgets.latency import latency_notes
from tests.tui.support import INCIDENT, ROOT

GIN_ONLY = ROOT / "fixtures" / "ollama" / "039-v07-macos-sequential-chat-gin.log"


def _notes(path: str, later_s: float) -> list[str]:
    store, view, _evidence = new_store()
    run_files(store, [path])
    return latency_notes(view.snapshot(store.now + later_s, 900).latency)


def test_a_note_about_some_rows_names_them() -> None:
    assert _notes(str(GIN_ONLY), 86_400) == [
        "TTFT, ITL: no timings in these sources (see ?)",
        "E2E: none finished in this window; older ones are in Requests",
    ]


def test_a_note_about_every_row_names_none() -> None:
    assert _notes(str(GIN_ONLY), 0) == ["TTFT, ITL: no timings in these sources (see ?)"]
    assert _notes(str(INCIDENT), 86_400) == ["none finished in this window; older ones are in Requests"]
    assert _notes(str(INCIDENT), 0) == []
