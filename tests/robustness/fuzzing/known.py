"""The defects the fuzzing already knows of, so that a bounded test fails only on a new one.

Known defects (`KNOWN`: K* were expected, N* found by this harness) are matched by kind and key. While one is
`open`, the bounded tests tolerate it (counted with `hypothesis.event`: `--hypothesis-show-statistics` lists
them) and test_fuzz_known_defects.py runs its one-line reproducer as a strict xfail; a fix turns that into an
XPASS, which asks for `open=False`: the reproducer is then a regression test, and the fuzz fails on it again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tests.robustness.fuzzing.cases import Input
from tests.robustness.fuzzing.checks import Violation
from tests.robustness.fuzzing.mutate import DIGITS_400, NUL_RUNS


@dataclass(frozen=True)
class KnownDefect:
    """A defect already reported and being fixed: matched by kind and key, reproduced by one line."""

    id: str
    title: str
    kinds: tuple[str, ...]
    key: str
    """A regex searched in the violation's key."""
    target: str
    line: bytes
    """The one-line reproducer (a log file of this line, for `target`)."""
    option: str = ""
    arg: int = 0
    newline: bool = True
    """Whether the reproducer file ends with a newline."""
    open: bool = True
    """Still being fixed: the bounded fuzz tolerates it and its regression test is a strict xfail. A fix sets it
    to False: the fuzz then fails on it again, and the regression test must pass."""

    @property
    def input(self) -> Input:
        return Input(self.target, (self.line + (b"\n" if self.newline else b""),), self.option, self.arg)

    @property
    def shown(self) -> bytes:
        """The reproducer as a file holds it (the parsers target pads line `arg` itself)."""
        if "nul_padding" in self.kinds[0]:
            return b"\x00" * NUL_RUNS[(self.arg >> 8) % len(NUL_RUNS)] + self.line
        return self.line

    def matches(self, v: Violation) -> bool:
        return v.kind in self.kinds and re.search(self.key, v.key) is not None


_GIN_CHAT = b'[GIN] 2025/06/10 - 22:46:49 | 200 |      1h24m39s |    10.99.99.105 | POST     "/api/chat"'
_VLLM_STATS = (b"INFO 01-22 18:27:20 metrics.py:449] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
               b"41.7 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 2.0%, ")
