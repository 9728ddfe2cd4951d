"""strip_envelope's inline reading of one docker -t, journald or compose envelope gives what the general
reader (`_envelopes`, any stack of envelopes) gives.

The inline branches exist for speed only (they are most of the envelope lines of a busy server); for every
line they take, text, kind and time must be the general reader's. Lines are the real corpus and envelopes
spliced from real heads, odd stamps (nine fraction digits, month 13, non-ASCII digits), stacks and inner
lines that do and do not start like slog, GIN or JSON.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.text.envelope import _envelopes, strip_envelope

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"

DOCKER = ["2024-05-02T12:33:06.667234622Z ", "2024-05-02T12:33:06Z ", "2024-05-02T12:33:06.6Z ",
          "2024-13-02T12:33:06.6Z ", "2024-05-02T25:33:06Z ", "2024-05-02T12:33:06.12345678901234567890Z ",
          "٢٠٢٤-05-02T12:33:06Z ", "2024-05-02T12:33:06.667Z", "2024-05-02 12:33:06.667 "]
JOURNALD = ["Sep 11 01:16:03 lena ollama[1884]: ", "5月 13 01:36:33 ollama ollama[1999249]: ",
            "Jul 21 12:00:00 ollama[7]: ", "Jul 21 12:00:00 ollama[7]:", "Jul 21 12:00:00.123456 h ollama[7]: ",
            "2024-09-11T01:16:03+0000 lena ollama[1884]: ", "Jul 21 12:00 ollama[7]: "]
COMPOSE = ["ollama-1  | ", "ollama  |", "ollama_1 | ", "2024-01-01 | ", "web.app-2 |  "]
INNER = ['time=2024-09-11T01:16:03.848Z level=INFO source=images.go:753 msg="total blobs: 7"',
         '[GIN] 2024/08/27 - 17:10:09 | 200 |   36.584739ms |       127.0.0.1 | GET      "/api/tags"',
         '{"level":"info"}', "llama_model_loader: - kv   0: general.architecture str = llama", "",
         "INFO [main] HTTP server listening", "slot      release: id  0 | task 5 |", " indented", "time", "[x"]

_part = st.one_of(st.sampled_from(DOCKER), st.sampled_from(JOURNALD), st.sampled_from(COMPOSE))


def check(line: str) -> None:
    got = strip_envelope(line)
    if not line or line.isspace() or line[0] in "[{ \t" or line.startswith("time=") or "\x1b" in line:
        return  # decided before any envelope is looked for
    if line[-1] in ">\r" or "**" in line:
        return  # cleaned first: the inline branches see the cleaned line, as _envelopes would
    want = _envelopes(line)
    assert got == want, line
    assert (got.ts.tzinfo if got.ts else None) == (want[2].tzinfo if want[2] else None), line


def test_corpus_lines_read_alike() -> None:
    n = 0
    for path in sorted(FIXTURES.glob("*/*.log")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            check(line)
            n += 1
    assert n > 700


def test_synthetic_log_reads_alike(tmp_path: Path) -> None:
    """The benchmark's SYNTHETIC log: every envelope kind around every line kind, 2 MB of it."""
    log = tmp_path / "synthetic.log"
    subprocess.run([sys.executable, str(ROOT / "bench" / "gen_ollama_log.py"), str(log), "--size", "2M",
                    "--seed", "3", "--meta", "-"], check=True, capture_output=True)
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    for line in lines:
        check(line)
    assert sum(strip_envelope(line).kind != "none" for line in lines) > 3000


def test_every_head_around_every_inner_line() -> None:
    for head in [*DOCKER, *JOURNALD, *COMPOSE]:
        for inner in INNER:
            check(head + inner)
            check(head.rstrip() + inner)
    # No envelope: a level word alone (log-UI exports), a journald-looking colon before a compose bar, bars
    # and colons in a runner's own output.
    for line in ["info", "WARN ", "Error", "warning:", "ollama-1  | x]: time=1", "a]: b | c", "x | y",
                 "llama_model_loader: - kv 0: | a", "srv  log_server_r: request: GET /health 127.0.0.1 200"]:
        check(line)


@settings(max_examples=600)
@given(st.lists(_part, min_size=1, max_size=3), st.sampled_from(INNER), st.text(max_size=3))
def test_spliced_envelopes_read_alike(parts: list[str], inner: str, junk: str) -> None:
    check("".join(parts) + inner)
    check("".join(parts) + junk + inner)
