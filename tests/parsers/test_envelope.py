"""strip_envelope on real pasted lines, on the whole sample corpus, and on any text.

The literal lines are copied verbatim from the Ollama samples named in each case
(fixtures/ollama, same files as shared/samples/ollama); the corpus test guards the
per-file envelope counts recorded in fixtures/ollama/expectations.json.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from parsers.text.envelope import Stripped, strip_envelope

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ollama"

SLOG_064 = 'time=2026-02-02T12:29:02.735Z level=INFO source=server.go:1339 msg="llama runner started in 29.96 seconds"'
GIN_057 = '[GIN] 2024/08/27 - 17:10:09 | 200 |   36.584739ms |       127.0.0.1 | GET      "/api/tags"'


@pytest.mark.parametrize(
    ("sample", "line", "text", "kind"),
    [
        (
            "010-v03-journald-startup-server-config.log",
            "Sep 11 01:16:03 lena ollama[1884]: time=2024-09-11T01:16:03.848Z level=INFO "
            'source=images.go:753 msg="total blobs: 7"',
            'time=2024-09-11T01:16:03.848Z level=INFO source=images.go:753 msg="total blobs: 7"',
            "journald",
        ),
        (
            "010-v03-journald-startup-server-config.log",
            "Sep 11 01:16:03 lena systemd[1]: Starting Ollama Service...",
            "Starting Ollama Service...",
            "journald",
        ),
        (
            "027-v05-journald-it-locale-multigpu-stderr-merge.log",
            "mar 15 11:39:07 acquario3 ollama[87551]: cuda driver library failed to get device context "
            "2time=2025-03-15T11:39:07.109+01:00 level=WARN source=gpu.go:434 "
            'msg="error looking up nvidia GPU memory"',
            "cuda driver library failed to get device context 2time=2025-03-15T11:39:07.109+01:00 "
            'level=WARN source=gpu.go:434 msg="error looking up nvidia GPU memory"',
            "journald",
        ),
        (
            "018-v031-journald-zh-locale-llama-server-load.log",
            "7月 21 14:48:33 dar ollama[1814780]: [GIN] 2026/07/21 - 14:48:33 | 200 |  118.038686ms "
            '|       127.0.0.1 | POST     "/api/show"',
            '[GIN] 2026/07/21 - 14:48:33 | 200 |  118.038686ms |       127.0.0.1 | POST     "/api/show"',
            "journald",
        ),
        (
            "061-v01x-2023-jetson-golog-gin-runner-cuda-error.log",
            "Nov 28 12:46:07 jetson ollama[55387]: ****NvRmMemInit failed**** error type: 196626",
            "****NvRmMemInit failed**** error type: 196626",
            "journald",
        ),
        (
            "048-v030-journald-rocm-llama-server-prefill-progress.log",
            "Jun 16 20:42:37 pop-os ollama[13938]: slot update_slots: id  0 | task 0 | "
            "cached n_tokens = 49152, memory_seq_rm [49152, end)",
            "slot update_slots: id  0 | task 0 | cached n_tokens = 49152, memory_seq_rm [49152, end)",
            "journald",
        ),
        (
            "058-v03-docker-compose-first-run-keygen-startup.log",
            'ollama-1  | time=2024-08-17T14:11:10.852Z level=INFO source=images.go:782 msg="total blobs: 0"',
            'time=2024-08-17T14:11:10.852Z level=INFO source=images.go:782 msg="total blobs: 0"',
            "compose",
        ),
        ("058-v03-docker-compose-first-run-keygen-startup.log", "ollama-1  |", "", "compose"),
        (
            "043-v04-windows-serverlog-html-br-artifacts-oneapi.log",
            '[GIN] 2024/11/11 - 20:54:06 | 200 |            0s |       127.0.0.1 | GET      "/api/ps"<br/>',
            '[GIN] 2024/11/11 - 20:54:06 | 200 |            0s |       127.0.0.1 | GET      "/api/ps"',
            "none",
        ),
        (
            "067-supp-v05-docker-generate-truncation-gin.log",
            '[GIN] 2025/02/05 - 09:19:55 | 200 |         3m22s |    172.175.1.32 | POST     "/api/generate"',
            '[GIN] 2025/02/05 - 09:19:55 | 200 |         3m22s |    172.175.1.32 | POST     "/api/generate"',
            "none",
        ),
        (
            "064-v0133-k8s-log-ui-export-runner-started.log",
            SLOG_064,
            SLOG_064,
            "none",
        ),
        ("064-v0133-k8s-log-ui-export-runner-started.log", "info", "", "meta"),
        ("064-v0133-k8s-log-ui-export-runner-started.log", "", "", "none"),
    ],
)
def test_real_lines(sample: str, line: str, text: str, kind: str) -> None:
    assert line in (FIXTURES / sample).read_text(encoding="utf-8").split("\n")
    got = strip_envelope(line)
    assert (got.text, got.kind) == (text, kind)
    assert got.ts is None


def test_journald_without_hostname_and_markdown_bold() -> None:
    """051: the user removed the hostname (double space) and bolded msg=... in markdown."""
    line = (
        "Feb 28 01:25:01  ollama[1794]: time=2025-02-28T01:25:01.793+01:00 level=ERROR source=sched.go:455 "
        '**msg="error loading llama server" error="timed out waiting for llama runner to start: '
        'context canceled"**'
    )
    assert line in (FIXTURES / "051-v05-journald-nohost-markdown-bold-abort-499.log").read_text("utf-8")
    assert strip_envelope(line) == Stripped(
        "time=2025-02-28T01:25:01.793+01:00 level=ERROR source=sched.go:455 "
        'msg="error loading llama server" error="timed out waiting for llama runner to start: '
        'context canceled"',
        "journald",
        None,
    )


def test_docker_timestamps() -> None:
    """063: docker logs -t, RFC3339Nano UTC; nanoseconds are truncated to microseconds."""
    line = "2024-05-15T00:39:40.172587575Z llm_load_vocab: missing pre-tokenizer type, using: 'default'"
    assert line in (FIXTURES / "063-v0137-docker-logs-timestamps-vocab-warning.log").read_text("utf-8")
    assert strip_envelope(line) == Stripped(
        "llm_load_vocab: missing pre-tokenizer type, using: 'default'",
        "docker_ts",
        datetime(2024, 5, 15, 0, 39, 40, 172587, tzinfo=timezone.utc),
    )


def test_docker_desktop_export_is_naive_local() -> None:
    """057: the export prefix is the host clock (19:10), two hours off the container's GIN clock (17:10)."""
    line = "2024-08-27 19:10:09 " + GIN_057
    sample = FIXTURES / "057-v03-docker-desktop-healthcheck-polling-tz-mismatch.log"
    assert line in sample.read_text("utf-8")
    assert strip_envelope(line) == Stripped(GIN_057, "desktop", datetime(2024, 8, 27, 19, 10, 9))


