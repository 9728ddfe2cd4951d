"""The columnar reader prepares the next window on a worker thread while this one's rare lines are parsed
(`ietop.pipeline.bulk.stream._ahead`). The facts are the differential tests' business
(tests/pipeline/test_bulk_differential.py); here: the worker never outlives the reading, and the windows come
out in file order, all of them, with an error where the reading failed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ietop.model.probes import ProbeTable
from ietop.model.store import Store
from ietop.pipeline.bulk import lines as bulk_lines
from ietop.pipeline.bulk import stream as bulk_stream
from ietop.pipeline.ingest import open_inputs

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "fixtures" / "ollama" / "007-v05-truncation-gin-api-ps-polling.log"


def _workers() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("ietop-window")}


def test_windows_come_in_order_and_the_worker_ends_with_them() -> None:
    before = _workers()  # another test's reader, not yet collected, is none of this one's business
    datas = [f"{i}\n".encode() * (i + 1) for i in range(20)]
    seen = list(bulk_stream._ahead(datas, bulk_stream._prepare_ollama))
    assert [size for size, _ in seen] == [len(d) for d in datas]
    assert [ready.lines.to_list() for _, ready in seen] == [[str(i)] * (i + 1) for i in range(20)]
    assert _workers() <= before


def test_a_reader_closed_early_leaves_no_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk_lines, "WINDOW", 4 << 10)  # many windows from a small real log
    before = _workers()
    store = Store(lambda kind, record: None)
    (inp,) = open_inputs(store, [str(LOG)])
    events = bulk_stream.bulk_file_events(inp, ProbeTable())
    next(events)
    assert _workers() - before, "the next window is being prepared"
    events.close()
    assert _workers() <= before


def test_a_failed_read_comes_after_every_window_read_before_it() -> None:
    def datas() -> Iterator[bytes]:
        yield b"a\n"
        yield b"b\n"
        raise OSError("device gone")

    got: list[list[str]] = []
    before = _workers()

    def read() -> None:
        for _, ready in bulk_stream._ahead(datas(), bulk_stream._prepare_ollama):
            got.append(ready.lines.to_list())

    with pytest.raises(OSError, match="device gone"):
        read()
    assert got == [["a"], ["b"]]
    assert _workers() <= before
