"""`ietop analyze`'s per-model outputs: the CSV and Parquet `models` tables hold what the JSON's `models` holds, the
terminal report has a Models section with every model, and "Slowest inference requests" names each one's model."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from ietop.analyze.frames import write_tables
from ietop.analyze.report import SCHEMA, Analysis
from ietop.analyze.text import render

ROOT = Path(__file__).resolve().parents[2]
INCIDENT = ROOT / "ietop" / "demo" / "incident.log"
MLX = ROOT / "fixtures" / "mlx" / "debug-server.stderr"
LISTS = ("evicted_for", "evicted_by_this")


@pytest.fixture(scope="module", params=[INCIDENT, MLX], ids=["ollama-incident", "mlx-debug"])
def analyzed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    an = Analysis([str(request.param)])
    out = tmp_path_factory.mktemp("tables")
    try:
        doc = io.StringIO()
        an.write_json(doc)
        write_tables(an, str(out / "csv"), "csv")
        write_tables(an, str(out / "parquet"), "parquet")
        console = Console(width=100, file=io.StringIO(), record=True)
        console.print(render(an))
        text = console.export_text()
    finally:
        an.close()
    return {"doc": json.loads(doc.getvalue()), "dir": out, "text": text}


def test_json_models_are_additive_to_the_schema(analyzed: dict[str, Any]) -> None:
    doc = analyzed["doc"]
    assert doc["schema"] == SCHEMA == "ietop.analyze/2"
    assert doc["models"], "a log with inference requests has models"
    served = {(r["engine"], r["model"]) for r in doc["requests"] if r["inference"]}
    assert served <= {(m["engine"], m["model"]) for m in doc["models"]}


def _csv_value(column: str, text: str) -> Any:
    if column in LISTS:
        return json.loads(text)
    if text == "":
        return None
    try:
        return float(text)
    except ValueError:
        return text


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return b == pytest.approx(a, rel=1e-11)  # CSV keeps 12 significant digits
    return bool(a == b)


def test_csv_models_table_equals_the_json(analyzed: dict[str, Any]) -> None:
    with open(analyzed["dir"] / "csv" / "models.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    models = analyzed["doc"]["models"]
    assert len(rows) == len(models)
    for row, want in zip(rows, models, strict=True):
        assert list(row) == list(want)
        for column, value in want.items():
            got = _csv_value(column, row[column])
            if column == "model" and value is None:
                got = None if got == "" else got
            assert _same(value, got), (want["model"], column, value, got)


def test_parquet_models_table_equals_the_json(analyzed: dict[str, Any]) -> None:
    import polars as pl

    rows = pl.read_parquet(analyzed["dir"] / "parquet" / "models.parquet").to_dicts()
    models = analyzed["doc"]["models"]
    assert len(rows) == len(models)
    for row, want in zip(rows, models, strict=True):
        assert list(row) == list(want)
        for column, value in want.items():
            assert _same(value, row[column]), (want["model"], column, value, row[column])


def test_report_has_models_and_the_slowest_requests_model(analyzed: dict[str, Any]) -> None:
    text, doc = analyzed["text"], analyzed["doc"]
    assert "Models: requests" in text and "Models: loads, evictions" in text
    section = text[text.index("Models: requests"):text.index("Loads and evictions")]
    for m in doc["models"]:
        # A long MLX path folds onto more lines: its first characters start a row.
        assert (m["model"] or "?")[:8] in section, m["model"]
    slowest = text[text.index("Slowest inference requests"):text.index("Models: requests")]
    header = next(line for line in slowest.splitlines() if "latency" in line)
    assert "model" in header
    top = max((r for r in doc["requests"] if r["inference"] and r["latency_s"] is not None),
              key=lambda r: r["latency_s"])
    first_row = slowest.splitlines()[3]
    assert (top["model"] or "—")[:8] in first_row, first_row
