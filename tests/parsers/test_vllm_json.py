"""vLLM logs written by a JSON formatter (vLLM's own JSON format, or a python-json-logger config given by
`VLLM_LOGGING_CONFIG_PATH`) read as their text twins do. fixtures/vllm/synthetic-json-basic-server.log is SYNTHETIC:
the real run of real-basic-server.log re-wrapped by tests/parsers/rewrap_vllm_json.py (fixtures/vllm/README.md)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ietop.cli import main
from parsers import events as ev
from parsers.detect import detect_engine
from parsers.vllm.log import VllmParser
from tests.parsers.rewrap_vllm_json import rewrap
from tests.parsers.test_vllm_golden import FIX, parse_file

TEXT = "real-basic-server.log"
JSON_LOG = "synthetic-json-basic-server.log"


def test_the_fixture_is_the_real_log_rewrapped() -> None:
    real = (FIX / TEXT).read_text().splitlines()
    assert (FIX / JSON_LOG).read_text().splitlines() == rewrap(real, 2026)


def test_json_records_give_the_events_of_their_text_twins() -> None:
    _, text = parse_file(TEXT, year=2026)
    _, from_json = parse_file(JSON_LOG)  # the year is the record's own
    assert not [e for e in from_json if isinstance(e, ev.Unparsed)]
    # The same events in the same order; line numbers differ (a traceback is one JSON record).
    assert [replace(e, line=0) for e in from_json] == [replace(e, line=0) for e in text]


def run_json(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["analyze", str(path), "--json", "--all-requests"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_analyze_detects_and_reads_a_json_log(capsys: pytest.CaptureFixture[str]) -> None:
    lines = (FIX / JSON_LOG).read_text().splitlines()
    assert detect_engine(lines[:200]) == "vllm"
    doc, twin = run_json(FIX / JSON_LOG, capsys), run_json(FIX / TEXT, capsys)
    (src,) = doc["sources"]
    assert (src["engine"], src["version"], src["unparsed_lines"]) == ("vllm", "0.32.0", 0)

    def rows(d: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [(r["method"], r["path"], r["status"], r["model"], r["time"]) for r in d["requests"]]

    assert rows(doc) == rows(twin) and len(rows(doc)) == 21
    assert doc["config"]["effective"] == twin["config"]["effective"]
    assert [e["kind"] for e in doc["errors"]] == [e["kind"] for e in twin["errors"]] == ["other"]
    assert len(doc["engine_stats"]) == 1 and len(doc["loads"]) == 1


def record(**fields: Any) -> str:
    return json.dumps(fields)


def test_json_field_variants() -> None:
    parser = VllmParser()
    # Renamed fields (`rename_fields`), an ISO time with a zone (the clock as printed), filename and lineno.
    [stats] = parser.parse(1, record(time="2026-11-30T14:27:42.5+00:00", level="info", name="vllm.v1.metrics.loggers",
                                     filename="loggers.py", lineno=335, message=(
                                         "Engine 000: Avg prompt throughput: 5.4 tokens/s, Avg generation throughput: "
                                         "11.2 tokens/s, Running: 1 reqs, Waiting: 0 reqs, CPU KV cache usage: 0.0%")))
    assert isinstance(stats, ev.EngineStats) and (stats.running, stats.gen_tps) == (1, 11.2)
    assert stats.ts is not None and stats.ts.isoformat() == "2026-11-30T14:27:42.500000"
    # uvicorn's access record: a time, which its text line lacks.
    [access] = parser.parse(2, record(asctime="2026-11-30 14:27:43,017", levelname="INFO", name="uvicorn.access",
                                      message='127.0.0.1:35856 - "POST /v1/chat/completions HTTP/1.1" 200'))
    assert isinstance(access, ev.HttpAccess) and (access.path, access.status) == ("/v1/chat/completions", 200)
    assert access.ts is not None and access.ts.isoformat() == "2026-11-30T14:27:43.017000"
    # A logged exception is one record: its traceback in exc_info.
    parser.parse(3, record(asctime="2026-11-30 14:28:00,000", levelname="ERROR", name="vllm.v1.engine.core",
                           processName="EngineCore_DP0", process=563, message="EngineCore failed to start.",
                           exc_info="Traceback (most recent call last):\n  File \"core.py\", line 1, in run\n"
                                    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."))
    [error] = parser.flush()
    assert isinstance(error, ev.ErrorEvent) and error.kind == "oom"
    # JSON that is no log record stays unparsed.
    assert [type(e) for e in parser.parse(4, '{"event": "something else"}')] == [ev.Unparsed]
