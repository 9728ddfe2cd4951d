"""Log text that would act on a terminal or reorder what is read (8-bit CSI/OSC/DCS, DEL, bidi overrides and
isolates, line separators, invisible characters) reaches no human-facing output as itself: the `analyze`
report and `--csv` show stand-ins, `--json` escapes them and still decodes to the very values (`--parquet` keeps
them exact), the dashboard's cells show stand-ins.

The logs are the demo incident (model names in loads, unloads, requests and hints; client addresses; request
paths) and the real DEBUG prompt line of ollama#6560, with SYNTHETIC hostile text spliced into those fields.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from rich.console import Console

from ietop.cli import main
from ietop.tui.format import cell, clean, safe
from parsers.text.inert import FORBIDDEN, visible

ROOT = Path(__file__).resolve().parents[2]
INCIDENT = ROOT / "ietop" / "demo" / "incident.log"
PROMPTS = ROOT / "fixtures" / "ollama" / "debug-prompt-6560.log"

# SYNTHETIC. No whitespace: it sits inside a model name, an address and a file name as one token. 8-bit CSI,
# OSC and DCS each with their ST, DEL, bidi override/isolates/marks, invisible characters, a tag character
# (hidden ASCII), a C0 control.
HOSTILE = ("\x9b31m\x9d0;title\x9c\x90q\x9c\x7f\u202e\u2066\u2069\u200f\u061c\u200e\ufeff\U000e0041\xad\u200b"
           "\u2060\ufff9\x01")
BREAKS = "\u2028\u2029\x85"
"""Line breaks to Python and Rich, but not to the log reader: they stay in a path or a message."""
MODEL = "qwen3:8b" + HOSTILE
CLIENT = "127.0.0.1" + HOSTILE
PATH = "/api/chat" + HOSTILE + BREAKS
MESSAGE = "boom" + HOSTILE + BREAKS + " [bold]x[/bold]"
PROMPT = "summarise " + HOSTILE + BREAKS


@pytest.fixture(scope="module")
def hostile_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    text = INCIDENT.read_text(encoding="utf-8")
    text = text.replace("qwen3:8b", MODEL).replace("127.0.0.1 |", CLIENT + " |", 3)
    text = text.replace('"/api/chat"', f'"{PATH}"')
    text += f'time=2026-11-28T14:30:00.000Z level=ERROR source=x.go:1 msg="{MESSAGE}"\n'
    # The file's own name is shown too (the summary, every record's source).
    log = tmp_path_factory.mktemp("inert") / f"incident{HOSTILE}.log"
    log.write_text(text, encoding="utf-8")
    return log


@pytest.fixture(scope="module")
def prompt_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    text = PROMPTS.read_text(encoding="utf-8").replace("please summarise", PROMPT)
    log = tmp_path_factory.mktemp("inert") / "prompts.log"
    log.write_text(text, encoding="utf-8")
    return log


def _forbidden(text: str) -> list[str]:
    return sorted({hex(ord(m.group())) for m in FORBIDDEN.finditer(text)})


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(["analyze", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_the_report_shows_stand_ins(hostile_log: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # no folded cell splits a stand-in in two
    out = _run(capsys, str(hostile_log))
    assert _forbidden(out) == []
    # The model (timeline, hints), the request path, the error and the file name are all there, made visible.
    for shown in ("qwen3:8b\\x9b31m\\x9d0;title\\x9c\\x90q\\x9c\\x7f\\u202e\\u2066\\u2069",
                  "boom\\x9b31m", "\\u2028\\u2029\\x85 [bold]x[/bold]", "incident\\x9b31m"):
        assert shown in out


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def test_json_escapes_them_and_decodes_to_the_same_values(hostile_log: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    for extra in ([], ["--all-requests"]):
        out = _run(capsys, str(hostile_log), "--json", *extra)
        assert _forbidden(out) == []
        doc = json.loads(out)
        assert doc["sources"][0]["path"] == str(hostile_log)
        assert {r["model"] for r in doc["loads"]} >= {MODEL}
        assert {u["model"] for u in doc["unloads"]} >= {MODEL}
        requests = doc["requests"]
        assert {r["path"] for r in requests if r["path"].startswith("/api/chat")} == {PATH}
        assert CLIENT in {r["client"] for r in requests}
        assert MODEL in {r["model"] for r in requests}
        assert all(r["source"]["path"] == str(hostile_log) for r in requests)
        assert doc["errors"][-1]["message"] == MESSAGE
        assert any(MODEL in h["detail"] for h in doc["hints"])
        # Every value that holds a forbidden character holds it whole: escaped, not replaced.
        assert HOSTILE in "".join(_strings(doc))


def test_json_prompts_too(prompt_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(capsys, str(prompt_log), "--json", "--include-prompts")
    assert _forbidden(out) == []
    texts = [p["text"] for p in json.loads(out)["prompts"]]
    assert any(PROMPT in t for t in texts)


def test_csv_shows_stand_ins_and_parquet_keeps_the_values(hostile_log: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    _run(capsys, str(hostile_log), "--csv", str(tmp_path / "csv"), "--parquet", str(tmp_path / "pq"))
    for table in (tmp_path / "csv").glob("*.csv"):
        assert _forbidden(table.read_text(encoding="utf-8")) == [], table.name
    requests = pl.read_csv(tmp_path / "csv" / "requests.csv")
    # The stand-ins the report shows (CSV has no escape: the value itself is what a reader sees).
    assert visible(PATH) in requests["path"].to_list()
    assert visible(CLIENT) in requests["client"].to_list()
    assert visible(MESSAGE) in pl.read_csv(tmp_path / "csv" / "errors.csv")["message"].to_list()
    exact = pl.read_parquet(tmp_path / "pq" / "requests.parquet")
    assert PATH in exact["path"].to_list() and CLIENT in exact["client"].to_list()


@pytest.mark.parametrize("text", [MODEL, PATH, MESSAGE, "\x1b]52;c;cHduZWQ=\x07 \u202eevil\u2066"])
def test_dashboard_cells_show_stand_ins(text: str) -> None:
    assert _forbidden(clean(text)) == []
    assert _forbidden(cell(text)[0]) == []
    console = Console(record=True, width=400, color_system=None, file=io.StringIO())
    console.print(safe(text))
    rendered = console.export_text()
    assert _forbidden(rendered) == []
    assert "\\u202e" in rendered and "\\u2066" in rendered


def test_the_proxy_line_per_request_is_inert() -> None:
    """`ietop proxy` prints a line per measured request on stderr: its model, path and error come from the
    network (issue 21)."""
    from datetime import datetime, timezone

    from ietop.cli import proxy_line
    from parsers.events import ProxyRequest
    from parsers.text.inert import FORBIDDEN

    hostile = "llama\x9b31m\u202e[bold]x"
    e = ProxyRequest(0, datetime(2026, 1, 1, tzinfo=timezone.utc), "POST", "/api/chat\x1b[2J", 200, hostile, True,
                     0.1, 0.2, 0.01, 1.0, 10, 5, 10, None, None, 100, 200, "upstream said \x1b]0;pwned\x07")
    line = proxy_line(e)
    assert FORBIDDEN.search(line) is None and "\x1b" not in line, line
    assert "[bold]" in line and "ttft=200ms" in line
