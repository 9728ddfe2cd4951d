"""The configured context a Residency row shows next to the effective one (`4096/8192`). Ollama >= 0.15.5
writes OLLAMA_CONTEXT_LENGTH:0 for "pick by VRAM" and then logs the default it picked: the row showed
`4096/0`. The claim is now what the context hint already used: the setting, else the logged default.

SYNTHETIC compositions of real lines: the bundled incident (Ollama 0.32.13), cut where qwen3:8b is resident.
Its `server config` (line 1) says OLLAMA_CONTEXT_LENGTH:8192, rewritten here; its line 11 is the server's
`vram-based default context ... default_num_ctx=32768`, dropped in one case."""

from __future__ import annotations

from pathlib import Path

from ietop.pipeline.ingest import run_files
from ietop.pipeline.setup import new_store
from tests.tui.support import INCIDENT


def _ctx(tmp_path: Path, setting: str, *, default_logged: bool = True) -> tuple[int | None, int | None]:
    lines = INCIDENT.read_text().splitlines(keepends=True)[:116]
    assert "OLLAMA_CONTEXT_LENGTH:8192" in lines[0] and "default_num_ctx=32768" in lines[10]
    lines[0] = lines[0].replace("OLLAMA_CONTEXT_LENGTH:8192", f"OLLAMA_CONTEXT_LENGTH:{setting}")
    if not default_logged:
        del lines[10]
    log = tmp_path / "server.log"
    log.write_text("".join(lines))
    store, view, _evidence = new_store()
    run_files(store, [str(log)])
    [row] = view.snapshot(store.now, 10**6).resident
    return row.ctx, row.ctx_configured


def test_the_setting_when_it_is_set(tmp_path: Path) -> None:
    assert _ctx(tmp_path, "8192") == (4096, 8192)


def test_zero_takes_the_default_the_server_logged(tmp_path: Path) -> None:
    assert _ctx(tmp_path, "0") == (4096, 32768)


def test_zero_and_no_default_logged_is_no_claim(tmp_path: Path) -> None:
    assert _ctx(tmp_path, "0", default_logged=False) == (4096, None)
