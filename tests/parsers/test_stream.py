"""StreamMeter: what `ietop proxy` measures from the bytes of a response, checked without any network.

- Every recorded stream in fixtures/streams/ (real MLX SSE, vLLM-shaped SSE with real usage, Ollama
  NDJSON per the API doc) gives the expected TTFT, ITL, token counts and model, replayed at its times.
- The rules one by one: role-only deltas, keepalive comments, empty strings, `[DONE]`, CRLF, multi-line
  data, Ollama's stream-by-default, non-stream bodies, embeddings, sniffing without a Content-Type,
  gzip, over-long bodies, malformed and truncated streams, error precedence.
- Properties (hypothesis): any chunking of the same bytes gives the same result, events are timed by
  the chunk that completes them, and no input makes the meter raise.
"""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.api.stream import MALFORMED, StreamMeter, is_inference_path
from parsers.events import ProxyRequest

STREAMS = Path(__file__).resolve().parents[2] / "fixtures" / "streams"
FIXTURES = sorted(p.stem for p in STREAMS.glob("*.json"))


def load(name: str) -> dict[str, Any]:
    return json.loads((STREAMS / f"{name}.json").read_text())


def content_type(fx: dict[str, Any]) -> str | None:
    return dict(fx["headers"]).get("content-type")


def body_of(fx: dict[str, Any]) -> bytes:
    return "".join(text for _, text in fx["chunks"]).encode()


def measure(path: str, chunks: list[tuple[float, bytes]], *, request: Any = None, ct: str | None = None,
            status: int | None = 200, error: str | None = None, end: float | None = None, **kw: Any) -> ProxyRequest:
    req = request if isinstance(request, bytes) else json.dumps(request or {}).encode()
    meter = StreamMeter(path, req, ct, 0.0, **kw)
    for t, chunk in chunks:
        meter.feed(t, chunk)
    last = chunks[-1][0] if chunks else 0.0
    return meter.finish(last + 0.001 if end is None else end, status, error)


def replay(fx: dict[str, Any], **kw: Any) -> ProxyRequest:
    return measure(fx["path"], [(t, text.encode()) for t, text in fx["chunks"]], request=fx["request"],
                   ct=content_type(fx), status=fx["status"], **kw)


def sse(*objs: Any) -> bytes:
    return b"".join(b"data: " + (o if isinstance(o, bytes) else json.dumps(o).encode()) + b"\n\n" for o in objs)


def delta(content: Any = None, role: str | None = None, **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = dict(extra)
    if role is not None:
        d["role"] = role
    if content is not None:
        d["content"] = content
    return {"object": "chat.completion.chunk", "model": "m", "choices": [{"index": 0, "delta": d}]}


# -- the recorded streams ------------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_measurement(name: str) -> None:
    """Each recorded stream replayed at its own times gives the numbers its provenance says."""
    fx = load(name)
    expect = fx["expect"]
    got = replay(fx)
    assert got.line == 0 and got.ts is None
    assert got.method == "POST" and got.path == fx["path"] and got.status == fx["status"]
    assert got.model == expect["model"]
    assert got.stream is expect["stream"]
    assert got.content_chunks == expect["content_chunks"]
    assert got.prompt_tokens == expect["prompt_tokens"]
    assert got.output_tokens == expect["output_tokens"]
    assert got.cached_tokens == expect["cached_tokens"]
    assert got.load_s == pytest.approx(expect.get("load_s")) if expect.get("load_s") else got.load_s is None
    assert got.error == expect.get("error")
    assert got.ttfb_s == pytest.approx(fx["chunks"][0][0])
    assert got.e2e_s == pytest.approx(fx["chunks"][-1][0] + 0.001)
    assert got.bytes_up == len(json.dumps(fx["request"]).encode())
    assert got.bytes_down == len(body_of(fx))
    if expect["stream"]:
        assert got.ttft_s == pytest.approx(expect["ttft_s"])
        assert got.itl_s == pytest.approx(expect["itl_s"], abs=1e-6)
    else:
        assert got.ttft_s is None and got.itl_s is None


def test_real_mlx_ttft_is_the_clients() -> None:
    """On the real MLX transcripts the meter's TTFT is exactly the TTFT the client recorded."""
    for name in ("mlx-chat-stream-usage", "mlx-text-stream-usage", "mlx-chat-stream-nousage"):
        fx = load(name)
        assert replay(fx).ttft_s == pytest.approx(fx["expect"]["client_ttft_s"])


# -- content rules ---------------------------------------------------------------------------------


def test_role_only_keepalive_and_empty_strings_are_not_content() -> None:
    """vLLM's role-only first chunk, MLX's `: keepalive` comments and empty deltas never start TTFT."""
    chunks = [
        (0.1, b": keepalive 5/10\n\n"),
        (0.2, sse(delta("", role="assistant"))),
        (0.3, sse(delta(role="assistant"))),
        (0.4, sse({"object": "text_completion", "choices": [{"index": 0, "text": ""}]})),
        (0.5, sse(delta("Hi"))),
        (0.7, sse(delta(" there"), delta("!"))),
        (0.8, sse({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}}) + b"data: [DONE]\n\n"),
    ]
    got = measure("/v1/chat/completions", chunks, request={"stream": True}, ct="text/event-stream")
    assert got.ttfb_s == pytest.approx(0.1)
    assert got.ttft_s == pytest.approx(0.5)
    assert got.content_chunks == 3
    assert got.itl_s == pytest.approx((0.7 - 0.5) / 2)
    assert (got.prompt_tokens, got.output_tokens, got.error) == (5, 3, None)


