"""A request's story (issue 23): where its time went, each known part citing a line that shows it, and the
cold start's chain (the load it waited for, the eviction made for it, the request that triggered it), on the
bundled incident and on real Ollama, MLX and vLLM logs."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from ietop.cli import main
from ietop.model.store import ListSink, Store
from ietop.pipeline.ingest import run_files

ROOT = Path(__file__).resolve().parents[2]
INCIDENT = ROOT / "ietop" / "demo" / "incident.log"
LOGS = [
    INCIDENT,
    ROOT / "fixtures" / "ollama" / "051-v05-journald-nohost-markdown-bold-abort-499.log",
    ROOT / "fixtures" / "ollama" / "015-v011-docker-embeddinggemma-second-load-v1-chat.log",
    ROOT / "fixtures" / "ollama" / "004-v06-embeddings-truncation.log",
    ROOT / "fixtures" / "mlx" / "debug-server.stderr",
    ROOT / "fixtures" / "vllm" / "015-v1-0.15-request-logging-info.txt",
]
PARTS = ("queued_s", "load_wait_s", "prefill_s", "decode_s", "other_s")
STAMP = re.compile(r"(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:[.,](\d+))?")
NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _doc(capsys: pytest.CaptureFixture[str], path: Path) -> dict[str, Any]:
    code = main(["analyze", "--json", str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def _wall(text: str) -> datetime | None:
    """The first timestamp in a line (or an ISO time), as naive wall-clock time: the log's own zone."""
    m = STAMP.search(text)
    if m is None:
        return None
    frac = (m.group(3) or "0")[:6].ljust(6, "0")
    return datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}.{frac}")


def _shows(line: str, value: float) -> bool:
    """The number appears in the line, in seconds or in milliseconds."""
    for x in (float(n) for n in NUMBER.findall(line)):
        if abs(x - value) <= max(0.0015, 0.005 * value) or abs(x - value * 1000) <= max(1.5, 5 * value):
            return True
    return False


def _within_lifetime(line: str, req: dict[str, Any]) -> bool:
    """The line's timestamp falls inside the request's lifetime (access lines have one-second resolution): a
    span that ends on that line, such as a wait for a load that finished there or a decode's last token."""
    at, stamp = _wall(line), _wall(req["time"])
    if at is None or stamp is None or req["latency_s"] is None:
        return False
    # An access line is stamped when its request ends; mlx_lm's request record, when it arrives.
    latency: float = req["latency_s"]
    before_end = (stamp - at).total_seconds() + (latency if req["engine"] == "mlx" else 0.0)
    return -1.1 <= before_end <= latency + 1.1


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").split("\n")


def _stories(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in doc["requests"] if r["inference"]]


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_parts_sum_to_latency_and_cite_lines_that_show_them(capsys: pytest.CaptureFixture[str], log: Path) -> None:
    doc = _doc(capsys, log)
    lines = _lines(log)
    stories = _stories(doc)
    assert stories, "the log has inference requests"
    for req in doc["requests"]:
        assert (req["breakdown"] is not None) == req["inference"]  # probes: null
    for req in stories:
        b = req["breakdown"]
        known = {p: b[p] for p in PARTS if b[p] is not None}
        for part in PARTS:
            assert (b[part] is None) == (part in b["unknown"]), (part, b)  # null always says why
        if req["latency_s"] is not None:
            assert sum(known.values()) <= req["latency_s"] * 1.05 + 1e-6, req
            if len(known) == len(PARTS):
                assert sum(known.values()) == pytest.approx(req["latency_s"], rel=0.05)
        assert all(v >= 0 for v in known.values())
        for part, value in known.items():
            if value == 0:
                continue
            cited = b["evidence"][part]
            assert cited["path"] == str(log) or cited["path"].endswith(log.name)
            line = lines[cited["line"] - 1]
            trigger = any(s["step"] == "trigger" and s["this_request"] for s in b["chain"])
            if part == "load_wait_s" and trigger and req["status"] < 400 and req["engine"] != "mlx":
                # Its trigger waited the whole load, whose duration the done line prints (mlx_lm prints none:
                # ietop times a switch from the request's arrival to that line, which the else checks).
                assert _shows(line, value), (part, value, line)
            else:
                assert _shows(line, value) or _within_lifetime(line, req), (part, value, line)
        if b["dominant"] is not None:
            assert known[b["dominant"]] == max(known.values())