def test_k8s_export_timestamp_line() -> None:
    """064: the lone timestamp line of a log-UI record is meta; its time is kept (naive)."""
    got = strip_envelope("2026-02-02 17:59:02.735")
    assert got == Stripped("", "meta", datetime(2026, 2, 2, 17, 59, 2, 735000))


def test_k8s_export_corpus_has_no_unparsed_meta() -> None:
    lines = (FIXTURES / "064-v0133-k8s-log-ui-export-runner-started.log").read_text("utf-8").split("\n")
    results = [strip_envelope(line) for line in lines]
    assert all(r.text.startswith("time=") for r in results if r.text)
    assert Counter(r.kind for r in results if not r.text)["meta"] == 12


@pytest.mark.parametrize(
    ("line", "kind", "ts"),
    [
        (
            "2024-05-01T12:00:00.123456+0000 myhost ollama[1]: time=x",
            "journald_iso",
            datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=timezone.utc),
        ),
        (
            "2024-05-01T12:00:00+05:30 myhost ollama.listener[12]: time=x",
            "journald_iso",
            datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        ),
        ("06.05 12:00:00 myhost ollama[1]: time=x", "journald", None),
        ("2月 21 12:00:00 myhost ollama[1]: time=x", "journald", None),
        ("Mar 03 12:00:00.123456 myhost ollama.listener[123]: time=x", "journald", None),
        (
            "ollama-1  | 2024-05-15T00:39:40.5Z time=x",
            "compose+docker_ts",
            datetime(2024, 5, 15, 0, 39, 40, 500000, tzinfo=timezone.utc),
        ),
        ("ollama  | Mar 03 12:00:00 h ollama[1]: time=x", "compose+journald", None),
    ],
)
def test_other_envelopes_and_stacks(line: str, kind: str, ts: datetime | None) -> None:
    assert strip_envelope(line) == Stripped("time=x", kind, ts)


