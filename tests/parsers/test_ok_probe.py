"""`OllamaParser.ok_probe` (the dashboard's shortcut for health checks) agrees with the full path.

The shortcut may skip a line only when strip_envelope() + parse() would give exactly one HttpAccess that is
successful and not inference, with the same time. It may decline any line (that only costs speed), so the
tests check both directions where it matters: never a false yes, and yes on the plain shapes real logs have.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ietop.model.records import is_inference
from parsers.events import HttpAccess
from parsers.ollama.log import OllamaParser
from parsers.text.envelope import strip_envelope

ROOT = Path(__file__).resolve().parents[2]
OLLAMA_FIXTURES = sorted((ROOT / "fixtures" / "ollama").glob("*.log"))


def _agree(parser: OllamaParser, n: int, raw: str) -> bool:
    """Run both paths on one line (ok_probe first, as the feed does); True when the shortcut said yes."""
    probe_ts = parser.ok_probe(raw)
    st = strip_envelope(raw)
    events = parser.parse(n, st.text, st.ts) if st.text else []
    if probe_ts is None:
        return False
    assert len(events) == 1, (raw, events)
    access = events[0]
    assert isinstance(access, HttpAccess), (raw, access)
    assert access.status < 400, raw
    assert not is_inference(access.method, access.path), raw
    assert access.ts == probe_ts and access.ts is not None, (raw, access.ts, probe_ts)
    assert access.ts.tzinfo == probe_ts.tzinfo
    return True


def _check_stream(lines: list[str]) -> tuple[int, int]:
    parser = OllamaParser()
    said_yes = accesses = 0
    for n, raw in enumerate(lines, 1):
        said_yes += _agree(parser, n, raw)
        accesses += "[GIN] " in raw
    return said_yes, accesses


def test_real_fixtures_agree() -> None:
    total_yes = 0
    for path in OLLAMA_FIXTURES:
        lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
        yes, _ = _check_stream(lines)
        total_yes += yes
    # The excerpts hold real health-check polling, bare and in journald (15 such lines in all); the
    # Docker Desktop export (057) and `<br/>` pastes take the full path.
    assert total_yes >= 12


def test_synthetic_log_agrees_and_takes_most_probes(tmp_path: Path) -> None:
    out = tmp_path / "synthetic.log"
    subprocess.run([sys.executable, str(ROOT / "bench" / "gen_ollama_log.py"), str(out), "--size", "3M", "--seed", "7"],
                   check=True, capture_output=True)
    lines = out.read_text(encoding="utf-8", errors="replace").split("\n")
    parser = OllamaParser()
    yes = probes = 0
    for n, raw in enumerate(lines, 1):
        hit = _agree(parser, n, raw)
        yes += hit
        st = strip_envelope(raw)
        if st.text.startswith("[GIN] "):
            ev = OllamaParser().parse(n, st.text, st.ts)
            probes += bool(ev) and isinstance(ev[0], HttpAccess) and ev[0].status < 400 and not is_inference(
                ev[0].method, ev[0].path)
    assert probes > 1000
    # Bare, docker -t, journald and compose lines are taken, coloured or not; ISO journald is not.
    assert yes >= 0.97 * probes, (yes, probes)


def test_offset_learned_from_slog_applies_to_probes() -> None:
    parser = OllamaParser()
    probe = '[GIN] 2025/02/20 - 16:34:14 | 200 |      52.021µs |       127.0.0.1 | HEAD     "/"'
    naive = parser.ok_probe(probe)
    assert naive is not None and naive.tzinfo is None
    parser.parse(2, 'time=2025-02-20T16:34:15.000+01:00 level=INFO source=x.go:1 msg="hello"')
    aware = parser.ok_probe(probe)
    assert aware is not None and aware.utcoffset() == timedelta(hours=1)
    assert _agree(parser, 3, probe)


def test_takes_coloured_and_compose_health_checks() -> None:
    for raw in [
        '\x1b[97;42m[GIN] 2025/02/20 - 16:34:14 | 200 |  2.1s |  127.0.0.1 | GET "/"',
        '[GIN] 2025/02/20 - 16:34:14 |\x1b[97;42m 200 \x1b[0m|  2.1s |  127.0.0.1 |\x1b[97;45m HEAD    \x1b[0m "/"',
        'ollama-1  | [GIN] 2025/02/20 - 16:34:14 | 200 |  2.1s |  127.0.0.1 | GET "/"',
    ]:
        assert _agree(OllamaParser(), 1, raw), raw


def test_declines_what_the_full_path_treats_otherwise() -> None:
    parser = OllamaParser()
    for raw in [
        '[GIN] 2025/02/20 - 16:34:14 | 200 |  2.1s |       127.0.0.1 | POST     "/api/chat"',  # inference
        '[GIN] 2025/02/20 - 16:34:14 | 500 |  2.1s |       127.0.0.1 | GET      "/api/tags"',  # failed
        '[GIN] 2025/13/20 - 16:34:14 | 200 |  2.1s |       127.0.0.1 | GET      "/api/tags"',  # month 13
        '[GIN] 2025/02/20 - 16:34:14 | 200 |  2.1s |  127.0.0.1 | GET "/"<br/>',  # pasted trailer
        '[GIN] 2025/02/20 - 16:34:14 | 200 |  2.1s |  **127.0.0.1** | GET "/"',  # markdown bold
        '[GIN] 2025/02/20 - 16:34:14 | 200 |  2.1s |  127.0.0.1 | GET "/a\\"b"',  # escaped quote
        '2025-02-20  | [GIN] 2025/02/20 - 16:34:14 | 200 |  2.1s |  127.0.0.1 | GET "/"',  # a date, not compose
        '[GIN] 2025/02/20 - 16:34:14 |\x1b[97;42m 200 \x1b[0m|  2.1s |  127.0.0.1 |\x1b[97;46m POST    \x1b[0m "/"',
        '[GIN] 2025/02/20 - 16:34:14 |\x1b[97;42m 200 \x1b[0m|  2.1s |  127.0.0.1 |\x1b]0;t\x07 GET "/"',  # not a colour
        '[GIN] 2025/02/20 - 16:34:14 | 2٠0 |  2.1s |  127.0.0.1 | GET "/"',  # a non-ASCII digit
    ]:
        assert parser.ok_probe(raw) is None, raw
        _agree(parser, 1, raw)


FRAGMENTS = [
    "[GIN] 2025/02/20 - 16:34:14 | ", "[GIN] ", " | ", "|", "200 ", "204 ", "304 ", "404 ", "52.021µs", "1.5s",
    " 127.0.0.1 ", "GET      ", "HEAD     ", "POST     ", '"/"', '"/api/tags"', '"/api/chat"', '"', "\\", "*", "**",
    "\x1b[0m", "<br/>", "\r", "Sep 18 12:00:01 host ollama[123]: ", "7月 21 14:48:33 ollama[1]: ",
    "2024-05-15T00:39:40.172587575Z ", "2024-05-15 00:39:40 ", "ollama-1  | ", "time=", " ", "]: ", "[9]: ",
    "\x1b[97;42m", "|\x1b[97;42m 200 \x1b[0m|", "|\x1b[97;45m HEAD    \x1b[0m ", "\x1b[|", "2024-05-15  | ",
]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), min_size=1, max_size=12).map("".join))
def test_spliced_lines_never_disagree(raw: str) -> None:
    _agree(OllamaParser(), 1, raw.replace("\n", " "))


@settings(max_examples=600, deadline=None)
@given(
    envelope=st.sampled_from(["", "2024-05-15T00:39:40.172587575Z ", "Sep 18 12:00:01 host ollama[123]: ",
                              "Sep  8 12:00:01.5 ollama[1]:", "ollama-1  | "]),
    status=st.integers(100, 599),
    method=st.sampled_from(["GET", "HEAD", "POST", "DELETE", "OPTIONS"]),
    path=st.sampled_from(["/", "/api/tags", "/api/ps", "/api/chat", "/v1/chat/completions", "/api/version?x=1"]),
    latency=st.sampled_from(["52.021µs", "1.5s", "1m2.5s", "3.2ms", "junk"]),
    client=st.sampled_from(["127.0.0.1", "", "::1", "172.18.0.6"]),
    colored=st.booleans(),
)
def test_generated_access_lines_agree(envelope: str, status: int, method: str, path: str, latency: str,
                                      client: str, colored: bool) -> None:
    if colored:  # as gin writes to a terminal: status and method in SGR colours
        status_col, method_col = f"\x1b[97;42m {status} \x1b[0m", f"\x1b[97;45m {method:<7} \x1b[0m"
    else:
        status_col, method_col = f" {status} ", f" {method:<8}"
    raw = f'{envelope}[GIN] 2025/02/20 - 16:34:14 |{status_col}| {latency:>13} | {client:>15} |{method_col} "{path}"'
    hit = _agree(OllamaParser(), 1, raw)
    # Every POST takes the full path: the few that are not inference (/api/show, /api/pull) are rare.
    assert hit == (status < 400 and method != "POST")
