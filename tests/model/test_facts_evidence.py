"""Every per-request number ietop states cites the log line it rests on (issue 19): `--json` carries
`facts_evidence` (fact → path and line) for each fact that is not on the request's own `source` line, on the
real fixtures of every engine. Only a number the access line itself prints (the latency) may rest on `source`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ietop.cli import main

ROOT = Path(__file__).resolve().parents[2]
FACTS = ("prompt_tokens", "cached_tokens", "prefill_tokens", "output_tokens", "ttft_s", "itl_s", "latency_s",
         "load_s")
LOGS = sorted(p for p in (ROOT / "fixtures").rglob("*")
              if p.suffix in (".log", ".stderr", ".jsonl") and "client" not in p.name and "requests" not in p.name and "transcript" not in p.name
              and "streams" not in p.parts and p.name != "real-basic-driver.log")  # a client script's log


def analyze(path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["analyze", "--json", str(path)]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("path", LOGS, ids=lambda p: str(p.relative_to(ROOT / "fixtures")))
def test_every_stated_fact_cites_a_line(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = analyze(path, capsys)
    lines = {s["path"]: len(Path(s["path"]).read_bytes().splitlines()) for s in doc["sources"]}
    for req in doc["requests"]:
        cited = req["facts_evidence"]
        for fact in FACTS:
            if req[fact] is None:
                assert fact not in cited, (fact, req)
                continue
            if fact not in cited:
                # Not cited: it is on the request's own line, which only the latency can be (GIN, proxy).
                assert fact == "latency_s", (fact, req["source"], req)
                continue
            where = cited[fact]
            assert where["path"] in lines and 1 <= where["line"] <= lines[where["path"]], where
        assert not set(req["unknown"]) & {f for f in FACTS if req[f] is not None}, req


def test_mlx_overlap_says_why_a_fact_is_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    doc = analyze(ROOT / "fixtures" / "mlx" / "overlap" / "seed2026-debug-server.log", capsys)
    unknown = [(fact, why) for r in doc["requests"] for fact, why in r["unknown"].items()]
    assert ("output_tokens", "ambiguous: its token lines could be another open request's") in unknown
    assert any(fact == "prefill_tokens" and why.startswith("ambiguous: admitted with") for fact, why in unknown)
    assert ("prompt_tokens", "not logged for a stream (mlx_lm logs the usage of non-stream responses only)") in unknown
