"""One literal case per mlx_lm.server line shape, the multi-line state (bodies, tracebacks, continuations),
and totality.

Lines marked (run) are from our own mlx_lm.server 0.32.2 run (fixtures/mlx/*-server.stderr), (NNN) from
the public samples, (ref) were written from the message templates of reference/mlx-formats.md §3 and are
synthetic.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from parsers import events as ev
from parsers.mlx.log import MlxParser
from parsers.text.framing import split_lines

TS = "2026-11-29 15:47:49,581"
T0 = datetime(2026, 11, 29, 15, 47, 49, 581000)


def rec(msg: str, level: str = "DEBUG", ts: str = TS) -> str:
    return f"{ts} - {level} - {msg}"


def feed(lines: list[str], parser: MlxParser | None = None, flush: bool = True) -> list[ev.Event]:
    p = parser if parser is not None else MlxParser()
    out: list[ev.Event] = []
    for n, text in enumerate(lines, 1):
        out.extend(p.parse(n, text))
    if flush:
        out.extend(p.flush())
    return out


def only(events: list[ev.Event], kind: type[ev.Event]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


START = rec("Starting httpd at 127.0.0.1 on port 18081...", "INFO")

# (id, line, expected type or None for no event, expected attributes). Each line is fed after START so it
# is never the first record.
CASES: list[tuple[str, str, type[ev.Event] | None, dict[str, Any]]] = [
    ("httpd (run)", rec("Starting httpd at 127.0.0.1 on port 18081...", "INFO"),
     ev.ServerStart, {"version": None, "listen": "127.0.0.1:18081", "ts": T0}),
    ("prompt cache (run)", rec("Prompt Cache: 10 sequences, 0.01 GB", "INFO"),
     ev.Admission, {"sequences": 10, "cache_gb": 0.01, "user_cache_tokens": None}),
    ("prompt cache type line (run)", rec("- assistant: 10 sequences, 0.01 GB", "INFO"), None, {}),
    ("kv caches 0.31.0 (006)", rec("KV Caches: 3 seq, 1.25 GB, latest user cache 812 tokens", "INFO"),
     ev.Admission, {"sequences": 3, "cache_gb": 1.25, "user_cache_tokens": 812}),
    ("kv caches dev (007)", rec("KV Caches: 0 seq, 0.00 GB", "INFO"),
     ev.Admission, {"sequences": 0, "cache_gb": 0.0, "user_cache_tokens": None}),
    ("progress (run)", rec("Prompt processing progress: 22/38", "INFO"),
     ev.PrefillProgress, {"task": None, "n_tokens": 22, "total": 38, "t_s": None, "progress": pytest.approx(22 / 38)}),
    ("progress zero total (ref)", rec("Prompt processing progress: 0/0", "INFO"),
     ev.PrefillProgress, {"n_tokens": 0, "total": 0, "progress": 0.0}),
    ("patched disk cache line (007)", rec("Disk cache index: 0 entries", "INFO"), None, {}),
    ("stream start (run)", rec("Starting stream:"), ev.GenerationStart, {"stream": True}),
    ("completion start (run)", rec("Starting completion:"), ev.GenerationStart, {"stream": False}),
    ("token (run)", rec(" obj"), ev.TokenDelta, {"ts": T0}),
    ("token control char (run)", rec("\x03"), ev.TokenDelta, {}),
    ("empty token (ref)", f"{TS} - DEBUG - ", ev.TokenDelta, {}),
    ("empty token, trailing space stripped (ref)", f"{TS} - DEBUG -", ev.TokenDelta, {}),
    ("token like a message (ref)", rec("Starting stream: now"), ev.TokenDelta, {}),
    ("token like a message 2 (ref)", rec("Prompt processing progress: 1/2"), ev.TokenDelta, {}),
    ("token like a message 3 (ref)", rec("Incoming Request Body:"), ev.TokenDelta, {}),
    ("token *** (ref)", rec("*** bold ***"), ev.TokenDelta, {}),
    ("cli perf line is a token (ref)", rec("Prompt: 14 tokens, 5.468 tokens-per-sec"), ev.TokenDelta, {}),
    ("old prompt tps (ref)", rec("Prompt: 212.503 tokens-per-sec"),
     ev.Throughput, {"kind": "prompt", "tokens_per_s": 212.503}),
    ("old generation tps (ref)", rec("Generation: 41.250 tokens-per-sec"),
     ev.Throughput, {"kind": "generation", "tokens_per_s": 41.25}),
    ("old peak memory (ref)", rec("Peak memory: 4.521 GB"), ev.PeakMemory, {"gb": 4.521}),
    ("cache limit (ref)", rec("Setting cache limit to 8.0 GB"), None, {}),
    ("slot cache reset (ref)", rec("*** Resetting cache. ***"), None, {}),
    ("slot cache prefix (ref)",
     rec("*** Cache is prefix of prompt (cache_len: 120, prompt_len: 180). Processing suffix. ***"), None, {}),
    ("slot cache trim (ref)", rec("*** Common prefix (100) shorter than cache (120). Attempting trim. ***"), None, {}),
    ("slot cache trimming (ref)", rec("    Trimming 20 tokens from cache."), None, {}),
    ("slot cache untrimmable (ref)", rec("    Cache cannot be trimmed. Resetting cache."), None, {}),
    ("slot cache returning (ref)", rec("Returning 80 tokens for processing."), None, {}),
    ("urllib3 connect (001)", rec("Starting new HTTPS connection (1): huggingface.co:443"), None, {}),
    ("hub GET (001)",
     rec('https://huggingface.co:443 "GET /api/models/mlx-community/DeepSeek-v3-0324-4bit/revision/main HTTP/1.1" 307 96'),
     None, {}),
    ("filelock (ref)", rec("Lock 140 acquired on /root/.cache/huggingface/hub/.locks/x.lock"), None, {}),
    ("warning record (ref)", rec("Received tools but model does not support tool calling. If you think this is an "
                                 "error, file an issue here: https://github.com/ml-explore/mlx-lm/issues", "WARNING"),
     None, {}),
    ("thread died 0.32.2 (ref)", rec("mlx_lm.server generation thread died: [metal::malloc] Resource limit (499000) "
                                     "exceeded.", "ERROR"),
     ev.ErrorEvent, {"kind": "engine_dead",
                     "message": "generation thread died: [metal::malloc] Resource limit (499000) exceeded."}),
    ("json decode error (run)", rec("JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column "
                                    "2 (char 1) - Raw body: {not json", "ERROR"),
     ev.ErrorEvent, {"kind": "other", "message": "JSONDecodeError: Expecting property name enclosed in double quotes: "
                                                 "line 1 column 2 (char 1)"}),
    ("invalid body (ref)", rec('Invalid Request Body: [\n\t"secret"\n]', "ERROR"),
     ev.ErrorEvent, {"kind": "other", "message": "Invalid Request Body (not a JSON object)"}),
    ("cache state error (ref)", rec("Unexpected cache state: com_prefix_len (9) > cache_len (4). Resetting cache.",
                                    "ERROR"),
     ev.ErrorEvent, {"kind": "other"}),
    ("access (run)", '127.0.0.1 - - [29/Nov/2026 15:47:49] "POST /v1/chat/completions HTTP/1.1" 200 -',
     ev.HttpAccess, {"status": 200, "latency_s": None, "latency_raw": "", "client": "127.0.0.1", "method": "POST",
                     "path": "/v1/chat/completions", "ts": datetime(2026, 11, 29, 15, 47, 49)}),
    ("access query (run)", '127.0.0.1 - - [29/Nov/2026 15:51:46] "GET /v1/models?x=1 HTTP/1.1" 200 -',
     ev.HttpAccess, {"method": "GET", "path": "/v1/models?x=1"}),
    ("access ipv6 (ref)", '::1 - - [01/Feb/2026 09:05:00] "GET /health HTTP/1.1" 503 -',
     ev.HttpAccess, {"client": "::1", "status": 503, "ts": datetime(2026, 2, 1, 9, 5)}),
    ("access garbage (run)", '127.0.0.1 - - [29/Nov/2026 15:51:46] "HELLO" 400 -',
     ev.HttpAccess, {"status": 400, "method": "", "path": "HELLO"}),
    ("access quote in path (ref)", '10.0.0.2 - - [29/Nov/2026 15:51:46] "GET /a"b HTTP/1.1" 404 -',
     ev.HttpAccess, {"status": 404, "method": "GET", "path": '/a"b'}),
    ("access bad month (ref)", '127.0.0.1 - - [29/Foo/2026 15:51:46] "GET / HTTP/1.1" 200 -',
     ev.HttpAccess, {"ts": None, "path": "/"}),
    ("http.server error line (run)", "127.0.0.1 - - [29/Nov/2026 15:51:45] code 501, message Unsupported method "
                                     "('HEAD')", None, {}),
    ("fetching bar (001)", "Fetching 95 files: 100%|██████████| 95/95 [00:00<00:00, 19402.95it/s]",
     ev.LoadProgress, {"progress": 1.0, "status": "fetching 95 files", "ts": None}),
    ("fetching bar redrawn (ref)", "\rFetching 4 files:   0%|          | 0/4 [00:00<?, ?it/s]\rFetching 4 files:  "
                                   "50%|█████     | 2/4 [00:01<00:01, 1.2it/s]",
     ev.LoadProgress, {"progress": 0.5, "status": "fetching 4 files"}),
    ("libc++abi metal oom (ref)", "libc++abi: terminating due to uncaught exception of type std::runtime_error: "
                                  "[METAL] Command buffer execution failed: Insufficient Memory "
                                  "(00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)",
     ev.ErrorEvent, {"kind": "oom", "ts": None}),
    ("bare metal malloc (ref)", "RuntimeError: [metal::malloc] Resource limit (499000) exceeded.",
     ev.ErrorEvent, {"kind": "oom", "message": "RuntimeError: [metal::malloc] Resource limit (499000) exceeded."}),
    ("shell killed (ref)", "zsh: killed     mlx_lm.server --model mlx-community/DeepSeek-v3-0324-4bit",
     ev.ErrorEvent, {"kind": "engine_dead"}),
    ("transformers warning (run)", "[transformers] Token indices sequence length is longer than the specified maximum "
                                   "sequence length for this model (15462 > 8192).", None, {}),
    ("unknown line after a record (ref)", "whatever this is", None, {}),
    ("separator (run)", "-" * 40, None, {}),
]


@pytest.mark.parametrize(("text", "kind", "attrs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_line_shape(text: str, kind: type[ev.Event] | None, attrs: dict[str, Any]) -> None:
    p = MlxParser()
    assert p.parse(1, START)
    events = p.parse(2, text) + p.flush()
    if kind is None:
        assert events == []
        return
    assert len(events) == 1, events
    (e,) = events
    assert type(e) is kind
    assert e.line == 2
    for name, want in attrs.items():
        assert getattr(e, name) == want, name


def test_record_time_with_and_without_ms() -> None:
    events = feed([rec("x", ts="2026-11-29 15:47:49,007"), "2026-11-29 15:47:50 - INFO - Prompt Cache: 1 sequences, "
                   "0.00 GB", rec("y", ts="2026-02-30 10:00:00,000")])
    assert [e.ts for e in events] == [datetime(2026, 11, 29, 15, 47, 49, 7000), datetime(2026, 11, 29, 15, 47, 50),
                                      None]
    assert [type(e) for e in events] == [ev.TokenDelta, ev.Admission, ev.TokenDelta]


def test_request_body_multi_line_reports_on_its_first_line() -> None:
    body = {"model": "mlx-community/Qwen3-4B-4bit", "messages": [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": [{"type": "text", "text": "Hi {there}"}, {"type": "image_url", "image_url": {}}]},
    ], "max_completion_tokens": 64, "stream": True}
    pretty = json.dumps(body, indent="\t").split("\n")
    lines = [START, rec("Incoming Request Body: " + pretty[0]), *pretty[1:], rec("Starting stream:")]
    p = MlxParser()
    out = [(n, p.parse(n, t)) for n, t in enumerate(lines, 1)]
    # Nothing until the closing brace, then both events carry line 2 and its time.
    assert all(evs == [] for n, evs in out[1:-2])
    done = out[-2][1]
    assert [type(e) for e in done] == [ev.RequestBody, ev.PromptText]
    rb, pt = done
    assert (rb.line, rb.ts, rb.model, rb.stream, rb.max_tokens) == (2, T0, "mlx-community/Qwen3-4B-4bit", True, 64)
    assert (pt.line, pt.text, pt.chars) == (2, "Be terse.\nHi {there}", len("Be terse.\nHi {there}"))
    assert "Be terse" not in repr(pt)
    assert [type(e) for e in out[-1][1]] == [ev.GenerationStart]


def test_request_body_defaults_and_prompt() -> None:
    events = feed([START, rec('Incoming Request Body: {"model": "default_model", "prompt": "def f():", "max_tokens": '
                              '10}')])
    rb, pt = only(events, ev.RequestBody)[0], only(events, ev.PromptText)[0]
    assert (rb.model, rb.stream, rb.max_tokens) == (None, False, 10)
    assert pt.text == "def f():"


def test_request_body_not_an_object_or_not_json() -> None:
    assert feed([START, rec("Incoming Request Body: [1, 2]")])[1:] == []
    # Not JSON: collected until the next record, then dropped; the record after it is parsed normally.
    events = feed([START, rec("Incoming Request Body: {oops"), "}", rec("Starting completion:")])
    assert [type(e) for e in events] == [ev.ServerStart, ev.GenerationStart]


def test_body_cut_by_a_new_record_is_dropped() -> None:
    events = feed([START, rec("Incoming Request Body: {"), '\t"messages": [', rec("Prompt Cache: 0 sequences, 0.00 GB",
                                                                                    "INFO")])
    assert [type(e) for e in events] == [ev.ServerStart, ev.Admission]


def test_huge_body_gives_up_with_one_unparsed() -> None:
    chunk = "\t\t" + '"' + "x" * 100_000 + '",'
    lines = [START, rec("Incoming Request Body: {"), *([chunk] * 60), "}"]
    events = feed(lines)
    unparsed = only(events, ev.Unparsed)
    assert len(unparsed) == 1
    assert unparsed[0].line == 2
    assert not only(events, ev.RequestBody)


def test_outgoing_response_usage_version_and_no_content() -> None:
    resp = {"id": "chatcmpl-1", "system_fingerprint": "0.32.2-0.32.4-Linux-6.18.44-x86_64-with-glibc2.36-x86_64",
            "object": "chat.completion", "model": "default_model", "created": 1,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "SECRET-OUT"}}],
            "usage": {"prompt_tokens": 23, "completion_tokens": 16, "total_tokens": 39,
                      "prompt_tokens_details": {"cached_tokens": 22}}}
    pretty = json.dumps(resp, indent="\t").split("\n")
    p = MlxParser()
    assert p.version is None
    events = feed([START, rec("Outgoing Response: " + pretty[0]), *pretty[1:]], p)
    (u,) = only(events, ev.Usage)
    assert (u.line, u.prompt_tokens, u.completion_tokens, u.cached_tokens, u.model, u.finish_reason) == (
        2, 23, 16, 22, None, "stop")
    assert p.version == "0.32.2"
    assert "SECRET-OUT" not in repr(events)


def test_old_fingerprint_and_missing_usage() -> None:
    p = MlxParser()
    events = feed([START, rec('Outgoing Response: {"system_fingerprint": "fp_3b8c", "model": "m", "choices": []}')], p)
    (u,) = only(events, ev.Usage)
    assert (u.prompt_tokens, u.completion_tokens, u.cached_tokens, u.model, u.finish_reason) == (None, None, None, "m",
                                                                                                None)
    assert p.version is None


def test_token_text_with_newlines_is_continuation() -> None:
    lines = [START, rec("\n"), "", rec('"""'), "Traceback (most recent call last):", "    x = 1",
             "ValueError: from the model", "Prompt Cache: 9 sequences, 9 GB", rec("ok")]
    events = feed(lines)
    assert [type(e) for e in events] == [ev.ServerStart, ev.TokenDelta, ev.TokenDelta, ev.TokenDelta]


