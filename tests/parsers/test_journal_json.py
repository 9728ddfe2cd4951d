"""`journalctl -o json` records → (UTC time, message).

The records are SYNTHETIC, written here after the journal's JSON export format (journalctl(1)
``--output=json``, systemd.journal-fields(7)): every value is a string, ``__REALTIME_TIMESTAMP`` is
microseconds since the epoch, trusted fields start with ``_``, and MESSAGE is an array of byte values
when it is not valid UTF-8. The messages are Ollama server lines of the shapes in fixtures/ollama.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from parsers.text.journal_json import journal_record

BASE = {
    "__CURSOR": "s=5c6e0d1f2a3b4c5d6e7f8091a2b3c4d5;i=1a2b;b=0f1e2d3c4b5a69788796a5b4c3d2e1f0;m=2b1c3d4e;t=61a1b2c3d4e5f;x=9f8e7d6c5b4a3921",
    "__REALTIME_TIMESTAMP": "1717500061506123",
    "__MONOTONIC_TIMESTAMP": "726417742",
    "_BOOT_ID": "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
    "_TRANSPORT": "stdout",
    "PRIORITY": "6",
    "SYSLOG_FACILITY": "3",
    "SYSLOG_IDENTIFIER": "ollama",
    "_PID": "1432",
    "_UID": "998",
    "_GID": "998",
    "_COMM": "ollama",
    "_EXE": "/usr/local/bin/ollama",
    "_CMDLINE": "/usr/local/bin/ollama serve",
    "_SYSTEMD_CGROUP": "/system.slice/ollama.service",
    "_SYSTEMD_UNIT": "ollama.service",
    "_SYSTEMD_SLICE": "system.slice",
    "_MACHINE_ID": "7d1c2b3a49586f7e8d9cabbcddeeff00",
    "_HOSTNAME": "gpu-box",
}
T = datetime(2024, 6, 4, 11, 21, 1, 506123, tzinfo=timezone.utc)


def _record(**fields: object) -> str:
    return json.dumps({**BASE, **fields})


def test_text_message() -> None:
    msg = 'time=2024-06-04T11:21:01.506Z level=INFO source=server.go:599 msg="llama runner started in 2.76 seconds"'
    assert journal_record(_record(MESSAGE=msg)) == (T, msg)


def test_time_is_aware_utc() -> None:
    parsed = journal_record(_record(MESSAGE="x"))
    assert parsed is not None and parsed[0] is not None
    assert parsed[0].tzinfo == timezone.utc


def test_gin_line_with_the_trailing_newline_dropped() -> None:
    msg = '[GIN] 2024/06/04 - 11:21:05 | 200 |  3.980341911s |       127.0.0.1 | POST     "/api/chat"\n'
    assert journal_record(_record(MESSAGE=msg)) == (T, msg.rstrip("\n"))


def test_non_utf8_message_as_byte_array() -> None:
    """journald stores raw bytes; journalctl gives them as numbers when they are not valid UTF-8."""
    raw = [*b"ggml_cuda_init: found 1 CUDA devices: ", 0xFF, 0xFE, *b" RTX"]
    assert journal_record(_record(MESSAGE=raw)) == (T, "ggml_cuda_init: found 1 CUDA devices: \ufffd\ufffd RTX")


def test_message_with_colour_escapes_as_byte_array() -> None:
    """Control characters make journalctl use the byte form even for valid UTF-8 (GIN colours its status)."""
    raw = list(b"[GIN] | \x1b[97;42m 200 \x1b[0m|")
    assert journal_record(_record(MESSAGE=raw)) == (T, "[GIN] | \x1b[97;42m 200 \x1b[0m|")


def test_repeated_field_takes_the_first_value() -> None:
    assert journal_record(_record(MESSAGE=["first", "second"])) == (T, "first")
    assert journal_record(_record(MESSAGE=[[104, 105], "second"])) == (T, "hi")


@pytest.mark.parametrize("message", [None, 12, {"a": 1}, [], [True, False], [300, 1]])
def test_message_too_large_or_unreadable_is_empty(message: object) -> None:
    """null is what journalctl prints for a field over 4096 bytes without --all."""
    assert journal_record(_record(MESSAGE=message)) == (T, "")


def test_missing_message() -> None:
    assert journal_record(json.dumps(BASE)) == (T, "")


@pytest.mark.parametrize("stamp", [None, "", "-5", "1.5e15", "abc", 1717500061506123, "99999999999999999999", "１２"])
def test_unreadable_time_is_none_but_the_message_stays(stamp: object) -> None:
    fields = {**BASE, "MESSAGE": "hello", "__REALTIME_TIMESTAMP": stamp}
    assert journal_record(json.dumps(fields)) == (None, "hello")


@pytest.mark.parametrize("line", [
    "", "No journal files were found.", "-- No entries --", "[1, 2]", '"MESSAGE"', "null", "{", '{"MESSAGE": "x"',
    "[" * 100000,
])
def test_not_a_json_object(line: str) -> None:
    assert journal_record(line) is None


def test_epoch_start() -> None:
    assert journal_record('{"__REALTIME_TIMESTAMP": "0", "MESSAGE": "m"}') == (
        datetime(1970, 1, 1, tzinfo=timezone.utc), "m")
