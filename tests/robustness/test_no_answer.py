"""A request that got no answer (the proxy saw the upstream refuse, time out or reset: `status` null in its
JSONL) used to read "Status: 0×1" in the report and 0 in `--json` and the dashboard (issue 21). The JSON lines
are SYNTHETIC, written by the proxy's own writer (parsers.api.proxy_log.to_json)."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

from ietop.cli import main
from ietop.model.proxied import proxied_request
from ietop.model.records import Ref
from ietop.tui.screens.detail import request_view
from ietop.tui.widgets.requests import request_cells
from parsers.api.proxy_log import to_json
from parsers.events import ProxyRequest

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=timezone.utc)


def measurement(sec: int, status: int | None, error: str | None = None) -> ProxyRequest:
    return ProxyRequest(0, T0.replace(second=sec), "POST", "/api/chat", status, "llama3:8b", True, None, None, None,
                        0.4, 0, None, None, None, None, 300, 0, error)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "proxy.jsonl"
    rows = [measurement(1, 200), measurement(5, None, "upstream down")]
    path.write_text("".join(to_json(r) + "\n" for r in rows))
    return path


def test_the_report_says_no_answer(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(log)]) == 0
    out = capsys.readouterr().out
    assert "Status: 200×1, no answer×1" in out and " 0×1" not in out


def test_the_json_says_null(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "--json", str(log)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in doc["requests"]] == [200, None]


def test_the_dashboard_says_none() -> None:
    req, _error = proxied_request(0.0, measurement(5, None, "upstream down"), Ref(0, 2))
    assert request_cells(req, "llama3:8b")[3] == ("none", "bold red")
    assert "none (no answer)" in _plain(request_view(req, lambda ref: ("proxy.jsonl", None)))


def _plain(renderable: object) -> str:
    from rich.console import Console

    console = Console(width=120, record=True, file=open(os.devnull, "w"))  # noqa: SIM115 - closed with the console
    console.print(renderable)
    text = console.export_text()
    console.file.close()
    return text
