"""The terminal report and CSV as people read them (issue 22): durations as the dashboard shows them (a 1 h 24 m
request was "5079.000"), counts without decimals ("11.000"), no empty settings table, CSV floats without
binary noise ("0.004913000000000001")."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from ietop.cli import main
from parsers.api.proxy_log import to_json
from tests.robustness.test_no_answer import measurement

ROOT = Path(__file__).resolve().parents[2]


def _report(capsys: pytest.CaptureFixture[str], *paths: Path) -> str:
    assert main(["analyze", *map(str, paths)]) == 0
    return capsys.readouterr().out


def test_a_long_request_reads_as_hours_and_minutes(capsys: pytest.CaptureFixture[str]) -> None:
    out = _report(capsys, ROOT / "fixtures/ollama/066-supp-v07-journald-truncation-long-chat-latency.log")
    assert "1h24m" in out  # GIN's 1h24m39s: hours and minutes, as the dashboard shows an age
    assert "5079" not in out


def test_counts_are_whole_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    out = _report(capsys, ROOT / "ietop/demo/incident.log")
    row = next(line for line in out.splitlines() if line.lstrip().startswith("end to end"))
    assert re.search(r"│ 18 +│", row), row
    assert re.search(r"\d\.000\b", out) is None


def test_no_empty_settings_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "proxy.jsonl"
    log.write_text(to_json(measurement(1, 200)) + "\n")
    out = _report(capsys, log)
    assert "Configured (claim) vs effective" not in out
    assert "No configured or effective settings in these logs." in out


def test_csv_floats_have_no_binary_noise(tmp_path: Path) -> None:
    assert main(["analyze", "--csv", str(tmp_path), str(ROOT / "ietop/demo/incident.log")]) == 0
    for path in tmp_path.glob("*.csv"):
        text = path.read_text()
        assert re.search(r"\d\.\d*0000000\d", text) is None, path.name
        assert re.search(r"\d\.\d*9999999\d", text) is None, path.name
    requests = pl.read_csv(tmp_path / "requests.csv")
    assert requests["latency_s"].max() == pytest.approx(31.0, abs=0.5)
