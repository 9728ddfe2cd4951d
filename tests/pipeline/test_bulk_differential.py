"""The columnar core states the same facts as the per-line path.

Every fixture log (Ollama, vLLM, MLX) and a synthetic multi-era log (bench/gen_ollama_log.py, both profiles)
is analyzed twice: with `--all-requests` (every line through the engine's parser, every request listed, as
`ietop.analyze/1` did) and by default (probe lines folded in polars, counted in `probes`). Apart from the
folding, the two documents must be equal: requests, loads, unloads, truncations, errors, tasks, stats,
config, metrics, latency, counts, hints, sources. The folded probes must count exactly the listed ones.
So must they with --since/--until, cut inside runs of probes (an Ollama log's columnar reader splits them).
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ietop.analyze.report import Analysis
from ietop.model.probes import ProbeTable, is_probe
from ietop.model.store import Store
from ietop.pipeline.bulk import lines as bulk_lines
from ietop.pipeline.bulk.stream import bulk_file_events, foldable
from ietop.pipeline.ingest import open_inputs, parse_time_arg

REPO = Path(__file__).resolve().parents[2]
FIXTURES = sorted(
    p for p in (REPO / "fixtures").rglob("*")
    if p.is_file() and p.suffix in (".log", ".txt", ".stderr", ".jsonl") and "README" not in p.name
    and "INDEX" not in p.name
)


def _document(paths: list[str], all_requests: bool, since: float | None = None,
              until: float | None = None) -> dict[str, Any] | None:
    try:
        an = Analysis(paths, since=since, until=until, all_requests=all_requests)
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


def assert_same_facts(paths: list[str], since: float | None = None, until: float | None = None) -> int:
    """Analyze both ways (with --since/--until, when given) and compare; returns how many probes were folded."""
    old = _document(paths, True, since, until)
    new = _document(paths, False, since, until)
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


_GIN_STAMP = re.compile(rb"\[GIN\] (\d{4})/(\d\d)/(\d\d) - (\d\d:\d\d:\d\d) \|")


def _cuts(log: Path) -> list[float]:
    """Times at a tenth, half and nine tenths of the log's access lines: seconds that hold many probes, so a
    bound falls inside a run of them (zone-less, read as --since reads them)."""
    stamps = [f"{m[1].decode()}-{m[2].decode()}-{m[3].decode()}T{m[4].decode()}"
              for m in _GIN_STAMP.finditer(log.read_bytes())]
    return [parse_time_arg(stamps[int(len(stamps) * q)]) for q in (0.1, 0.5, 0.9)] if stamps else []


def _windows(cuts: list[float]) -> list[tuple[float | None, float | None]]:
    lo, mid, hi = cuts
    return [(mid, None), (None, mid), (lo, hi), (mid, mid), (hi + 1.0, lo)]


@pytest.mark.parametrize("profile", ["mixed", "busy"])
def test_synthetic_time_window_same_facts(tmp_path: Path, profile: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """--since/--until on the columnar reader: a bound inside a second of many probes splits their run, and
    the probes before it still move the clock of the lines after them (as the per-line reader's do)."""
    log = _generate(tmp_path, profile, "3M")
    monkeypatch.setattr(bulk_lines, "WINDOW", 256 << 10)
    folded = [assert_same_facts([str(log)], since, until) for since, until in _windows(_cuts(log))]
    assert min(folded[:3]) > 1000 and folded[4] == 0  # the last window ends before it begins


GIN_FIXTURES = [p for p in FIXTURES if p.parent.name == "ollama" and _cuts(p)]
"""The Ollama fixtures with access lines to cut at (17 of 45 on 2026-12-02)."""


@pytest.mark.parametrize("path", GIN_FIXTURES, ids=lambda p: p.name)
def test_fixture_time_window_same_facts(path: Path) -> None:
    for since, until in _windows(_cuts(path))[:3]:
        assert_same_facts([str(path)], since, until)


def test_a_vllm_log_in_a_time_window_is_read_line_by_line(tmp_path: Path) -> None:
    """Its columnar reader cannot tell a window's probes (each takes the last record's time), so it refuses."""
    log = _generate(tmp_path, "vllm", "200K")
    store = Store()
    (inp,) = open_inputs(store, [str(log)])
    assert foldable(inp) and not foldable(inp, timed=True)
    with pytest.raises(ValueError, match="time window"):
        next(bulk_file_events(inp, ProbeTable(), bounds=(0.0, None)))
    # Read line by line both ways: the default still counts the window's probes (the spool folds them).
    assert assert_same_facts([str(log)], 1.0e9, None) > 100


# SYNTHETIC (edge case): --until inside a run of probes, llama-server's untimed task lines after it. The per-line
# reader gives those lines the clock of the last probe, past --until, and drops them; a reader that dropped the
# late probes without moving the clock would keep them (the task would be listed).
_UNTIL_IN_A_RUN = """\
time=2026-06-20T10:00:00.000Z level=INFO source=routes.go:1 msg="Listening on 127.0.0.1:11434 (version 0.32.7)"
[GIN] 2026/06/20 - 10:00:01 | 200 |      52.021µs |       127.0.0.1 | HEAD     "/"
[GIN] 2026/06/20 - 10:00:02 | 200 |      52.021µs |       127.0.0.1 | HEAD     "/"
[GIN] 2026/06/20 - 10:00:09 | 200 |      52.021µs |       127.0.0.1 | HEAD     "/"
slot update_slots: id  0 | task 7 | new prompt, n_ctx_slot = 4096, n_keep = 4, task.n_tokens = 100
slot      release: id  0 | task 7 | stop processing: n_tokens = 120, truncated = 0
"""


def test_until_inside_a_run_of_probes_drops_the_untimed_lines_after_it(tmp_path: Path) -> None:
    log = tmp_path / "until.log"
    log.write_text(_UNTIL_IN_A_RUN)
    until = parse_time_arg("2026-06-20T10:00:05Z")
    assert assert_same_facts([str(log)], None, until) == 2
    new = _document([str(log)], False, None, until)
    assert new is not None and new["tasks"] == []
    whole = _document([str(log)], False)
    assert whole is not None and len(whole["tasks"]) == 1  # the task is there when no bound drops it
