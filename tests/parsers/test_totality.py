"""Every parser is total: any text or bytes yields events (or `Unparsed`) and never raises.

Random input alone rarely reaches deep branches, so the strategies also splice fragments of real line
shapes (slog keys, GIN separators, llama.cpp prefixes, JSON braces) into the noise.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.detect import detect_engine
from parsers.events import Event, Unparsed
from parsers.ollama.gofmt import parse_attrs, parse_go_duration
from parsers.ollama.log import OllamaParser, llamacpp
from parsers.text.envelope import strip_envelope
from parsers.text.framing import split_lines

FRAGMENTS = [
    "time=2025-02-28T01:25:01.793+01:00 ", "level=INFO ", "level=DEBUG ", "source=sched.go:1 ", 'msg="',
    "msg=load ", 'request="{Operation:fit Parallel:x KvSize:', "[GIN] 2025/02/20 - 16:34:14 | ", " | ",
    "200", "499", "1h24m39s", "µs", '"/api/chat"', "POST     ", "slot update_slots: id  0 | task 0 | ",
    "new prompt, n_ctx_slot = ", "prompt eval time = ", " ms / ", " tokens", "{", "}", '"msg":', '"n_ctx_slot":',
    "INFO [update_slots] input truncated | n_ctx=", "llama_context: n_ctx = ", "offloaded 3/", " layers to GPU",
    'cmd="', "--ctx-size ", "-np ", "truncating input prompt", "limit=", "prompt=", "keep=", "new=",
    "llama runner started in ", " seconds", "Listening on ", "(version ", "env=\"map[", "OLLAMA_CONTEXT_LENGTH:",
    "\x1b[97;42m", "<br/>", "**", "\x00", "\ufffd", "7月 21 14:48:33 host ollama[1]: ", "ollama-1  | ",
    "2024-05-15T00:39:40.172587575Z ", "2024/06/02 18:43:45 routes.go:1007: ", "\\", '\\"', "=", '"',
]
shaped_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=12)), max_size=14).map("".join)


def _check(events: list[Event]) -> None:
    assert isinstance(events, list)
    for e in events:
        assert isinstance(e, Event)
        assert isinstance(e.line, int)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), shaped_text))
def test_ollama_parser_is_total(text: str) -> None:
    parser = OllamaParser()
    for line in (text, text.replace("\n", " ")):
        events = parser.parse(7, line)
        _check(events)
        assert events == [] or all(not isinstance(e, Unparsed) for e in events) or len(events) == 1


@settings(max_examples=300, deadline=None)
@given(shaped_text)
def test_llamacpp_helpers_are_total(text: str) -> None:
    state = llamacpp.ServerLineState()
    for result in (
        llamacpp.parse_server_line(text, 1, None, state),
        llamacpp.parse_raw_line(text, 1, None),
        llamacpp.parse_json_line(text, 1),
        llamacpp.parse_text_server_line(text, 1, None),
    ):
        if result is not None:
            _check(result)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), shaped_text))
def test_field_helpers_are_total(text: str) -> None:
    assert isinstance(parse_attrs(text), dict)
    d = parse_go_duration(text)
    assert d is None or isinstance(d, float)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000), st.lists(shaped_text, max_size=8))
def test_bytes_through_the_whole_line_path(noise: bytes, shaped: list[str]) -> None:
    """Arbitrary bytes (invalid UTF-8, NULs, CRs) framed, stripped, detected and parsed: never raises."""
    data = noise + "\n".join(shaped).encode("utf-8", "surrogatepass") + noise[:7]
    parser = OllamaParser()
    texts = []
    for n, line in enumerate(split_lines([data[:50], data[50:]]), 1):
        st_ = strip_envelope(line.text)
        texts.append(st_.text)
        _check(parser.parse(n, st_.text, st_.ts))
    assert detect_engine(texts) in (None, "ollama", "vllm", "mlx")