def test_unknown_lines_before_the_first_record_are_unparsed() -> None:
    lines = ["% mlx_lm.server --model m --log-level DEBUG",
             "/usr/lib/python3.9/site-packages/urllib3/__init__.py:35: NotOpenSSLWarning: urllib3 v2 only supports "
             "OpenSSL 1.1.1+",
             "  warnings.warn(",
             "Calling `python -m mlx_lm.server...` directly is deprecated. Use `mlx_lm.server...` or "
             "`python -m mlx_lm server ...` instead.",
             "[WARNING] Generating with a model that requires 70000 MB which is close to the maximum recommended size "
             "of 74000 MB. This can be slow. See the documentation for possible work-arounds: "
             "https://github.com/ml-explore/mlx-lm/tree/main#large-models",
             "",
             "some other stray line",
             START,
             "some other stray line"]
    events = feed(lines)
    assert [(type(e), e.line) for e in events] == [(ev.Unparsed, 1), (ev.Unparsed, 7), (ev.ServerStart, 8)]


def test_bare_httpd_print_before_2024_04_counts_as_a_record() -> None:
    events = feed(["Starting httpd at 0.0.0.0 on port 8080...", "anything"])
    assert events == [ev.ServerStart(1, None, None, "0.0.0.0:8080")]


GEN_TB = [
    "Exception in thread Thread-2 (_generate):",
    "Traceback (most recent call last):",
    '  File "/x/threading.py", line 1044, in _bootstrap_inner',
    "    self.run()",
    "    ~~~~~~~~^^",
    '  File "/x/mlx_lm/generate.py", line 1217, in _next',
    "    mx.async_eval(batch.y, batch.logprobs)",
]


