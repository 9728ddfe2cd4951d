"""The MLX parser over whole real logs, checked against the client's transcript of the same run, and over
the public samples (fixtures/mlx/README.md says where each file comes from)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from parsers import events as ev
from parsers.mlx.log import MlxParser
from parsers.text.framing import split_lines

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "mlx"
REAL = ("debug", "info-no-hf-cache")


def parse_file(path: Path) -> tuple[MlxParser, list[ev.Event]]:
    parser = MlxParser()
    out: list[ev.Event] = []
    for n, line in enumerate(split_lines([path.read_bytes()]), 1):
        out.extend(parser.parse(n, line.text))
    out.extend(parser.flush())
    return parser, out


def transcript(name: str) -> list[dict[str, Any]]:
    return [json.loads(t) for t in (FIX / f"{name}-transcript.jsonl").read_text().splitlines() if t.strip()]


def only(events: list[ev.Event], kind: type[ev.Event]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def usage_of(entry: dict[str, Any]) -> Any:
    """The usage the client saw: the non-stream response's, or a stream's include_usage chunk."""
    resp = entry.get("response")
    if isinstance(resp, dict):
        return resp["usage"]
    for sse in entry.get("sse", []):
        if sse["line"].startswith("data: {") and '"usage"' in sse["line"]:
            usage = json.loads(sse["line"][6:]).get("usage")
            if usage:
                return usage
    return None


def reached_generation(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Completion requests the server admitted: every POST answered 200, plus `client-disconnect` (a 200
    stream the client closed early; its record has no status, see fixtures/mlx/README.md)."""
    return [e for e in entries if (e.get("method") == "POST" and e.get("status") == 200)
            or e["name"] == "client-disconnect"]


@pytest.fixture(scope="module", params=REAL)
def real(request: pytest.FixtureRequest) -> tuple[str, MlxParser, list[ev.Event], list[dict[str, Any]]]:
    name: str = request.param
    parser, events = parse_file(FIX / f"{name}-server.stderr")
    return name, parser, events, transcript(name)


def test_no_unparsed_lines(real: tuple[str, MlxParser, list[ev.Event], list[dict[str, Any]]]) -> None:
    _, parser, events, _ = real
    assert only(events, ev.Unparsed) == []
    assert parser.era == "mlx_lm 0.31.2+ (Prompt Cache)"
    assert len(only(events, ev.ServerStart)) == 1


def test_post_access_lines_match_the_transcript(
        real: tuple[str, MlxParser, list[ev.Event], list[dict[str, Any]]]) -> None:
    _, _, events, entries = real
    got = [(e.status, e.path) for e in only(events, ev.HttpAccess) if e.method == "POST"]
    want = []
    for e in entries:
        if e.get("method") == "POST":
            want.append((e["status"], e["path"]))
        elif e["name"] == "bad-json":
            want.append((e["status"], "/v1/chat/completions"))
        elif e["name"] == "client-disconnect":
            want.append((200, "/v1/chat/completions"))
    # Concurrent requests are recorded in completion order but logged in admission order; all are 200s to
    # the same path, so the sequences still agree.
    assert got == want
    gets = [(e.status, e.path) for e in only(events, ev.HttpAccess) if e.method == "GET"]
    # The first /health is run.sh's readiness poll, before the client started recording.
    assert gets == [(200, "/health")] + [(e["status"], e["path"]) for e in entries if e.get("method") == "GET"]


def test_final_prefill_total_is_the_uncached_prompt(
        real: tuple[str, MlxParser, list[ev.Event], list[dict[str, Any]]]) -> None:
    _, _, events, entries = real
    finals = [e.total for e in only(events, ev.PrefillProgress) if e.n_tokens == e.total]
    admitted = reached_generation(entries)
    assert len(finals) == len(admitted)
    concurrent: list[tuple[int | None, int]] = []
    checked_nonstream = 0
    for got, entry in zip(finals, admitted):
        usage = usage_of(entry)
        want = None if usage is None else usage["prompt_tokens"] - usage["prompt_tokens_details"]["cached_tokens"]
        if entry["name"].startswith("concurrent-"):
            concurrent.append((want, got))  # interleaved: compared as a set below
            continue
        if want is not None:
            assert got == want, entry["name"]
            checked_nonstream += isinstance(entry.get("response"), dict)
    assert sorted(w for w, _ in concurrent if w is not None) == sorted(g for _, g in concurrent)
    assert checked_nonstream >= 8
    for p in only(events, ev.PrefillProgress):
        assert p.task is None and p.t_s is None
        assert 0 < p.n_tokens <= p.total or (p.n_tokens == 0 and p.progress == 0.0)


