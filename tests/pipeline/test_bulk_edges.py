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


def test_counted_vllm_probes_move_the_files_clock_as_the_lines_would(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Found by the fuzz campaign (run 5): a vLLM log whose clock goes back (12-11, then 09-15) merged with a
    proxy JSONL dated between the two. Per line, the uvicorn probe takes the 12-11 record's time and holds the
    file's clock there, so the later 09-15 request follows the proxy's; the columnar reader's probe count had no
    time, so that request came first. The documents must list the same requests in the same order."""
    proxy = tmp_path / "proxy.jsonl"
    proxy.write_text('{"method":"POST","path":"/v1/chat/completions","status":200,"ttft_s":null,"e2e_s":1.0,'
                     '"bytes_down":0,"ts":"2026-11-29T12:00:00"}\n')
    vllm = tmp_path / "vllm.log"
    vllm.write_text('( pid=1) WARNING 12-11 20:29:59 y:1]\n( pid=7) INFO:  - "GET / HTTP/1" 200\n'
                    '( pid=7) INFO 09-15 07:44:45 y:1]\nINFO: - "T s HTTP/1" 200\n')
    folded = _doc(capsys, str(proxy), str(vllm))
    listed = _doc(capsys, "--all-requests", str(proxy), str(vllm))
    order = [(r["source"]["path"], r["source"]["line"]) for r in listed["requests"] if r["path"] != "/"]
    assert [(r["source"]["path"], r["source"]["line"]) for r in folded["requests"]] == order
    assert order[0][0] == str(proxy)
