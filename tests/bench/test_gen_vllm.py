"""Tests for the benchmark's synthetic vLLM log generator (bench/gen_vllm_log.py).

The log must be reproducible (a benchmark compares runs on the same bytes) and must be a log ietop reads as
vLLM's, almost every line recognised: otherwise the benchmark would time the unparsed-line path instead of
the real one. The line shapes are checked here independently of the generator, against the reference
(vllm-formats.md §1, §7) and the real logs in fixtures/vllm/.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ietop.analyze.report import Analysis
from ietop.model.probes import is_probe

REPO = Path(__file__).resolve().parents[2]
GENERATOR = REPO / "bench" / "gen_vllm_log.py"
SIZE = 3 * 1024 * 1024

# vLLM's record (§1), uvicorn's access and life-cycle lines (§7), and what its processes print outside logging.
RECORD = re.compile(r"(?:\((?:APIServer|EngineCore_DP0) pid=\d+\) )?(INFO|WARNING|ERROR) (\d\d-\d\d \d\d:\d\d:\d\d) "
                    r"\[[\w.]+\.py:\d+\] ")
ACCESS = re.compile(r'\(APIServer pid=\d+\) INFO:     [\d.]+:\d+ - "(GET|POST) (\S+) HTTP/1\.1" (\d{3}) [A-Z][A-Za-z ]+')
UVICORN = re.compile(r"\(APIServer pid=\d+\) INFO:     (Started server process \[\d+\]|Waiting for application "
                     r"startup\.|Application startup complete\.|Shutting down|Waiting for application shutdown\."
                     r"|Application shutdown complete\.)")
RAW = re.compile(r"\(EngineCore_DP0 pid=\d+\)|(Loading safetensors checkpoint shards|Capturing CUDA graphs).*\d+/\d+ \[")


def _generate(out: Path, seed: int, hashseed: str) -> bytes:
    # a different hash seed per run: no set/dict order or id() may leak into the output
    env = dict(os.environ, PYTHONHASHSEED=hashseed)
    cmd = [sys.executable, str(GENERATOR), str(out), "--size", "3M", "--seed", str(seed)]
    subprocess.run(cmd, check=True, env=env, capture_output=True, timeout=120)
    return out.read_bytes()


@pytest.fixture(scope="module")
def log3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("vllm") / "a.log"
    _generate(path, 1, "0")
    return path


def test_same_seed_same_bytes(log3: Path, tmp_path: Path) -> None:
    again = _generate(tmp_path / "b.log", 1, "1")
    assert again == log3.read_bytes()
    # cut at a line boundary: never above the requested size, short by less than one (long) line
    assert SIZE - 256 * 1024 < len(again) <= SIZE and again.endswith(b"\n")
    assert _generate(tmp_path / "c.log", 2, "0") != again
    meta = json.loads((tmp_path / "b.log.meta.json").read_text())
    assert meta["synthetic"] is True and meta["seed"] == 1 and meta["bytes"] == len(again)
    assert len(meta["generator_sha256"]) == 64


def test_line_shapes_and_mix(log3: Path) -> None:
    lines = log3.read_text(encoding="utf-8").splitlines()
    first = RECORD.match(lines[0])
    assert first and "SYNTHETIC" in lines[0] and "not real vLLM output" in lines[0]
    kinds: Counter[str] = Counter()
    stamps = []
    for line in lines:
        if (m := ACCESS.fullmatch(line)) is not None:
            kinds["probe" if m[1] == "GET" else "inference"] += 1
        elif (m := RECORD.match(line)) is not None:
            stamps.append(m[2])
            kinds["received" if "] Received request " in line else "record"] += 1
            if "] Received request " in line:
                # the prompt is printed with %r: it must be exactly what repr() writes for its text
                prompt = line[line.index(": prompt: ") + 10:line.rindex(", params: SamplingParams(")]
                assert repr(ast.literal_eval(prompt)) == prompt, prompt[:200]
        else:
            assert UVICORN.fullmatch(line) or RAW.match(line), line[:200]
            kinds["other"] += 1
    # one year, no New Year in 3 MB: the stamps sort as text and vLLM's clock only goes forward
    assert stamps == sorted(stamps)
    access = kinds["probe"] + kinds["inference"]
    assert 0.7 <= access / len(lines) <= 0.9, kinds
    assert kinds["probe"] > kinds["inference"] > 100 and kinds["received"] > 100


def test_ietop_reads_it_as_vllm(log3: Path) -> None:
    an = Analysis([str(log3)], all_requests=True)
    try:
        out = io.StringIO()
        an.write_json(out)
        doc: dict[str, Any] = json.loads(out.getvalue())
    finally:
        an.close()
    (source,) = doc["sources"]
    assert source["engine"] == "vllm" and source["version"] == "0.10.2"
    assert source["unparsed_lines"] <= 0.01 * source["lines"]
    requests = doc["requests"]
    assert sum(r["inference"] for r in requests) > 100
    assert sum(is_probe(r["method"], r["status"], r["inference"]) for r in requests) > 1000
    assert doc["counts"]["prompt_text_lines"] > 100  # the prompts were read, not skipped
    assert doc["loads"] and doc["engine_stats"]