def test_admissions(real: tuple[str, MlxParser, list[ev.Event], list[dict[str, Any]]]) -> None:
    _, _, events, entries = real
    admissions = only(events, ev.Admission)
    assert len(admissions) == len(reached_generation(entries))
    assert admissions[0].sequences == 0
    assert all(a.user_cache_tokens is None for a in admissions)


def test_errors(real: tuple[str, MlxParser, list[ev.Event], list[dict[str, Any]]]) -> None:
    name, _, events, _ = real
    errors = [(e.kind, e.message.split(":")[0]) for e in only(events, ev.ErrorEvent)]
    models_crash = ("other", "request from 127.0.0.1")
    json_error = ("other", "JSONDecodeError")
    abort = ("client_abort", "request from 127.0.0.1")
    if name == "debug":
        assert errors == [json_error, abort]
    else:
        # /v1/models crashes (CacheNotFound after sending 200) at the start and again at the end.
        assert errors == [models_crash, json_error, abort, models_crash]
    for e in only(events, ev.ErrorEvent):
        assert "{not json" not in e.message and "Raw body" not in e.message
        if e.kind == "client_abort":
            assert e.message.endswith("BrokenPipeError: [Errno 32] Broken pipe")
        elif e.message.startswith("request from"):
            assert "CacheNotFound" in e.message


def test_debug_bodies_usage_and_tokens() -> None:
    parser, events = parse_file(FIX / "debug-server.stderr")
    entries = transcript("debug")
    assert parser.version == "0.32.2"

    # Bodies: every POST to a completion endpoint with valid JSON, at arrival (also the 404/400 ones);
    # not /v1/embeddings (404 before the body is read) nor the bad JSON.
    logged = [e for e in entries if e.get("method") == "POST" and e["path"] != "/v1/embeddings"]
    bodies = only(events, ev.RequestBody)
    want_models = [e["request"].get("model") for e in logged] + [None]  # + client-disconnect
    assert [b.model for b in bodies] == want_models
    want = Counter((e["request"].get("model"), bool(e["request"].get("stream")), e["request"]["max_tokens"])
                   for e in logged)
    want[(None, True, 400)] += 1
    assert Counter((b.model, b.stream, b.max_tokens) for b in bodies) == want
    prompts = only(events, ev.PromptText)
    assert [p.line for p in prompts] == [b.line for b in bodies]
    assert prompts[0].text == "Hello there, tell me a story about a dragon."

    # Usage: exactly the non-stream responses, in order.
    usages = only(events, ev.Usage)
    want_usage = [(r["usage"]["prompt_tokens"], r["usage"]["completion_tokens"],
                   r["usage"]["prompt_tokens_details"]["cached_tokens"], r["choices"][0]["finish_reason"])
                  for r in (e.get("response") for e in entries) if isinstance(r, dict)]
    assert [(u.prompt_tokens, u.completion_tokens, u.cached_tokens, u.finish_reason) for u in usages] == want_usage
    assert [u.model for u in usages if u.model] == ["/tmp/tinymlx2", "/tmp/tinymlx", "mlx-community/Tiny-Llama-Test-4bit"]

    # One token record per completion token, for every non-stream request whose tokens no other request's
    # can be mixed with (no other generation started since the previous response): 7 in this run.
    checked = 0
    since: list[ev.Event] = []
    for e in events:
        if isinstance(e, ev.Usage):
            starts = [(i, x) for i, x in enumerate(since) if isinstance(x, ev.GenerationStart)]
            if len(starts) == 1 and not starts[0][1].stream:
                tokens = sum(isinstance(x, ev.TokenDelta) for x in since[starts[0][0]:])
                assert tokens == e.completion_tokens, e
                checked += 1
            since = []
        elif isinstance(e, (ev.GenerationStart, ev.TokenDelta)):
            since.append(e)
    assert checked == 7
    assert Counter(g.stream for g in only(events, ev.GenerationStart)) == Counter(
        bool(e["request"].get("stream")) for e in reached_generation(entries) if "request" in e) + Counter([True])

    # Generated text never reaches an event (PromptText holds only prompts).
    outputs = [r["choices"][0]["message"]["content"] for r in (e.get("response") for e in entries)
               if isinstance(r, dict) and "message" in r["choices"][0]]
    kept = repr([e for e in events if not isinstance(e, ev.PromptText)])
    assert outputs and not any(o in kept for o in outputs if len(o) > 8)


