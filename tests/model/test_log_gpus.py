"""The Memory panel of a replay draws each device from the engine's own log: the newest memory figure the
log gave and when (`gpu memory` before a load, `updated VRAM…` with models resident, else start-up)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from ietop.model.live import log_gpus
from ietop.pipeline.ingest import run_files
from ietop.pipeline.setup import new_store
from parsers.ollama.messages import human_bytes
from tests.tui.support import INCIDENT, ROOT

GIB = 1 << 30


def _gpus_after(tmp_path: Path, lines: int) -> list[tuple[str, int | None, int | None, str | None]]:
    part = tmp_path / "head.log"
    part.write_text("".join(INCIDENT.read_text().splitlines(keepends=True)[:lines]))
    store, _view, _evidence = new_store()
    run_files(store, [str(part)])
    return [(g.name, g.total_bytes, g.used_bytes, g.at and g.at.strftime("%H:%M:%S")) for g in log_gpus(store)]


def _gib(text: str) -> int:
    n = human_bytes(text)
    assert n is not None
    return n


def test_the_incident_gpu_follows_the_scheduler_lines(tmp_path: Path) -> None:
    name, total = "NVIDIA GeForce RTX 4090", _gib("24.0 GiB")
    # Start-up: `inference compute … available="23.6 GiB"` (line 10).
    assert _gpus_after(tmp_path, 10) == [(name, total, total - _gib("23.6 GiB"), "14:00:01")]
    # Before the first load: `gpu memory … free="23.6 GiB"` (line 20): the device's free memory, not the
    # scheduler's `available` (free less its minimum).
    assert _gpus_after(tmp_path, 20) == [(name, total, total - _gib("23.6 GiB"), "14:01:12")]
    # qwen3:8b resident, gemma3:27b asked for: `updated VRAM … available="17.0 GiB"` (line 229).
    assert _gpus_after(tmp_path, 229) == [(name, total, total - _gib("17.0 GiB"), "14:03:05")]
    # gemma3:27b resident, qwen3:8b asked for again (line 435).
    assert _gpus_after(tmp_path, 435) == [(name, total, total - _gib("4.2 GiB"), "14:05:40")]
    # The whole log: the last `gpu memory`, after gemma3:27b was evicted (line 454).
    assert _gpus_after(tmp_path, 10_000) == [(name, total, total - _gib("23.6 GiB"), "14:05:41")]


def test_a_log_that_begins_after_start_up() -> None:
    # Three GPUs of a multi-GPU box, only in `updated VRAM` lines (sample 027: no start-up in the excerpt):
    # named by their ids, each with its own total and what the scheduler left.
    store, _view, _evidence = new_store()
    run_files(store, [str(ROOT / "fixtures/ollama/027-v05-journald-it-locale-multigpu-stderr-merge.log")])
    gpus = log_gpus(store)
    assert [(g.name[:12], g.total_bytes, g.used_bytes) for g in gpus] == [
        ("GPU-a1c88671", _gib("47.5 GiB"), _gib("47.5 GiB") - _gib("38.6 GiB")),
        ("GPU-8d08743b", _gib("47.5 GiB"), _gib("47.5 GiB") - _gib("36.1 GiB")),
        ("GPU-f80f1c32", _gib("47.5 GiB"), _gib("47.5 GiB") - _gib("47.2 GiB")),
    ]
    assert gpus[0].at == datetime(2025, 3, 15, 10, 39, 7, 136000, tzinfo=timezone.utc)
    # `gpu memory` names no total (sample 006, a Mac's Metal device): nothing to draw it against.
    store, _view, _evidence = new_store()
    run_files(store, [str(ROOT / "fixtures/ollama/006-v016-macos-metal-embed-load-new-engine.log")])
    assert store.gpu_memory and log_gpus(store) == ()