def test_reasoning_and_tool_calls_are_generated_content() -> None:
    """A thinking model's first token is reasoning text; a tool call is generated output too."""
    chunks = [(0.1, sse(delta(role="assistant", reasoning_content="hmm"))),
              (0.2, sse(delta(tool_calls=[{"index": 0, "function": {"arguments": "{"}}]))),
              (0.3, sse(delta("ok")))]
    got = measure("/v1/chat/completions", chunks, request={"stream": True}, ct="text/event-stream")
    assert (got.ttft_s, got.content_chunks) == (pytest.approx(0.1), 3)


def test_ollama_thinking_and_generate_response_are_content() -> None:
    lines = [{"model": "q", "message": {"role": "assistant", "content": "", "thinking": "Let"}, "done": False},
             {"model": "q", "message": {"role": "assistant", "content": "A"}, "done": False},
             {"model": "q", "message": {"role": "assistant", "content": ""}, "done": True, "eval_count": 2,
              "prompt_eval_count": 7, "load_duration": 2_500_000_000}]
    got = measure("/api/chat", [(0.1 * (i + 1), json.dumps(o).encode() + b"\n") for i, o in enumerate(lines)],
                  request={"model": "q"}, ct="application/x-ndjson")
    assert (got.ttft_s, got.content_chunks, got.stream) == (pytest.approx(0.1), 2, True)
    assert (got.prompt_tokens, got.output_tokens, got.load_s) == (7, 2, pytest.approx(2.5))


def test_stream_flag_defaults_differ_between_ollama_and_openai() -> None:
    """Ollama's native routes stream unless told not to; OpenAI routes only when asked."""
    assert measure("/api/generate", [(0.1, b"{}\n")], request={"model": "x"}).stream is True
    assert measure("/api/generate", [(0.1, b"{}")], request={"model": "x", "stream": False}).stream is False
    assert measure("/v1/completions", [(0.1, b"{}")], request={"model": "x"}).stream is False
    # No usable request body: the framing says whether it streamed.
    assert measure("/v1/completions", [(0.1, sse(delta("a")))], request=b"{not json").stream is True


def test_model_from_request_else_response() -> None:
    chunks = [(0.1, sse({"model": "served", "choices": [{"delta": {"content": "a"}}]}))]
    assert measure("/v1/chat/completions", chunks, request={"model": "asked"}).model == "asked"
    assert measure("/v1/chat/completions", chunks, request={"messages": []}).model == "served"


def test_embeddings_never_count_content() -> None:
    body = json.dumps({"model": "e", "embeddings": [[0.1]], "prompt_eval_count": 4, "response": "x"}).encode()
    got = measure("/api/embed", [(0.1, body)], request={"model": "e"}, ct="application/json")
    assert (got.content_chunks, got.ttft_s, got.prompt_tokens, got.output_tokens) == (0, None, 4, None)


def test_openai_usage_with_null_details_and_continuous_usage() -> None:
    """vLLM sends `prompt_tokens_details: null`; with continuous usage every chunk carries usage: last wins."""
    chunks = [(0.1, sse({"choices": [{"delta": {"content": "a"}}], "usage": {"prompt_tokens": 9, "completion_tokens": 1,
                                                                            "prompt_tokens_details": None}})),
              (0.2, sse({"choices": [{"delta": {"content": "b"}}], "usage": {"prompt_tokens": 9, "completion_tokens": 2,
                                                                            "prompt_tokens_details": {"cached_tokens": 8}}}))]
    got = measure("/v1/chat/completions", chunks, request={"stream": True}, ct="text/event-stream")
    assert (got.prompt_tokens, got.output_tokens, got.cached_tokens) == (9, 2, 8)


