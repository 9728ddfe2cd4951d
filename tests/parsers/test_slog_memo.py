"""OllamaParser remembers what a slog line says after its time, and what a raw runner line says; a remembered
line must parse exactly as a new one: same events (fields, line, time), same era evidence, learned offset,
version and llama-server task state."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.ollama.log import OllamaParser
from parsers.text.envelope import strip_envelope
from parsers.text.memo import MAX_KEY_LEN

ROOT = Path(__file__).resolve().parents[2]


class _Forgetful(dict[str, Any]):
    def get(self, key: str, default: Any = None) -> Any:
        return None


def _fresh() -> OllamaParser:
    parser = OllamaParser()
    parser._slog_seen = _Forgetful()
    parser._raw_seen = _Forgetful()
    return parser


def _both(lines: list[str]) -> tuple[int, int]:
    remembering, forgetful = OllamaParser(), _fresh()
    slog = 0
    for n, raw in enumerate(lines, 1):
        st_ = strip_envelope(raw)
        if not st_.text:
            continue
        slog += st_.text.startswith("time=")
        assert remembering.parse(n, st_.text, st_.ts) == forgetful.parse(n, st_.text, st_.ts), raw
        assert remembering.offset == forgetful.offset
        assert remembering._server.last_task == forgetful._server.last_task
    assert remembering.era_evidence == forgetful.era_evidence and remembering.version == forgetful.version
    return slog, len(remembering._slog_seen)


def test_real_fixtures() -> None:
    for path in sorted((ROOT / "fixtures" / "ollama").glob("*.log")):
        _both(path.read_text(encoding="utf-8", errors="replace").split("\n"))


def test_synthetic_log_is_mostly_remembered(tmp_path: Path) -> None:
    out = tmp_path / "synthetic.log"
    subprocess.run([sys.executable, str(ROOT / "bench" / "gen_ollama_log.py"), str(out), "--size", "3M", "--seed", "11"],
                   check=True, capture_output=True)
    slog, remembered = _both(out.read_text(encoding="utf-8", errors="replace").split("\n"))
    assert slog > 1000 and remembered < slog / 2  # lines repeat after their time: the memo is used


# Zones in and out of slog's layout (a line that means nothing beyond its time is skipped only when its zone
# text is the one the offset came from).
_TIMES = st.sampled_from(["2024-12-06T10:00:01.123Z", "2024-12-06T10:00:01.123+01:00", "2024-12-06T10:00:01",
                          "2024-13-06T10:00:01.123Z", "2024-12-06T10:00:01.123Z junk", " ", "", "x\u00a0y", "\t",
                          "2024-12-06T10:00:02.456-04:00", "2024-12-06T10:00:01.123456+01:00", "2024-12-06T10:00:01+02:00", "2024-12-06T10:00:01+03:00",
                          "2024-12-06T10:00:01.123+0100", "2024-12-06T10:00:01.123+00:00", "2024-12-06T10:00:01.1234Z",
                          "2024-13-06T10:00:01.123-04:00"])
_RESTS = st.sampled_from([
    ' level=DEBUG source=sched.go:407 msg="evaluating already loaded model" model=/m/blobs/sha256-aa',
    ' level=INFO source=server.go:1 msg="llama runner started in 3.01 seconds"',
    ' level=ERROR source=x.go:1 msg="something broke" err="boom"',
    ' level=INFO source=x.go:1 msg="Listening on 127.0.0.1:11434 (version 0.5.7)"',
    ' level=DEBUG source=sched.go:1 msg="runner with non-zero duration has gone idle, adding timer" '
    'runner.name=m:1 runner.size="6.6 GiB" duration=5m0s',
    ' level=INFO source=server.go:1 msg="starting llama server" cmd="/bin/srv --model /m --ctx-size 8192 -np 4"',
    ' level=DEBUG source=server.go:636 msg="model load progress 0.25"',
    ' level=WARN msg=', ' level=', ' level=DEBUG msg="unterminated',
])


@settings(max_examples=600, deadline=None)
@given(st.lists(st.tuples(_TIMES, _RESTS), min_size=1, max_size=12))
def test_repeated_rests_with_any_time(lines: list[tuple[str, str]]) -> None:
    _both([f"time={t}{rest}" for t, rest in lines])


def test_long_lines_are_not_remembered() -> None:
    parser = OllamaParser()
    big = 'time=2024-12-06T10:00:01.123Z level=INFO source=x.go:1 msg="prompt" text="' + "y" * 5000 + '"'
    parser.parse(1, big)
    assert parser._slog_seen == {}
    small = 'time=2024-12-06T10:00:01.123Z level=DEBUG source=sched.go:1 msg="evaluating already loaded model" model=m'
    parser.parse(2, small)
    assert len(parser._slog_seen) == 1 and all(len(k) <= MAX_KEY_LEN for k in parser._slog_seen)


_RAW = st.sampled_from([
    "llm_load_print_meta: n_ctx_train      = 32768",
    "llama_new_context_with_model: n_ctx      = 8192",
    "llm_load_tensors: offloaded 33/33 layers to GPU",
    "print_info: file format = GGUF V3 (latest)",
    "ggml_cuda_init: found 1 CUDA devices:",
    "CUDA error: out of memory",
    "       eval time =    5244.56 ms /   482 tokens (   10.88 ms per token,    91.90 tokens per second)",
    "slot update_slots: id  0 | task 7 | new prompt, n_ctx_slot = 8192, n_keep = 0, task.n_tokens = 50",
    "slot print_timing: id  0 | task 9 | prompt eval time =      90.81 ms /   307 tokens",
    "        top_k = 40, top_p = 0.900",
    "INFO [main] model loaded | tid=\"1\" timestamp=1714544032",
    "llama runner started in 3.01 seconds",
    "time=2024-12-06T10:00:01.123Z level=INFO source=x.go:1 msg=\"Listening on 127.0.0.1:1 (version 0.5.7)\"",
    "2024/06/02 18:43:45 routes.go:1007: INFO server config env=map[]",
    "cuda driver library failed time=2024-12-06T10:00:01.123+01:00 level=INFO source=x.go:1 msg=\"x\"",
    "something nobody prints",
    "",
])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_RAW, st.sampled_from(["", "May 10 23:29:17 lena ollama[1]: ",
                                                 "2024-05-15T00:39:40.172587575Z ", "2024-05-15T00:39:41.5Z "])),
                min_size=1, max_size=15))
def test_repeated_raw_lines(lines: list[tuple[str, str]]) -> None:
    # The envelope's time (docker -t) is the events' time: a remembered line must take the new one.
    _both([envelope + raw for raw, envelope in lines])
