"""The columnar core states the same facts as the per-line path.

Every fixture log (Ollama, vLLM, MLX) and a synthetic multi-era log (bench/gen_ollama_log.py, both profiles)
is analyzed twice: with `--all-requests` (every line through the engine's parser, every request listed, as
`ietop.analyze/1` did) and by default (probe lines folded in polars, counted in `probes`). Apart from the
folding, the two documents must be equal: requests, loads, unloads, truncations, errors, tasks, stats,
config, metrics, latency, counts, hints, sources. The folded probes must count exactly the listed ones.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ietop.analyze.report import Analysis
from ietop.model.probes import is_probe
from ietop.pipeline.bulk import lines as bulk_lines

REPO = Path(__file__).resolve().parents[2]
FIXTURES = sorted(
    p for p in (REPO / "fixtures").rglob("*")
    if p.is_file() and p.suffix in (".log", ".txt", ".stderr", ".jsonl") and "README" not in p.name
    and "INDEX" not in p.name
)


def _document(paths: list[str], all_requests: bool) -> dict[str, Any] | None:
    try:
        an = Analysis(paths, all_requests=all_requests)
    except Exception as exc:  # a file analyze refuses is refused by both paths alike
        return {"refused": type(exc).__name__ + str(exc)}
    try:
        out = io.StringIO()
        an.write_json(out)
        return json.loads(out.getvalue())  # type: ignore[no-any-return]
    finally:
        an.close()


def _probe_key(req: dict[str, Any]) -> tuple[str, str, str, int]:
    return (req["source"]["path"], req["method"], req["path"], req["status"])


def assert_same_facts(paths: list[str]) -> int:
    """Analyze both ways and compare; returns how many probes were folded."""
    old = _document(paths, all_requests=True)
    new = _document(paths, all_requests=False)
    assert old is not None and new is not None
    if "refused" in old:
        assert new == old
        return 0
    listed = [r for r in old["requests"] if not is_probe(r["method"], r["status"], r["inference"])]
    folded = Counter(_probe_key(r) for r in old["requests"] if is_probe(r["method"], r["status"], r["inference"]))
    assert new["requests"] == listed
    assert {(p["source"], p["method"], p["path"], p["status"]): p["count"] for p in new["probes"]} == dict(folded)
    assert old["probes"] == []
    for key in old:
        if key not in ("requests", "probes"):
            assert new[key] == old[key], key
    return sum(folded.values())


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(REPO / "fixtures")))
def test_fixture_same_facts(path: Path) -> None:
    assert_same_facts([str(path)])


def test_all_ollama_fixtures_merged_same_facts() -> None:
    """Several logs at once: the merge by time sees the folded counts where it saw the probes."""
    paths = [str(p) for p in FIXTURES if p.parent.name == "ollama"][:12]
    assert_same_facts(paths)


def _generate(tmp_path: Path, profile: str, size: str, seed: int = 7) -> Path:
    log = tmp_path / f"{profile}-{size}.log"
    if profile == "vllm":
        argv = [str(REPO / "bench" / "gen_vllm_log.py"), str(log)]
    else:
        argv = [str(REPO / "bench" / "gen_ollama_log.py"), str(log), "--profile", profile]
    subprocess.run([sys.executable, *argv, "--size", size, "--seed", str(seed), "--meta", "-"], check=True,
                   capture_output=True)
    return log


@pytest.mark.parametrize("profile", ["mixed", "busy", "vllm"])
def test_synthetic_same_facts(tmp_path: Path, profile: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A synthetic log (every era, envelopes, junk, invalid UTF-8; a busy E5 server; a busy vLLM server),
    read in small windows so that segments, offsets and probe runs cross window edges many times."""
    log = _generate(tmp_path, profile, "3M")
    monkeypatch.setattr(bulk_lines, "WINDOW", 256 << 10)
    assert assert_same_facts([str(log)]) > 1000


def test_synthetic_100mb_same_facts(tmp_path: Path) -> None:
    """The acceptance's 100 MB: the multi-era log (envelopes, DEBUG chains, every era's line shapes) at the
    reader's own window size."""
    assert assert_same_facts([str(_generate(tmp_path, "mixed", "100M", seed=1))]) > 100_000


# SYNTHETIC (edge cases): vLLM health checks where the line would change the parser — inside a raw
# exception's message, after an indented block, under a process prefix, before any record's time.
_VLLM_EDGES = """\
INFO:     127.0.0.1:50001 - "GET /health HTTP/1.1" 200 OK
INFO 11-30 14:26:45 [api_server.py:1] vLLM API server version 0.11.0
INFO:     127.0.0.1:50001 - "GET /health HTTP/1.1" 200 OK
Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/vllm/worker.py", line 10, in run
    raise RuntimeError("boom")
RuntimeError: CUDA error: an illegal memory access was encountered
INFO:     127.0.0.1:50001 - "GET /health HTTP/1.1" 200 OK
the exception's message goes on here
INFO:     127.0.0.1:50001 - "GET /metrics HTTP/1.1" 200 OK
ERROR 11-30 14:26:50 [core.py:2] EngineCore failed to start.
INFO:     127.0.0.1:50001 - "GET /health HTTP/1.1" 200 OK
    an indented line after the access line
(APIServer pid=7) INFO:     127.0.0.1:50002 - "GET /v1/models HTTP/1.1" 200 OK
INFO 11-30 14:26:55 [loggers.py:3] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%
INFO:     127.0.0.1:50001 - "GET /health HTTP/1.1" 503 Service Unavailable
INFO:     127.0.0.1:50003 - "POST /v1/completions HTTP/1.1" 200 OK
INFO:     127.0.0.1:50001 - "HEAD /health HTTP/1.1" 200 OK
"""


def test_vllm_probes_where_the_line_would_change_the_parser(tmp_path: Path) -> None:
    log = tmp_path / "vllm-edges.log"
    log.write_text(_VLLM_EDGES)
    assert assert_same_facts([str(log)]) >= 7
