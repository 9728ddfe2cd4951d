"""Inputs where polars and the Python parsers could disagree, found by bench/fuzz_campaign.py: the columnar
reader must give what the per-line one gives (issue 21)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ietop.cli import main
from ietop.pipeline.bulk.lines import window_lines
from parsers.text.framing import LineSplitter

BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize("data", [BOM, BOM + b"K", BOM + b"a\nb\n", b"a\n" + BOM + b"b\n"])
def test_a_byte_order_mark_is_kept_as_the_splitter_keeps_it(data: bytes) -> None:
    splitter = LineSplitter()
    want = splitter.feed_texts(data) + splitter.flush_texts()
    assert window_lines(data).to_list() == want


def _doc(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["analyze", "--json", *argv]) == 0
    doc: dict = json.loads(capsys.readouterr().out)
    return doc


@pytest.mark.parametrize(("name", "content", "engine"), [
    ("bom.log", BOM, "ollama"),
    ("uvicorn-1e.log", b'( pid=7) INFO:  - "GET \x1e HTTP/1" 200\n', "vllm"),
    ("uvicorn-no-client.log", b'INFO:      - "GET /health HTTP/1.1" 200 OK\n', "vllm"),
])
def test_columnar_equals_per_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: bytes,
                                  engine: str) -> None:
    log = tmp_path / name
    log.write_bytes(content)
    folded = _doc(capsys, "--engine", engine, str(log))
    listed = _doc(capsys, "--engine", engine, "--all-requests", str(log))
    assert folded["sources"] == listed["sources"]
    assert folded["counts"] == listed["counts"]
    assert sum(p["count"] for p in folded["probes"]) + len(folded["requests"]) == len(listed["requests"])
