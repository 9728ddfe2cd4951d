"""`ietop analyze` on an `ietop proxy --jsonl` file: the proxy's exact measurements become requests with
`prompt_tokens_source: "proxy"`, TTFT/ITL percentiles from the requests, and errors for the failures.
The JSONL lines are SYNTHETIC (written here through parsers.api.proxy_log.to_json, the proxy's own writer)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from ietop.cli import main
from parsers.api.proxy_log import to_json
from parsers.events import ProxyRequest

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=timezone.utc)


def measurement(sec: int, path: str, ttft: float, e2e: float, prompt: int, out: int, *, load: float | None = None,
                error: str | None = None, status: int = 200) -> ProxyRequest:
    return ProxyRequest(0, T0.replace(second=sec), "POST", path, status, "llama3:8b", True, ttft / 2, ttft,
                        0.02, e2e, out, prompt, out, 0, load, 300, 4000, error)


def test_proxy_measurements_become_requests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "proxy.jsonl"
    rows = [measurement(1, "/api/chat", 0.25, 2.0, 120, 80),
            measurement(5, "/api/chat", 9.5, 11.0, 130, 70, load=9.1),
            measurement(20, "/v1/chat/completions", 0.2, 1.5, 40, 60),
            measurement(30, "/v1/chat/completions", 0.1, 0.3, 40, 2, error="client disconnected", status=200)]
    log.write_text("".join(to_json(r) + "\n" for r in rows))
    assert main(["analyze", str(log), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["sources"][0]["engine"] == "proxy" and doc["sources"][0]["unparsed_lines"] == 0
    reqs = doc["requests"]
    assert [r["prompt_tokens"] for r in reqs] == [120, 130, 40, 40]
    assert {r["prompt_tokens_source"] for r in reqs} == {"proxy"}
    assert [r["engine"] for r in reqs] == ["ollama", "ollama", "openai-compatible", "openai-compatible"]
    assert reqs[1]["cold_load"] and reqs[1]["load_s"] == 9.1 and not reqs[0]["cold_load"]
    assert reqs[0]["time"] == "2026-11-29T12:00:03+00:00"  # arrival + e2e: when the request finished
    assert doc["latency"]["ttft_s"]["count"] == 4 and doc["latency"]["source"] == "requests"
    assert [e["kind"] for e in doc["errors"]] == ["client_abort"]