def _slowest(doc: dict[str, Any]) -> dict[str, Any]:
    return max(_stories(doc), key=lambda r: r["latency_s"] or 0)


def test_slowest_demo_request_tells_its_cold_start(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc(capsys, INCIDENT)
    lines = _lines(INCIDENT)
    req = _slowest(doc)
    b = req["breakdown"]
    assert req["model"] == "gemma3:27b" and req["latency_s"] > 30
    steps = [s["step"] for s in b["chain"]]
    assert steps[0] == "load" and steps[-1] == "trigger" and "eviction" in steps
    load, evict, trig = b["chain"][0], b["chain"][steps.index("eviction")], b["chain"][-1]
    # The load it waited for ends on the line that gives its duration, which is its load wait.
    load_line = lines[load["source"]["line"] - 1]
    assert load["model"] == "gemma3:27b" and "started in" in load_line and _shows(load_line, b["load_wait_s"])
    # The eviction that made room for gemma3:27b: the first "evicting" decision before the load.
    evicting = next(i for i, text in enumerate(lines, 1) if "evicting" in text)
    assert evict["source"]["line"] == evicting < load["source"]["line"]
    assert evict["model"] == "qwen3:8b" and evict["for_model"] == "gemma3:27b"
    # It triggered this load itself; the first attempt, aborted, was the 499's.
    assert trig["this_request"] and trig["source"] == req["source"]
    abort = next(r for r in doc["requests"] if r["status"] == 499)
    earlier = b["chain"][steps.index("earlier_attempt")]
    assert earlier["status"] == "failed" and earlier["trigger"]["source"] == abort["source"]
    # Most of it was decoding its 640 tokens; the decode cites the eval timing line.
    assert b["dominant"] == "decode_s"
    eval_line = lines[b["evidence"]["decode_s"]["line"] - 1]
    assert "eval time" in eval_line and _shows(eval_line, b["decode_s"])


def test_demo_499_gave_up_during_the_gemma_load(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc(capsys, INCIDENT)
    lines = _lines(INCIDENT)
    abort = next(r for r in doc["requests"] if r["status"] == 499)
    b = abort["breakdown"]
    assert abort["model"] == "gemma3:27b"
    assert abort["cold_load"] is False  # it never got the loaded model
    load = b["chain"][0]
    assert load["step"] == "load" and load["model"] == "gemma3:27b" and load["status"] == "failed"
    assert b["dominant"] == "load_wait_s" and b["load_wait_s"] <= abort["latency_s"]
    assert b["load_wait_s"] > 0.9 * abort["latency_s"]
    assert _within_lifetime(lines[b["evidence"]["load_wait_s"]["line"] - 1], abort)
    assert b["prefill_s"] == 0 and b["decode_s"] == 0


def test_json_line_equals_as_dict() -> None:
    sink = ListSink()
    run_files(Store(sink), [str(INCIDENT)])
    requests = sink.records["request"]
    assert any(r.inference for r in requests) and any(not r.inference for r in requests)
    written = [json.loads(req.json_line([str(INCIDENT)])) for req in requests]
    assert written == [req.as_dict([str(INCIDENT)]) for req in requests]
    assert all((w["breakdown"] is None) != w["inference"] for w in written)
    assert any(w["breakdown"] and w["breakdown"]["chain"] for w in written)


def test_json_text_is_compact_and_nulls_impossible_numbers() -> None:
    """`json_text` (the breakdown's chain, every report) is the C encoder's compact JSON; a NaN or an infinity,
    which it refuses, is written as null."""
    from ietop.model.records import json_text

    plain = {"chain": [{"step": "load", "s": 1.25, "ref": {"path": "ö.log", "line": 3}}], "ok": True, "n": None}
    assert json_text(plain) == json.dumps(plain, ensure_ascii=False, separators=(",", ":"))
    odd = {"s": float("nan"), "t": [float("inf"), 2.0], "u": "\"quoted\"\n"}
    assert json_text(odd) == '{"s":null,"t":[null,2.0],"u":"\\"quoted\\"\\n"}'