def test_bad_usage_values_are_ignored() -> None:
    body = json.dumps({"usage": {"prompt_tokens": True, "completion_tokens": -1}, "eval_count": "3"}).encode()
    got = measure("/v1/completions", [(0.1, body)], ct="application/json")
    assert (got.prompt_tokens, got.output_tokens, got.error) == (None, None, None)


# -- framing ----------------------------------------------------------------------------------------


def test_crlf_multiline_data_and_other_fields() -> None:
    """SSE as the spec allows it: CRLF, `event:`/`id:`/`retry:` lines, one event split over data lines."""
    body = (b"retry: 1000\r\nid: 1\r\nevent: message\r\ndata: {\"choices\": [{\"delta\":\r\n"
            b"data:  {\"content\": \"x\"}}]}\r\n\r\ndata: [DONE]\r\n\r\n")
    got = measure("/v1/chat/completions", [(0.2, body)], request={"stream": True}, ct="text/event-stream")
    assert (got.content_chunks, got.ttft_s, got.error) == (1, pytest.approx(0.2), None)


def test_last_line_without_newline_is_parsed_at_finish() -> None:
    body = json.dumps({"message": {"content": "a"}, "done": True, "eval_count": 1}).encode()
    got = measure("/api/chat", [(0.1, body)], request={"model": "m"}, ct="application/x-ndjson", end=0.5)
    assert (got.content_chunks, got.output_tokens, got.ttft_s, got.error) == (1, 1, pytest.approx(0.5), None)


def test_pretty_printed_non_stream_json() -> None:
    body = json.dumps({"choices": [{"message": {"content": "hi"}}], "usage": {"prompt_tokens": 3}}, indent=2)
    got = measure("/v1/chat/completions", [(0.1, body[:10].encode()), (0.2, body[10:].encode())],
                  ct="application/json")
    assert (got.content_chunks, got.prompt_tokens, got.ttft_s, got.ttfb_s, got.error) == (
        1, 3, None, pytest.approx(0.1), None)


@pytest.mark.parametrize(
    ("body", "request_body", "stream", "chunks"),
    [
        (sse(delta("a"), delta("b")), b"", True, 2),
        (b": keepalive 1/2\n\n" + sse(delta("a")), b"", True, 1),
        (b'{"response":"a","done":false}\n{"response":"b","done":true}\n', {"model": "m"}, True, 2),
        (b'\n\n  {"response":"a","done":false}\n{"response":"","done":true}\n', {"stream": None}, True, 1),
        (json.dumps({"choices": [{"message": {"content": "x"}}]}, indent=1).encode(), {}, False, 1),
    ],
)
def test_framing_is_sniffed_without_content_type(body: bytes, request_body: Any, stream: bool, chunks: int) -> None:
    got = measure("/api/generate" if b"response" in body else "/v1/chat/completions", [(0.1, body)],
                  request=request_body, ct=None)
    assert (got.stream, got.content_chunks, got.error) == (stream, chunks, None)


def test_gzip_body_is_measured_and_counted_compressed() -> None:
    """A compressed answer is forwarded as is; the meter decodes it for measuring only."""
    raw = sse(delta("a"), delta("b"), {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}})
    packed = gzip.compress(raw)
    chunks = [(0.1 + i * 0.01, packed[i:i + 7]) for i in range(0, len(packed), 7)]
    got = measure("/v1/chat/completions", chunks, request={"stream": True}, ct="text/event-stream",
                  content_encoding="gzip")
    assert (got.content_chunks, got.prompt_tokens, got.bytes_down, got.error) == (2, 4, len(packed), None)


def test_unknown_encoding_is_timed_not_parsed() -> None:
    got = measure("/v1/chat/completions", [(0.1, b"\x8b\x00garbage")], ct="text/event-stream",
                  content_encoding="br")
    assert (got.ttfb_s, got.content_chunks, got.error, got.bytes_down) == (pytest.approx(0.1), 0, None, 9)


def test_bad_gzip_is_malformed() -> None:
    got = measure("/v1/chat/completions", [(0.1, b"not gzip at all")], ct="application/json", content_encoding="gzip")
    assert got.error == MALFORMED