def test_generation_thread_traceback_folds_its_exception_line() -> None:
    lines = [START, *GEN_TB, "RuntimeError: [metal::malloc] Resource limit (499000) exceeded.",
             "this line follows the traceback"]
    p = MlxParser()
    out = [p.parse(n, t) for n, t in enumerate(lines, 1)]
    assert all(evs == [] for evs in out[1:-2])
    (e,) = out[-2]
    assert isinstance(e, ev.ErrorEvent)
    assert (e.kind, e.line, e.ts) == ("engine_dead", 2, None)
    assert e.message == "generation thread died (Thread-2): RuntimeError: [metal::malloc] Resource limit (499000) " \
                        "exceeded."
    assert out[-1] == []
    assert p.flush() == []


def test_generation_thread_traceback_cut_short_is_emitted_by_flush() -> None:
    p = MlxParser()
    assert feed(GEN_TB, p, flush=False) == []
    (e,) = p.flush()
    assert isinstance(e, ev.ErrorEvent)
    assert (e.kind, e.line, e.message) == ("engine_dead", 1, "generation thread died (Thread-2)")
    assert p.flush() == []


def test_chained_traceback_is_one_event_and_records_interleave() -> None:
    lines = ["Exception in thread Thread-1:", "Traceback (most recent call last):", "  File \"a.py\", line 1, in f",
             rec("Incoming Request Body: {}"), "ValueError: first", "",
             "During handling of the above exception, another exception occurred:", "",
             "Traceback (most recent call last):", "  File \"a.py\", line 3, in f", "KeyError: 'second'",
             "Fetching 2 files: 100%|██| 2/2 [00:00<00:00, 3.0it/s]"]
    events = feed(lines)
    errors = only(events, ev.ErrorEvent)
    assert [(e.kind, e.line, e.message) for e in errors] == [
        ("engine_dead", 1, "generation thread died (Thread-1): ValueError: first")]
    assert len(only(events, ev.RequestBody)) == 1
    assert len(only(events, ev.LoadProgress)) == 1
    assert not only(events, ev.Unparsed)