# K*: the defects the fuzzing was expected to find (reported before it existed); N*: what it found besides.
KNOWN: tuple[KnownDefect, ...] = (
    KnownDefect(
        "K1-overflow-token-count", "a 400-digit token count: OverflowError escapes (ietop/model/facts.py)",
        ("crash",), r"^OverflowError@ietop/model/facts\.py", "analyze",
        b"slot print_timing: id  0 | task 0 |        eval time =      10.00 ms / " + DIGITS_400
        + b" tokens (    0.10 ms per token,  10000.00 tokens per second)", open=False),
    KnownDefect(
        "K2-infinite-load-time", "a 400-digit load time becomes Infinity in --json",
        ("json_invalid", "json_nonfinite"), r"^loads\[\]\.duration_s$", "analyze",
        b'time=2025-09-11T01:28:28.037Z level=INFO source=server.go:1288 msg="llama runner started in '
        + DIGITS_400 + b'.5 seconds"', open=False),
    KnownDefect(
        "K3-c1-bidi-raw", "C1 and bidi controls from a log line are printed raw (plain report and JSON)",
        ("control_char_text", "control_char_json"), r"^(C1|bidi)\b", "analyze",
        'time=2025-06-10T21:22:18.314Z level=ERROR source=x.go:1 msg="boom \u009b31m \u202eevil"'.encode(), open=False),
    KnownDefect(
        "K4-nul-padding-drops-line", "NUL padding glued before a line (logrotate copytruncate) loses the line",
        ("nul_padding_changes_events",), r".", "parsers", _GIN_CHAT, "ollama", arg=1 << 8, open=False),
    KnownDefect(
        "N1-proxy-log-overflow", "a proxy JSONL number that overflows (1e309): OverflowError escapes the parser",
        ("crash", "parser_exception"), r"OverflowError@parsers/api/proxy_log\.py", "analyze",
        b'{"method":"POST","path":"/api/chat","status":1e309,"ttft_s":0.2,"bytes_down":1}', open=False),
    KnownDefect(
        "N2-vllm-startup-unguarded", "vLLM start-up figures (StartupFact.value: float | str) pass the store's "
        "2**53 guard: 400 digits are Infinity (seconds, GiB) or a 400-digit int (GPU blocks) in --json config",
        ("json_invalid", "json_nonfinite", "json_int_beyond_2^53"), r"^config\.effective\.", "analyze",
        b"INFO 01-13 11:35:23 worker.py:241] Memory profiling takes " + DIGITS_400 + b" seconds", open=False),
    KnownDefect(
        "N3-vllm-stats-infinity", "a vLLM stats figure spelled Infinity (or 400 digits) is Infinity in --json",
        ("json_invalid", "json_nonfinite"), r"^engine_stats\[\]\.", "analyze",
        _VLLM_STATS + b"CPU KV cache usage: Infinity%.", open=False),
    KnownDefect(
        "N4-scrape-nan", "a /metrics gauge of NaN or +Inf (valid Prometheus values) or 1e309 is NaN/Infinity in "
        "--json (metrics windows)", ("json_invalid", "json_nonfinite"), r"^(metrics\[\]|latency)\.", "analyze",
        b'vllm:num_requests_waiting{engine="0",model_name="m"} NaN', open=False),
    KnownDefect(
        "N5-scrape-last-line-uncounted", "a saved /metrics scrape without a final newline counts one line less",
        ("lines_not_conserved",), r"Prometheus /metrics scrape", "analyze",
        b'vllm:num_requests_running{engine="0",model_name="m"} 1', newline=False, open=False),
    KnownDefect(
        "N16-scrape-nul-tail-counted", "a saved /metrics scrape ending in NUL padding without a newline counts the "
        "padding as a line (the log framing does not): found by fuzz run 6", ("lines_not_conserved",),
        r"Prometheus /metrics scrape", "analyze", b'vllm:{e=""} 0\n\x00', newline=False, open=False),
    KnownDefect(
        "N6-uvicorn-empty-client", "uvicorn access line with no client (vLLM on --uds): the columnar reader folds "
        "it as a probe, the per-line parser drops it without counting it", ("bulk_differs",), r"^probes \(vllm\)$",
        "analyze", b'INFO:      - "GET /health HTTP/1.1" 200 OK', "vllm", open=False),
    KnownDefect(
        "N8-proxy-log-time-overflow", "a proxy JSONL time near year 9999 plus its e2e_s: OverflowError escapes "
        "(ietop/model/proxied.py)", ("crash",), r"^OverflowError@ietop/model/proxied\.py", "analyze",
        b'{"method":"POST","path":"/api/chat","ttft_s":0.1,"e2e_s":0.3,"bytes_down":0,"ts":"9999-12-31T23:59:59.9"}', open=False),
    KnownDefect(
        "N9-bulk-skips-number-guard", "the columnar reader folds a GIN probe whose latency (9999999999999h) the "
        "per-line path refuses as implausible: the two documents differ", ("bulk_differs",),
        r"^(probes|counts|sources) \(ollama\)$", "analyze",
        b'[GIN] 2026/06/19 - 20:32:30 | 200 | 9999999999999h |       127.0.0.1 | GET      "/"', open=False),
    KnownDefect(
        "N10-nul-last-line-uncounted", "a last line of NULs without a newline (a file cut mid-padding) is not "
        "counted: the framing drops the NULs, then the line", ("lines_not_conserved", "framing"),
        r"^lines != physical lines \((?!vllm, Prometheus)|^split_lines count$", "analyze",
        b'time=2025-06-10T21:22:18.314Z level=INFO source=x.go:1 msg="a"\n\x00', newline=False, open=False),
    KnownDefect(
        "N11-bulk-folds-no-answer", "a GIN line with status 0 (no answer: `status` null since 29280bc) is folded "
        "as a successful probe with status 0 by the columnar reader, listed with status null by the per-line one",
        ("bulk_differs",), r"^requests \(ollama\)$", "analyze",
        b'[GIN] 2025/06/10 - 22:46:49 |   0 |      1.2ms |       127.0.0.1 | HEAD     "/"', open=False),
    KnownDefect(
        "N12-probe-time-out-of-range", "the columnar reader dates a GIN probe of Go's zero time (0001/01/01) under a "
        "learned +03:00 offset: ValueError (year 0 is out of range) escapes (ietop/model/probes.py)",
        ("crash",), r"^ValueError@ietop/model/probes\.py", "analyze",
        b'time=2024-05-31T01:00:00.000+03:00 level=INFO source=x.go:1 msg="a"\n'
        b'[GIN] 0001/01/01 - 00:00:00 | 200 |      1.2ms |       127.0.0.1 | GET      "/"', open=False),
    KnownDefect(
        "N13-unparsed-over-lines", "a line with two implausible figures counts as two unparsed lines (unparsed_lines "
        "> lines: '1 lines, 2 unparsed')", ("lines_not_conserved",), r"^unparsed_lines outside", "analyze",
        b"INFO 01-13 11:35:23 worker.py:241] Maximum concurrency for 9999999999999999 tokens per request: "
        b"9999999999999999x", open=False),
    KnownDefect(
        "N14-bold-regex-quadratic", "the envelope's markdown-bold regex is quadratic in the `**` of a line: 25 kB of "
        "' **a)' takes 1.3 s, a 1 MiB line of `**kwargs` traceback text hangs analyze (> 5 min)",
        ("slow_line", "superlinear"), r"^strip_inner", "scaling", b" **a)", open=False),
    KnownDefect(
        "N7-vllm-glued-recursion", "vLLM records glued on one line: one recursion per record, O(n^2) memory "
        "(1.4 GB for a 1 MiB line), and past ~1,000 records RecursionError drops the whole line",
        ("glued_records_lost", "slow_line"), r"^vllm$", "glued",
        (_VLLM_STATS + b"CPU KV cache usage: 0.0%. ") * 1500, open=False),
)