def test_overlong_body_keeps_memory_bounded_and_finds_usage_at_either_end() -> None:
    """A 6 MB embeddings answer is not held: its head and tail are scanned for model and usage."""
    vec = ",".join(["0.0123456"] * 1000)
    body = ('{"object":"list","model":"emb","data":[' + ",".join(
        f'{{"index":{i},"embedding":[{vec}]}}' for i in range(600)) + '],"usage":{"prompt_tokens":77,"total_tokens":77}}')
    data = body.encode()
    assert len(data) > 5_000_000
    meter = StreamMeter("/v1/embeddings", b'{"input": ["a"]}', "application/json", 0.0)
    peak = 0
    for i in range(0, len(data), 65536):
        meter.feed(0.1, data[i:i + 65536])
        peak = max(peak, meter.held_bytes)
    got = meter.finish(0.2, 200, None)
    assert peak <= (4 << 20) + 65536
    assert meter.held_bytes == 0
    assert (got.prompt_tokens, got.model, got.error, got.bytes_down) == (77, "emb", None, len(data))


def test_small_max_line_still_finds_usage() -> None:
    body = json.dumps({"model": "m", "x": "y" * 5000, "prompt_eval_count": 12, "eval_count": 3}).encode()
    got = measure("/api/generate", [(0.1, body)], request={"stream": False}, ct="application/json", max_line=100)
    assert (got.prompt_tokens, got.output_tokens, got.model) == (12, 3, "m")


def test_unterminated_multiline_data_is_bounded() -> None:
    meter = StreamMeter("/v1/completions", b"{}", "text/event-stream", 0.0, max_line=1000)
    for _ in range(100):
        meter.feed(0.1, b"data: {not json\n")
    assert meter.held_bytes < 2000
    assert meter.finish(0.2, 200, None).error == MALFORMED


# -- errors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ct", "body"),
    [
        ("text/event-stream", b'data: {"choices": [{"delta": {"content": "a"}}]}\n\ndata: {"cut\n\n'),
        ("text/event-stream", b"hello world\n\n"),
        ("text/event-stream", b"data: [1, 2]\n\n"),
        ("text/event-stream", b'data: {"choices": [{"delta": {"content": "\xff\xfe"}}]}\n\n'),
        ("application/x-ndjson", b'{"response": "a"}\nnot json\n'),
        ("application/json", b'{"choices": ['),
        ("application/json", b""),
    ],
)
def test_malformed_2xx_bodies_set_the_error_and_keep_what_was_measured(ct: str, body: bytes) -> None:
    got = measure("/api/generate" if "ndjson" in ct else "/v1/chat/completions", [(0.1, body)] if body else [],
                  request={"stream": True}, ct=ct, end=0.3)
    assert got.error == MALFORMED
    assert got.e2e_s == pytest.approx(0.3)
    if body.startswith(b'data: {"choices"') and b"\xff" not in body:
        assert got.content_chunks == 1


def test_error_bodies_of_failed_requests_are_not_malformed() -> None:
    got = measure("/v1/chat/completions", [(0.1, b"Not Found")], ct="text/plain", status=404)
    assert (got.status, got.error) == (404, None)


def test_caller_error_wins_and_measurement_is_kept() -> None:
    """A client that disconnects mid-stream cuts a line in half: that is the disconnect, not malformed."""
    chunks = [(0.1, sse(delta("a"))), (0.2, sse(delta("b"))), (0.3, b'data: {"choices": [{"del')]
    got = measure("/v1/chat/completions", chunks, request={"stream": True}, ct="text/event-stream",
                  error="client disconnected", end=0.4)
    assert (got.error, got.content_chunks, got.ttft_s, got.itl_s) == (
        "client disconnected", 2, pytest.approx(0.1), pytest.approx(0.1))


def test_no_response_at_all() -> None:
    got = StreamMeter("/api/chat", b'{"model": "m"}', None, 1.0).finish(1.5, 502, "upstream down")
    assert (got.status, got.error, got.ttfb_s, got.e2e_s, got.bytes_down, got.model, got.stream) == (
        502, "upstream down", None, pytest.approx(0.5), 0, "m", True)


def test_inference_paths() -> None:
    for path in ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/chat/completions", "/api/chat",
                 "/api/generate", "/api/embed", "/api/embeddings", "/api/chat/", "/v1/completions?x=1"):
        assert is_inference_path(path), path
    for path in ("/", "/api/tags", "/api/ps", "/v1/models", "/health", "/metrics", "/api/show", "/v1/chat"):
        assert not is_inference_path(path), path