def test_ansi_colours_and_crlf() -> None:
    line = (
        "[GIN] 2024/10/08 - 20:16:09 |\x1b[97;42m 200 \x1b[0m|      16.724µs |             ::1 |"
        '\x1b[97;44m GET     \x1b[0m "/"\r'
    )
    assert strip_envelope(line) == Stripped(
        '[GIN] 2024/10/08 - 20:16:09 | 200 |      16.724µs |             ::1 | GET      "/"', "none", None
    )
    osc = "\x1b]0;title\x07\x1b[1mollama-1  |\x1b[0m time=x"
    assert strip_envelope(osc) == Stripped("time=x", "compose", None)


def test_gin_pipes_are_not_compose() -> None:
    assert strip_envelope(GIN_057).kind == "none"


def test_invalid_envelope_date_still_stripped() -> None:
    assert strip_envelope("2024-13-45T99:00:00Z time=x") == Stripped("time=x", "docker_ts", None)


def test_blank_and_whitespace_lines() -> None:
    assert strip_envelope("") == Stripped("", "none", None)
    assert strip_envelope("   \r") == Stripped("", "none", None)
    # Indented continuation lines are data, not blank.
    assert strip_envelope("        top_k = 40").text == "        top_k = 40"


_KIND_NAMES = {
    "journald": "journald",
    "docker_desktop": "desktop",
    "compose": "compose",
    "docker_ts": "docker_ts",
}


def _corpus() -> list[tuple[str, dict[str, int]]]:
    data = json.loads((FIXTURES / "expectations.json").read_text("utf-8"))
    return [(name, entry["envelopes"]) for name, entry in sorted(data.items())]


@pytest.mark.parametrize(("sample", "envelopes"), _corpus())
def test_corpus_envelope_counts(sample: str, envelopes: dict[str, int]) -> None:
    """Counts of non-blank enveloped lines per kind match expectations.json."""
    lines = (FIXTURES / sample).read_text("utf-8").split("\n")
    got = Counter(r.kind for r in map(strip_envelope, lines) if r.text)
    want = {_KIND_NAMES[k]: n for k, n in envelopes.items()}
    assert {k: n for k, n in got.items() if k not in ("none", "meta")} == want


_FRAGMENTS = st.sampled_from(
    [
        "Mar 03 12:00:00 host ollama[1]: ",
        "7月 21 14:48:33  ollama[9]:",
        "2024-05-15T00:39:40.172587575Z ",
        "2024-05-01T12:00:00.1+9999 h o[1]: ",
        "2024-08-27 19:10:09 ",
        "2026-02-02 17:59:02.735",
        "ollama-1  | ",
        "ollama-1  |",
        "time=",
        "[GIN] | 200 |",
        "**",
        "<br/>",
        "<br>",
        "\r",
        "\x1b[97;42m",
        "\x1b]8;;",
        "\x1b",
        "info",
        " ",
        "\n",
        "]:",
        "|",
        "9999-99-99T99:99:99Z ",
    ]
)


_ENVELOPE_KINDS = {"journald", "journald_iso", "docker_ts", "desktop", "compose", "meta"}


@given(st.text())
def test_total_over_any_text(line: str) -> None:
    got = strip_envelope(line)
    assert isinstance(got, Stripped)
    assert isinstance(got.text, str)
    assert got.ts is None or isinstance(got.ts, datetime)


@given(st.lists(st.one_of(_FRAGMENTS, st.text(max_size=5)), max_size=12).map("".join))
def test_total_over_envelope_like_text(line: str) -> None:
    got = strip_envelope(line)
    assert isinstance(got.text, str)
    assert got.kind == "none" or set(got.kind.split("+")) <= _ENVELOPE_KINDS
    assert len(got.text) <= len(line)
