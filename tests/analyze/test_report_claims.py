"""What the README says `ietop analyze` reports, checked on the real fixtures (issue 22, "README claims that
are false"): `--include-prompts` shows the prompts in the terminal report and adds a `prompts` table to
`--csv`/`--parquet` (and nothing of them without it); vLLM's configured-vs-effective table shows every setting
the JSON document has, with the line that proves it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from ietop.cli import main
from ietop.model.durations import secs
from parsers.text.inert import FORBIDDEN

ROOT = Path(__file__).resolve().parents[2]
VLLM_PROMPT = ROOT / "fixtures/vllm/016-v0-0.6.2-request-logging-with-prompt.txt"
OLLAMA_PROMPT = ROOT / "fixtures/ollama/debug-prompt-6560.log"
MLX_DEBUG = ROOT / "fixtures/mlx/debug-server.stderr"
VLLM_SETTINGS = [ROOT / "fixtures/vllm" / name for name in (
    "real-basic-server.log", "real-kv-too-small-server.log", "006-v0-0.6-startup-blocks-concurrency.txt",
    "007-v0-0.6.4-startup-maxseqlen-too-large.txt", "009-v1-0.10-startup-kv-cache-size.txt",
    "010-v1-0.11-startup-custom-log-format.txt")]
WIDE = "220"
"""Terminal columns for the runs whose rows are read back: wide enough that Rich elides no cell."""


def _vllm_prompts(path: Path) -> list[str]:
    """The prompts as vLLM's request logger wrote them (`Received request …: prompt: '…', params:`)."""
    return re.findall(r"Received request \S+: prompt: '(.*?)', params:", path.read_text())


def _ollama_prompts(path: Path) -> list[str]:
    """The `prompt="…"` attribute of Ollama's DEBUG `generate request` / `chat request` lines, as written."""
    return re.findall(r'msg="(?:chat|generate) request".*? prompt="((?:[^"\\]|\\.)*)"', path.read_text())


PROMPT_LOGS = [(VLLM_PROMPT, _vllm_prompts), (OLLAMA_PROMPT, _ollama_prompts)]


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(["analyze", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def _doc(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(_run(capsys, *args, "--json"))
    return doc


@pytest.mark.parametrize(("log", "prompts_of"), PROMPT_LOGS, ids=["vllm", "ollama"])
def test_terminal_report_shows_prompts_only_when_asked(log: Path, prompts_of: Any, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", WIDE)
    prompts: list[str] = prompts_of(log)
    assert prompts, log  # the fixture does carry prompt text
    shown = _run(capsys, str(log), "--include-prompts")
    for prompt in prompts:
        assert prompt in shown, prompt  # Ollama's holds `[bold red]`: printed literally, not as markup
    assert "--include-prompts to show" not in shown
    hidden = _run(capsys, str(log))
    for prompt in prompts:
        assert prompt not in hidden
    assert "lines carry prompt text (omitted; --include-prompts to show)" in hidden


def test_terminal_prompt_is_inert_and_elided(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A huge prompt full of terminal controls prints as one elided line of visible text."""
    real = OLLAMA_PROMPT.read_text().splitlines()[2]  # the `chat request` line
    # SYNTHETIC: the real line's prompt replaced by 3,000 characters holding BEL, backspace, the 8-bit CSI and a
    # bidi override (ESC sequences are stripped as the log is read: colour codes of `docker logs`).
    hostile = "START \x07\x08\x9b2J \u202eevil " + "x" * 3000 + " END"
    log = tmp_path / "long-prompt.log"
    log.write_text(re.sub(r'prompt="(?:[^"\\]|\\.)*"', lambda _m: f'prompt="{hostile}"', real, count=1) + "\n")
    out = _run(capsys, str(log), "--include-prompts")
    assert FORBIDDEN.search(out) is None
    row = next(line for line in out.splitlines() if "START" in line)
    assert "\\x07\\x08\\x9b2J \\u202eevil" in row  # the stand-ins the rest of the report uses
    assert row.rstrip().endswith("…") or "… " in row
    assert "END" not in out
    assert max(len(line) for line in out.splitlines()) <= 80  # Rich's width when not a terminal


def _json_prompt_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"time": p["time"], "text": p["text"], "source_path": p["source"]["path"],
             "source_line": p["source"]["line"]} for p in doc["prompts"]]


@pytest.mark.parametrize("log", [MLX_DEBUG, VLLM_PROMPT, OLLAMA_PROMPT], ids=["mlx", "vllm", "ollama"])
def test_tables_have_prompts_only_when_asked(log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expected = _json_prompt_rows(_doc(capsys, str(log), "--include-prompts"))
    assert expected
    with_csv, with_pq, without_csv, without_pq = (tmp_path / n for n in ("wc", "wp", "oc", "op"))
    _run(capsys, str(log), "--include-prompts", "--csv", str(with_csv), "--parquet", str(with_pq))
    _run(capsys, str(log), "--csv", str(without_csv), "--parquet", str(without_pq))
    assert not list(without_csv.glob("prompts.*")) and not list(without_pq.glob("prompts.*"))
    assert (without_csv / "requests.csv").exists()  # the other tables are still written
    parquet = pl.read_parquet(with_pq / "prompts.parquet")
    assert parquet.select(list(expected[0])).to_dicts() == expected
    csv = pl.read_csv(with_csv / "prompts.csv", schema_overrides={"time": pl.String, "text": pl.String})
    assert csv.select(list(expected[0])).to_dicts() == expected


def _settings_rows(out: str) -> dict[str, list[str]]:
    """The terminal's settings table: setting → [configured, effective, evidence]."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Configured (claim) vs effective"))
    rows: dict[str, list[str]] = {}
    for line in lines[start + 3:]:
        if "│" not in line:
            break
        cells = [c.strip() for c in line.split("│")]
        rows[cells[0]] = cells[1:]
    return rows


def _number(cell: str) -> float:
    return float(cell.removesuffix(" GiB").removesuffix("×"))


@pytest.mark.parametrize("log", VLLM_SETTINGS, ids=[p.name[:24] for p in VLLM_SETTINGS])
def test_vllm_settings_table_shows_what_the_json_has(log: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    config = _doc(capsys, str(log))["config"]
    configured, effective = config["configured"], config["effective"]
    monkeypatch.setenv("COLUMNS", WIDE)
    rows = _settings_rows(_run(capsys, str(log)))
    assert set(rows) == set(configured) | set(effective)
    for key, (conf_cell, eff_cell, line) in rows.items():
        evidence = config["evidence"]["effective" if key in effective else "configured"][key]
        assert line == str(evidence["line"]), key
        for cell, values in ((conf_cell, configured), (eff_cell, effective)):
            value = values.get(key)
            if value is None:
                assert cell == "—", key
            elif key.endswith("_s"):
                assert cell == secs(value), key  # a duration as the dashboard shows one
            elif isinstance(value, (int, float)):
                assert _number(cell) == value, key
                assert re.search(r"\.\d*0$", cell.split()[0].removesuffix("×")) is None, cell  # no "11.120"
            else:
                assert cell == value, key
    # The capacity facts the README promises: the context limit, the KV cache and the concurrency it allows.
    assert "max_model_len" in rows or "max_concurrency_tokens" in rows
    assert {"kv_cache_tokens", "gpu_blocks", "kv_available_gib"} & set(rows)
    if "max_concurrency" in effective:
        assert _number(rows["max_concurrency"][1]) == effective["max_concurrency"]