def known(v: Violation, open_only: bool = False, inp: Input | None = None) -> KnownDefect | None:
    """The known defect `v` is an instance of. A hang or a memory peak is seen from outside the case and has
    no exception to key it: `outside_key` names the shape of input that caused a known one (`inp` unused,
    kept for callers that have it)."""
    found = next((k for k in KNOWN if k.matches(v) and (k.open or not open_only)), None)
    if found is None and v.kind in ("hang", "memory"):
        for label, defect in OUTSIDE_CAUSES.values():
            if v.key.endswith(f"({label})"):
                found = next((k for k in KNOWN if k.id == defect and (k.open or not open_only)), None)
    return found


# A vLLM record's head (the bytes twin of targets._RECORD_HEAD).
_RECORD_HEAD_B = re.compile(rb"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?:\d{4}-)?\d{2}-\d{2} \d{2}:\d{2}:\d{2}")


def _glued_line(line: bytes) -> bool:
    return len(_RECORD_HEAD_B.findall(line)) >= 100


def _bold_spans_line(line: bytes) -> bool:
    return line.count(b" **") >= 1000


OUTSIDE_CAUSES: dict[Callable[[bytes], bool], tuple[str, str]] = {
    _glued_line: ("glued vLLM records", "N7-vllm-glued-recursion"),
    _bold_spans_line: ("a long line of ** spans", "N14-bold-regex-quadratic"),
}
"""Line shapes that cause a known hang or memory peak: (label in the key, defect)."""


def outside_key(target: str, inp: Input) -> str:
    """The key of a hang or a memory peak: its target, and the shape of its input when a line over 100 kB has
    one of OUTSIDE_CAUSES' (so a hang of another cause gets a signature of its own)."""
    for test, (label, _defect) in OUTSIDE_CAUSES.items():
        if any(len(line) > 100_000 and test(line) for data in inp.files for line in data.split(b"\n")):
            return f"{target} ({label})"
    return target


def new_violations(violations: Sequence[Violation]) -> tuple[list[Violation], list[KnownDefect]]:
    """(violations no open known defect explains, the open known defects seen)."""
    new, seen = [], []
    for v in violations:
        k = known(v, open_only=True)
        if k is None:
            new.append(v)
        elif k not in seen:
            seen.append(k)
    return new, seen