# -- properties -------------------------------------------------------------------------------------


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


def _feed_parts(fx: dict[str, Any], parts: list[bytes], times: list[float], **kw: Any) -> ProxyRequest:
    meter = StreamMeter(fx["path"], json.dumps(fx["request"]).encode(), content_type(fx), 0.0, **kw)
    for t, part in zip(times, parts):
        meter.feed(t, part)
    return meter.finish(10_000_000.0, fx["status"], None)


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(FIXTURES), cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=40),
       sniff=st.booleans(), max_line=st.sampled_from([40, 300, 4 << 20]))
def test_any_chunking_gives_the_same_result(name: str, cuts: list[int], sniff: bool, max_line: int) -> None:
    """The same bytes at the same time give the same measurement however they are cut into chunks."""
    fx = load(name)
    if sniff:
        fx["headers"] = []
    data = body_of(fx)
    parts = _cut(data, cuts)
    whole = _feed_parts(fx, [data], [1.0], max_line=max_line)
    assert _feed_parts(fx, parts, [1.0] * len(parts), max_line=max_line) == whole


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from([n for n in FIXTURES if "nonstream" not in n and "embed" not in n]),
       cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=40))
def test_events_are_timed_by_the_chunk_that_completes_them(name: str, cuts: list[int]) -> None:
    """Time each chunk by its end offset: the first and last content events then land on the end of the
    chunk holding their final byte, which one-byte chunks locate exactly."""
    fx = load(name)
    data = body_of(fx)
    fine = _feed_parts(fx, [data[i:i + 1] for i in range(len(data))], [float(i + 1) for i in range(len(data))])
    parts = _cut(data, cuts)
    ends = [float(sum(map(len, parts[:i + 1]))) for i in range(len(parts))]
    coarse = _feed_parts(fx, parts, ends)
    assert fine.ttft_s is not None and fine.itl_s is not None and coarse.ttft_s is not None
    n = fine.content_chunks
    assert coarse.content_chunks == n

    def landing(offset: float) -> float:
        return min(e for e in ends if e >= offset - 1e-9)

    assert coarse.ttft_s == landing(fine.ttft_s)
    assert coarse.ttfb_s == ends[0]
    if n > 1 and coarse.itl_s is not None:
        assert coarse.ttft_s + coarse.itl_s * (n - 1) == pytest.approx(landing(fine.ttft_s + fine.itl_s * (n - 1)))


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=600), cuts=st.lists(st.integers(min_value=0, max_value=700), max_size=8),
       ct=st.sampled_from([None, "text/event-stream", "application/x-ndjson", "application/json", "text/plain"]),
       enc=st.sampled_from([None, "gzip", "br"]), path=st.sampled_from(["/api/chat", "/v1/completions", "/api/embed"]),
       status=st.sampled_from([200, 404, None]))
def test_never_raises_and_is_chunking_invariant_on_any_bytes(data: bytes, cuts: list[int], ct: str | None,
                                                             enc: str | None, path: str, status: int | None) -> None:
    def run(parts: list[bytes]) -> ProxyRequest:
        meter = StreamMeter(path, data[:50], ct, 0.0, content_encoding=enc, max_line=64)
        for part in parts:
            meter.feed(1.0, part)
        return meter.finish(2.0, status, None)

    whole = run([data])
    assert whole.error in (None, MALFORMED)
    assert whole.bytes_down == len(data)
    assert run(_cut(data, cuts)) == whole


@settings(max_examples=100, deadline=None)
@given(pieces=st.lists(st.sampled_from([
    b"data: ", b"{", b"}", b'"choices"', b":", b"[", b"]", b'{"delta":{"content":"x"}}', b'"usage"',
    b'{"prompt_tokens":3}', b"\n", b"\r\n", b"\n\n", b": keepalive 1/2", b"[DONE]", b'"response":"a"', b",",
]), max_size=60), cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=10))
def test_sse_like_garbage_is_chunking_invariant(pieces: list[bytes], cuts: list[int]) -> None:
    data = b"".join(pieces)
    for ct in ("text/event-stream", "application/x-ndjson", None):
        whole = measure("/v1/chat/completions", [(1.0, data)], ct=ct, request={"stream": True}, end=2.0)
        parts = _cut(data, cuts)
        assert measure("/v1/chat/completions", [(1.0, p) for p in parts], ct=ct, request={"stream": True},
                       end=2.0) == whole