def test_info_log_has_no_debug_events() -> None:
    parser, events = parse_file(FIX / "info-no-hf-cache-server.stderr")
    assert parser.version is None
    for kind in (ev.RequestBody, ev.PromptText, ev.Usage, ev.TokenDelta, ev.GenerationStart):
        assert only(events, kind) == []


# --- public samples ---------------------------------------------------------------------------------------

def sample(prefix: str) -> tuple[MlxParser, list[ev.Event]]:
    (path,) = FIX.glob(f"{prefix}-*.txt")
    return parse_file(path)


def test_sample_001_debug_startup_fetch() -> None:
    _, events = sample("001")
    # Line 1 is the reporter's shell prompt, before any record: the one unknown line.
    assert [e.line for e in only(events, ev.Unparsed)] == [1]
    (lp,) = only(events, ev.LoadProgress)
    assert (lp.status, lp.progress, lp.line) == ("fetching 95 files", 1.0, 7)
    assert only(events, ev.TokenDelta) == []  # urllib3/huggingface_hub DEBUG records are not tokens


@pytest.mark.parametrize(("prefix", "thread"), [("003", "Thread-2"), ("004", "Thread-1")])
def test_samples_003_004_generation_thread_death(prefix: str, thread: str) -> None:
    _, events = sample(prefix)
    assert only(events, ev.Unparsed) == []
    (e,) = events
    assert isinstance(e, ev.ErrorEvent)
    # Both excerpts stop inside the traceback: the event comes from flush(), without the exception line.
    assert (e.kind, e.line, e.message) == ("engine_dead", 1, f"generation thread died ({thread})")


def test_sample_004_with_the_exception_line_the_issue_reports() -> None:
    path = next(FIX.glob("004-*.txt"))
    lines = [*path.read_text().splitlines(), "RuntimeError: [metal::malloc] Resource limit (499000) exceeded."]
    p = MlxParser()
    events = [e for n, t in enumerate(lines, 1) for e in p.parse(n, t)] + p.flush()
    (e,) = events
    assert isinstance(e, ev.ErrorEvent)
    assert e.kind == "engine_dead"
    assert "Resource limit (499000) exceeded" in e.message


def test_sample_006_kv_caches_with_user_cache() -> None:
    parser, events = sample("006")
    assert only(events, ev.Unparsed) == []
    (a,) = only(events, ev.Admission)
    assert (a.sequences, a.cache_gb, a.user_cache_tokens) == (0, 0.0, 0)
    assert only(events, ev.ServerStart)[0].listen == "127.0.0.1:1234"
    assert parser.era == "mlx_lm 0.31.0-0.31.1 (KV Caches)"


def test_sample_007_interleaved_prefills() -> None:
    parser, events = sample("007")
    assert only(events, ev.Unparsed) == []
    progress = only(events, ev.PrefillProgress)
    assert {p.total for p in progress} == {15806, 47330}
    assert [p.total for p in progress][:4] == [15806, 47330, 15806, 47330]
    assert [p.n_tokens for p in progress if p.total == 15806] == [2048, 4096, 6144, 8192]
    assert len(only(events, ev.Admission)) == 2
    assert parser.era == "mlx_lm 0.31.x dev (KV Caches, no user cache)"
