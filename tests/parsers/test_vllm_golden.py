"""The vLLM parser over every log fixture: the public samples against the facts of their row in
fixtures/vllm/SAMPLES-INDEX.md, and our own 0.32.0 run against the client's record of it
(fixtures/vllm/README.md says where each file comes from). Lines go through framing and envelope
stripping first, as in the pipeline."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from parsers import events as ev
from parsers.text.envelope import strip_envelope
from parsers.text.framing import split_lines
from parsers.vllm.log import VllmParser

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "vllm"
SAMPLES = sorted(p.name for p in FIX.glob("0*.txt"))


def parse_file(name: str, year: int | None = None) -> tuple[VllmParser, list[ev.Event]]:
    parser = VllmParser(year=year)
    out: list[ev.Event] = []
    for n, line in enumerate(split_lines([(FIX / name).read_bytes()]), 1):
        st = strip_envelope(line.text)
        if st.text:
            out.extend(parser.parse(n, st.text, st.ts))
    out.extend(parser.flush())
    return parser, out


def only(events: list[ev.Event], kind: type[ev.Event]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def facts(events: list[ev.Event]) -> dict[str, list[float | str]]:
    out: dict[str, list[float | str]] = {}
    for f in only(events, ev.StartupFact):
        out.setdefault(f.key, []).append(f.value)
    return out


def stats(events: list[ev.Event], *fields: str) -> list[tuple[Any, ...]]:
    return [tuple(getattr(s, f) for f in fields) for s in only(events, ev.EngineStats)]


def test_every_log_sample_is_indexed_and_copied() -> None:
    index = (FIX / "SAMPLES-INDEX.md").read_text()
    listed = {m for m in re.findall(r"^\| (\d{3}-[\w.-]+\.txt) \|", index, re.M) if "-metrics-" not in m}
    assert listed == set(SAMPLES)
    assert len(SAMPLES) == 17


@pytest.mark.parametrize("name", SAMPLES)
def test_samples_have_no_unparsed_lines(name: str) -> None:
    _, events = parse_file(name)
    assert only(events, ev.Unparsed) == []
    assert events


def test_001_v0_stats() -> None:
    p, events = parse_file("001-v0-stats-line-2024-02.txt")
    assert stats(events, "prompt_tps", "gen_tps", "running", "swapped", "waiting", "kv_usage", "extra") == [
        (0.0, 44.9, 2, 0, 3, 0.821, (("cpu_kv_usage", 0.0),))]
    assert p.era == "vLLM V0"


def test_003_v0_trailing_period() -> None:
    _, events = parse_file("003-v0-stats-trailing-period-2025-01.txt")
    assert stats(events, "gen_tps") == [(41.7,), (41.7,), (41.5,), (41.8,), (41.8,), (41.7,)]
    assert {s[0:2] for s in stats(events, "running", "waiting")} == {(1, 0)}
    assert [s[0] for s in stats(events, "kv_usage")] == [0.020, 0.021, 0.021, 0.022, 0.022, 0.023]


def test_004_v0_swap_preemption() -> None:
    _, events = parse_file("004-v0-0.6.3-stats-and-swap-preemption.txt")
    assert stats(events, "waiting", "kv_usage", "gen_tps") == [(98, 0.738, 7220.5), (98, 0.861, 7154.5)]
    (pre,) = only(events, ev.Preemption)
    assert (pre.request_id, pre.mode, pre.cumulative) == ("chat-7e630abf1a8b4c8a88775b1e98a54cf2", "SWAP", None)
    assert pre.line == 3


def test_006_v0_startup_blocks_concurrency() -> None:
    _, events = parse_file("006-v0-0.6-startup-blocks-concurrency.txt")
    f = facts(events)
    assert f["model_memory_gib"][0] == 14.9595
    assert f["profile_s"] == [1.32]
    assert (f["total_memory_gib"], f["memory_utilization"], f["usable_memory_gib"]) == ([39.5], [0.9], [35.55])
    assert f["kv_available_gib"] == [11.12]
    assert (f["gpu_blocks"], f["cpu_blocks"]) == ([5691], [2048])
    assert (f["max_concurrency"], f["max_concurrency_tokens"]) == ([11.12], [8192])


def test_007_v0_max_seq_len_too_large() -> None:
    _, events = parse_file("007-v0-0.6.4-startup-maxseqlen-too-large.txt")
    f = facts(events)
    assert f["model_memory_gib"] == [14.9888]
    assert f["kv_available_gib"] == [2.89]
    assert (f["gpu_blocks"], f["cpu_blocks"]) == ([1478], [2048])
    assert (f["max_concurrency"], f["max_concurrency_tokens"]) == ([0.82], [29000])
    (err,) = only(events, ev.ErrorEvent)
    assert err.kind == "load_failed" and "29000" in err.message and "23648" in err.message
    assert 1478 * 16 == 23648


def test_009_v1_kv_cache_size() -> None:
    p, events = parse_file("009-v1-0.10-startup-kv-cache-size.txt")
    f = facts(events)
    assert f["kv_available_gib"] == [112.61]
    assert f["kv_cache_tokens"] == [922496]
    assert (f["max_concurrency"], f["max_concurrency_tokens"]) == ([23.06], [40000])
    assert f["init_engine_s"] == [1.06]
    assert f["gpu_blocks"] == [57656] and 57656 * 16 == 922496
    assert [d.duration_s for d in only(events, ev.LoadDone)] == [1.06]
    assert p.era == "vLLM V1"


def test_010_custom_log_format() -> None:
    _, events = parse_file("010-v1-0.11-startup-custom-log-format.txt")
    f = facts(events)
    assert f["weights_load_s"] == [18.30]
    assert (f["model_memory_gib"], f["model_load_s"]) == ([14.9889], [18.506763])
    assert f["compile_s"] == [27.26] and f["dynamo_s"] == [6.11]
    assert f["kv_cache_tokens"] == [417136]
    assert (f["max_concurrency"], f["max_concurrency_tokens"]) == ([3.18], [131072])
    assert (f["cudagraph_s"], f["cudagraph_gib"]) == ([20.0], [0.65])
    assert f["init_engine_s"] == [53.20]
    assert f["gpu_blocks"] == [26071] and 26071 * 16 == 417136
    first = only(events, ev.StartupFact)[0]
    assert first.ts == datetime(2025, 11, 7, 17, 18, 0, 203000)


def test_012_glued_stats() -> None:
    _, events = parse_file("012-v1-0.10-stats-lines-glued.txt")
    assert stats(events, "line", "gen_tps", "running", "waiting", "kv_usage") == [
        (1, 239.2, 8, 0, 0.912), (2, 239.2, 8, 0, 0.916), (2, 240.0, 8, 0, 0.919)]


def test_013_prefixed_access_log() -> None:
    _, events = parse_file("013-v1-0.12-stats-and-prefixed-access-log.txt")
    assert stats(events, "prompt_tps") == [(105.8,), (0.0,), (0.0,), (0.0,)]
    assert stats(events, "gen_tps") == [(158.0,), (181.0,), (180.3,), (178.2,)]
    assert [s[0] for s in stats(events, "kv_usage")] == [0.003, 0.006, 0.008, 0.010]
    assert {s[0] for s in stats(events, "prefix_hit_rate")} == {0.682}
    (access,) = only(events, ev.HttpAccess)
    assert (access.method, access.path, access.status, access.client) == ("GET", "/health", 200, "127.0.0.1")
    assert only(events, ev.ErrorEvent) == []


def test_015_request_logging_info() -> None:
    _, events = parse_file("015-v1-0.15-request-logging-info.txt")
    logged = only(events, ev.RequestLogged)
    assert [(r.request_id, r.phase, r.prompt_tokens, r.max_tokens) for r in logged] == [
        ("chatcmpl-a269fdcb7c6ce890", "received", None, 100), ("chatcmpl-a269fdcb7c6ce890", "added", None, None)]
    assert only(events, ev.PromptText) == []
    (access,) = only(events, ev.HttpAccess)
    assert (access.client, access.method, access.path, access.status) == (
        "10.80.23.18", "POST", "/v1/chat/completions", 200)


def test_016_v0_prompt_at_info() -> None:
    _, events = parse_file("016-v0-0.6.2-request-logging-with-prompt.txt")
    (logged,) = only(events, ev.RequestLogged)
    assert (logged.request_id, logged.phase, logged.prompt_tokens) == (
        "cmpl-c52dbd9a95114d1cbfa182e588138c86-0", "received", None)  # the line is cut before the ids
    (prompt,) = only(events, ev.PromptText)
    assert prompt.text == "How to make pizza"


@pytest.mark.parametrize(("name", "numbers"), [
    ("018-v1-0.15-error-kv-cache-too-small.txt", ("262144", "24.0 GiB", "3.18 GiB", "34736")),
    ("019-v1-cpu-backend-error-kv-cache-too-small.txt", ("40960", "4.38 GiB", "4.00 GiB", "37376")),
])
def test_kv_cache_too_small_samples(name: str, numbers: tuple[str, ...]) -> None:
    _, events = parse_file(name)
    (err,) = only(events, ev.ErrorEvent)
    assert err.kind == "load_failed"
    for number in numbers:
        assert number in err.message


def test_021_cuda_oom_wrapped_mid_word() -> None:
    _, events = parse_file("021-v1-0.11-cuda-oom.txt")
    (err,) = only(events, ev.ErrorEvent)
    assert err.kind == "oom"
    for number in ("232.00 MiB", "23.57 GiB", "154.25 MiB", "23.40 GiB", "22.88 GiB", "188.29 MiB"):
        assert number in err.message


def test_028_model_loading_memory_wording() -> None:
    _, events = parse_file("028-v1-2026-startup-model-loading-memory-wording.txt")
    f = facts(events)
    assert f["weights_load_s"] == [24.84]
    assert (f["model_memory_gib"], f["model_load_s"]) == ([12.66], [31.657031])
    assert f["dynamo_s"] == [3.54]


def test_030_tui_borders() -> None:
    _, events = parse_file("030-v0-0.8-startup-memory-profile-cuda-blocks-tui.txt")
    f = facts(events)
    assert f["compile_s"] == [28.77] and f["profile_s"] == [34.26]
    assert (f["total_memory_gib"], f["memory_utilization"], f["usable_memory_gib"]) == ([79.19], [0.9], [71.27])
    assert (f["model_memory_gib"], f["kv_available_gib"]) == ([12.55], [56.18])
    assert (f["gpu_blocks"], f["cpu_blocks"]) == ([7191], [512])


def test_031_stats_and_access() -> None:
    _, events = parse_file("031-v1-0.14-meta-agents-stats-and-access.txt")
    assert stats(events, "prompt_tps", "gen_tps", "running", "kv_usage") == [
        (7109.8, 251.9, 12, 0.218), (0.0, 296.4, 12, 0.228), (1440.6, 262.3, 11, 0.217)]
    assert {s[0] for s in stats(events, "prefix_hit_rate")} == {0.949}
    assert [(a.method, a.path, a.status) for a in only(events, ev.HttpAccess)] == [
        ("POST", "/v1/chat/completions", 200)] * 3


# ---- our own run (vLLM 0.32.0, CPU) ---------------------------------------------------------------------

BASIC = "real-basic-server.log"
ACCESS_RE = re.compile(r'^INFO: +(\S+):\d+ - "([A-Z]+) (\S+) HTTP/1\.1" (\d{3}) ')


@pytest.fixture(scope="module")
def basic() -> tuple[VllmParser, list[ev.Event]]:
    return parse_file(BASIC, year=2026)


def requests_record() -> list[dict[str, Any]]:
    return [json.loads(t) for t in (FIX / "real-basic-requests.jsonl").read_text().splitlines() if t.strip()]


def test_basic_no_unparsed_and_version(basic: tuple[VllmParser, list[ev.Event]]) -> None:
    parser, events = basic
    assert only(events, ev.Unparsed) == []
    assert parser.version == "0.32.0"
    assert parser.era == "vLLM V1 0.32+"


def test_basic_startup_facts(basic: tuple[VllmParser, list[ev.Event]]) -> None:
    _, events = basic
    f = facts(events)
    assert set(f["version"]) == {"0.32.0"}
    assert set(f["max_model_len"]) == {512}
    assert f["served_model"] == ["tinyllm"]
    assert f["kv_cache_tokens"] == [262144]
    assert (f["max_concurrency"], f["max_concurrency_tokens"]) == ([512.0], [512])
    assert f["init_engine_s"] == [2.17]
    assert f["kv_available_gib"] == [1.0]
    assert f["weights_load_s"] == [0.02]
    assert f["listen"] == ["http://127.0.0.1:18000"]
    assert "model_memory_gib" not in f  # the CPU backend does not print it
    (start,) = only(events, ev.LoadStart)
    # Named as clients and /metrics name it (`served_model_name`), not by the path it loads from (/tmp/tinyllm).
    assert (start.model, start.runner, start.ts) == ("tinyllm", "vllm", datetime(2026, 11, 29, 15, 51, 48))
    (done,) = only(events, ev.LoadDone)
    assert done.ts == datetime(2026, 11, 29, 15, 51, 52)
    assert done.duration_s == 4.0  # 15:51:48 → 15:51:52; the engine's own init took 2.17 s of it
    (server,) = only(events, ev.ServerStart)
    assert (server.version, server.listen) == ("0.32.0", "http://127.0.0.1:18000")


def test_basic_every_stats_line(basic: tuple[VllmParser, list[ev.Event]]) -> None:
    _, events = basic
    text = (FIX / BASIC).read_text()
    assert len(only(events, ev.EngineStats)) == text.count("Avg prompt throughput:") == 1
    (s,) = only(events, ev.EngineStats)
    assert (s.engine, s.prompt_tps, s.gen_tps, s.running, s.waiting, s.swapped, s.kv_usage, s.prefix_hit_rate,
            s.extra) == ("0", 124.9, 49.1, 0, 0, None, 0.0, 0.153, ())
    assert s.ts == datetime(2026, 11, 29, 15, 52, 4)


def test_basic_every_access_line(basic: tuple[VllmParser, list[ev.Event]]) -> None:
    _, events = basic
    want = [(m.group(1), m.group(2), m.group(3), int(m.group(4)))
            for m in map(ACCESS_RE.match, (FIX / BASIC).read_text().splitlines()) if m is not None]
    got = [(a.client, a.method, a.path, a.status) for a in only(events, ev.HttpAccess)]
    assert got == want and len(got) == 21
    record = requests_record()
    posts = [(r["path"], r["status"]) for r in record if "path" in r]
    assert [(a.path, a.status) for a in only(events, ev.HttpAccess) if a.method == "POST"] == posts
    assert ("/v1/completions", 400) in posts  # the over-long prompt: only the access line tells
    for access in only(events, ev.HttpAccess):
        assert access.latency_s is None and access.latency_raw == "" and access.ts is not None


def test_basic_request_ids_match_the_client(basic: tuple[VllmParser, list[ev.Event]]) -> None:
    _, events = basic
    record = [r for r in requests_record() if r.get("id")]
    assert len(record) >= 12

    def api_id(rid: str) -> str:
        return re.sub(r"-\d+$", "", rid) if rid.startswith("cmpl-") else rid  # completions log `-<index>`

    logged = only(events, ev.RequestLogged)
    received = [r for r in logged if r.phase == "received"]
    added = [r for r in logged if r.phase == "added"]
    assert [api_id(r.request_id) for r in received] == [r["id"] for r in record]
    assert [r.request_id for r in added] == [r.request_id for r in received]
    # Every request ended on its length limit, so the logged max_tokens is what it generated, including
    # the one vLLM clamped from 500 to 268.
    assert [r.max_tokens for r in received] == [r["usage"]["completion_tokens"] for r in record]
    assert 268 in [r.max_tokens for r in received]
    assert all(r.prompt_tokens is None for r in logged)  # INFO: no token ids
    assert only(events, ev.PromptText) == []


def test_basic_shutdown_is_not_a_crash_and_outputs_are_not_kept(basic: tuple[VllmParser, list[ev.Event]]) -> None:
    _, events = basic
    assert [(e.kind, e.message, e.line) for e in only(events, ev.ErrorEvent)] == [("other", "shutdown", 185)]
    text = (FIX / BASIC).read_text()
    outputs = re.findall(r"Generated response \S+: output: '([^']{12,})'", text)
    assert outputs
    kept = repr(events)
    assert not any(o in kept for o in outputs)


def test_kv_too_small_run() -> None:
    parser, events = parse_file("real-kv-too-small-server.log", year=2026)
    assert only(events, ev.Unparsed) == []
    assert parser.version == "0.32.0"
    errors = only(events, ev.ErrorEvent)
    kinds = [e.kind for e in errors]
    assert kinds.count("load_failed") == 2 and "engine_dead" not in kinds and "oom" not in kinds
    first = errors[0]
    assert first.kind == "load_failed" and first.ts == datetime(2026, 11, 29, 15, 57, 44)
    for number in ("300000", "1.14 GiB", "1.0 GiB", "262016"):
        assert number in first.message
    assert "Engine core initialization failed" in errors[-1].message
    assert facts(events)["max_model_len"] == [300000, 300000]
    assert len(only(events, ev.LoadStart)) == 1 and only(events, ev.LoadDone) == []
    assert only(events, ev.ServerStart) == []