def test_other_thread_dies() -> None:
    (e,) = feed(["Exception in thread Thread-7 (worker):", "Traceback (most recent call last):", "OSError: boom"])
    assert isinstance(e, ev.ErrorEvent)
    assert (e.kind, e.message) == ("other", "thread Thread-7 died: OSError: boom")


def socket_tb(exc: str) -> list[str]:
    return ["-" * 40, "Exception occurred during processing of request from ('127.0.0.1', 58516)",
            "Traceback (most recent call last):", '  File "/x/socketserver.py", line 691, in process_request_thread',
            "    self.finish_request(request, client_address)", exc, "-" * 40]


@pytest.mark.parametrize(("exc", "kind"), [
    ("BrokenPipeError: [Errno 32] Broken pipe", "client_abort"),
    ("ConnectionResetError: [Errno 104] Connection reset by peer", "client_abort"),
    ("huggingface_hub.errors.CacheNotFound: Cache directory not found: /root/.cache/huggingface/hub.", "other"),
    ("RuntimeError: [metal::malloc] Resource limit (499000) exceeded.", "oom"),
])
def test_request_handler_traceback(exc: str, kind: str) -> None:
    p = MlxParser()
    events = feed([START, *socket_tb(exc), '127.0.0.1 - - [29/Nov/2026 15:47:59] "GET /health HTTP/1.1" 200 -'], p)
    (e,) = only(events, ev.ErrorEvent)
    assert (e.kind, e.line, e.message) == (kind, 3, f"request from 127.0.0.1:58516 failed: {exc}")
    assert len(only(events, ev.HttpAccess)) == 1
    assert not only(events, ev.Unparsed)


def test_python39_wording_and_cut_request_traceback() -> None:
    lines = ["-" * 40, "Exception happened during processing of request from ('10.0.0.5', 40000)",
             "Traceback (most recent call last):", "-" * 40]
    (e,) = feed(lines)
    assert isinstance(e, ev.ErrorEvent)
    assert (e.kind, e.line, e.message) == ("other", 2, "request from 10.0.0.5:40000 failed")


def test_logging_exception_traceback_is_not_reported_twice() -> None:
    lines = [START, rec("mlx_lm.server generation thread died: [metal::malloc] Resource limit (499000) exceeded.",
                        "ERROR"),
             "Traceback (most recent call last):", '  File "/x/mlx_lm/server.py", line 900, in _generate',
             "RuntimeError: [metal::malloc] Resource limit (499000) exceeded."]
    errors = only(feed(lines), ev.ErrorEvent)
    assert [(e.kind, e.line) for e in errors] == [("engine_dead", 2)]


def test_raw_body_continuation_is_never_read_as_server_lines() -> None:
    lines = [START, rec("JSONDecodeError: Expecting value: line 1 column 1 (char 0) - Raw body: hello", "ERROR"),
             "Exception in thread Thread-1 (_generate):", "RuntimeError: [metal::malloc] Resource limit (1) exceeded.",
             "libc++abi: terminating OutOfMemory", "Fetching 3 files: 100%",
             '127.0.0.1 - - [29/Nov/2026 15:45:15] "POST /v1/chat/completions HTTP/1.1" 400 -']
    events = feed(lines)
    assert [type(e) for e in events] == [ev.ServerStart, ev.ErrorEvent, ev.HttpAccess]
    assert "hello" not in repr(events)


def test_main_thread_traceback() -> None:
    lines = ["Traceback (most recent call last):", '  File "/x/bin/mlx_lm.server", line 8, in <module>',
             "FileNotFoundError: [Errno 2] No such file or directory: 'config.json'"]
    (e,) = feed(lines)
    assert isinstance(e, ev.ErrorEvent)
    assert (e.kind, e.line) == ("other", 1)
    assert e.message.startswith("uncaught exception: FileNotFoundError")


def test_native_abort_then_shell_abort_is_one_event() -> None:
    lines = [START, "libc++abi: terminating due to uncaught exception of type std::runtime_error: [METAL] Command "
             "buffer execution failed: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)",
             "zsh: abort      mlx_lm.server --model m"]
    errors = only(feed(lines), ev.ErrorEvent)
    assert [(e.kind, e.line) for e in errors] == [("oom", 2)]
    (e,) = feed(["libc++abi: terminating due to uncaught exception of type std::runtime_error: boom"])
    assert isinstance(e, ev.ErrorEvent)
    assert e.kind == "engine_dead"


@pytest.mark.parametrize(("lines", "era"), [
    ([], None),
    ([START], None),
    ([rec("Setting cache limit to 8 GB")], "mlx_lm <=0.22 (cache limit)"),
    ([rec("Peak memory: 1.000 GB"), rec("Setting cache limit to 8 GB")], "mlx_lm <=0.28 (tokens-per-sec)"),
    ([rec("*** Resetting cache. ***"), rec("Generation: 1.0 tokens-per-sec")], "mlx_lm 0.24-0.28.3 (single-slot cache)"),
    ([rec("Prompt processing progress: 1/2", "INFO")], "mlx_lm 0.26.4-0.30.x (progress, no cache stats)"),
    ([rec("KV Caches: 0 seq, 0.00 GB, latest user cache 0 tokens", "INFO")], "mlx_lm 0.31.0-0.31.1 (KV Caches)"),
    ([rec("KV Caches: 0 seq, 0.00 GB", "INFO")], "mlx_lm 0.31.x dev (KV Caches, no user cache)"),
    ([rec("Prompt Cache: 0 sequences, 0.00 GB", "INFO"), rec("Prompt processing progress: 1/2", "INFO")],
     "mlx_lm 0.31.2+ (Prompt Cache)"),
])
def test_era(lines: list[str], era: str | None) -> None:
    p = MlxParser()
    feed(lines, p)
    assert p.era == era
    assert p.engine == "mlx"


def test_continuation_after_a_record_is_never_unparsed() -> None:
    p = MlxParser()
    p.parse(1, START)
    for n, text in enumerate(["", "x", "{", "\t}", "  File", "Traceback", "127.0.0.1 - - [bad"], 2):
        assert p.parse(n, text) == []


# --- totality -------------------------------------------------------------------------------------------

FRAGMENTS = [
    TS, " - DEBUG - ", " - INFO - ", " - ERROR - ", " - WARNING - ", "Incoming Request Body: ", "Outgoing Response: ",
    "{", "}", "[", "]", "\t", '"model": ', '"messages": [', '"usage": {', '"prompt_tokens": 3', ", ", "null",
    '"system_fingerprint": "0.32.2-0.32.4-x"', "Starting stream:", "Starting completion:", "Prompt Cache: ",
    " sequences, ", " GB", "KV Caches: ", " seq, ", ", latest user cache ", " tokens", "Prompt processing progress: ",
    "/", "0", "7", "1.5", "Prompt: ", "Generation: ", " tokens-per-sec", "Peak memory: ", "*** ", " ***",
    "127.0.0.1 - - [", "29/Nov/2026 15:47:49", "] ", '"POST /v1/chat/completions HTTP/1.1" ', "200 -", "code 501, ",
    "-" * 40, "Exception occurred during processing of request from ('127.0.0.1', 5)", "Exception in thread ",
    "Thread-1 (_generate):", "Traceback (most recent call last):", '  File "x.py", line 1', "RuntimeError: ",
    "BrokenPipeError: ", "[metal::malloc] Resource limit (499000) exceeded.", "libc++abi: terminating ",
    "OutOfMemory", "Fetching 9 files: ", "100%|", "\r", "zsh: abort", "JSONDecodeError: ", " - Raw body: ",
    "mlx_lm.server generation thread died: ", "Starting httpd at ", " on port ", "...", ": UserWarning: ", ".py:12",
    "\x00", "\ufffd", "\\", '"', "99999999999999999999", "1e999",
]
shaped_line = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=10)), max_size=10).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(shaped_line, st.text(max_size=40)), max_size=40))
def test_parser_is_total(lines: list[str]) -> None:
    p = MlxParser()
    for n, text in enumerate(lines, 1):
        events = p.parse(n, text)
        assert isinstance(events, list)
        for e in events:
            assert isinstance(e, ev.Event)
            assert isinstance(e.line, int)
            assert 1 <= e.line <= n
    tail = p.flush()
    assert all(isinstance(e, ev.Event) for e in tail)
    assert p.era is None or isinstance(p.era, str)
    assert p.version is None or isinstance(p.version, str)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000), st.lists(shaped_line, max_size=12))
def test_bytes_through_framing_and_parser(noise: bytes, shaped: list[str]) -> None:
    """Arbitrary bytes (invalid UTF-8, NULs, CRs) framed into lines and parsed: never raises."""
    data = noise + "\n".join(shaped).encode("utf-8", "surrogatepass") + noise[:9]
    p = MlxParser()
    for n, line in enumerate(split_lines([data[:700], data[700:]], max_line=256), 1):
        assert all(isinstance(e, ev.Event) for e in p.parse(n, line.text))
    assert all(isinstance(e, ev.Event) for e in p.flush())


KNOWN_DEBUG = ("Incoming Request Body: ", "Outgoing Response: ", "Starting ", "Prompt: ", "Generation: ",
               "Peak memory: ", "Setting cache limit", "*** ", "    ", "Returning ", "https://", "http://",
               "Resetting dropped", "Attempting to", "Lock ", "Using selector")


@settings(max_examples=300, deadline=None)
@given(st.text().filter(lambda t: "\n" not in t and "\r" not in t))
def test_any_other_debug_message_is_one_token(token: str) -> None:
    assume(not token.startswith(KNOWN_DEBUG))
    p = MlxParser()
    assert p.parse(1, rec(token)) == [ev.TokenDelta(1, T0)]
