"""`--csv` / `--parquet` stream the spooled records (ietop.analyze.frames): the tables are the ones the eager
implementation wrote (whole spool file through `pl.read_ndjson`, then flattened), kept below as the reference,
on the real fixtures; and the counted probes get a table of their own."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from ietop.analyze import frames
from ietop.analyze.report import Analysis
from ietop.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GROUPS = {
    "ollama": sorted((FIXTURES / "ollama").glob("*.log")),
    "vllm": sorted([*(FIXTURES / "vllm").glob("*.txt"), *(FIXTURES / "vllm").glob("*.log")]),
    "mlx": sorted([*(FIXTURES / "mlx").glob("*.txt"), *(FIXTURES / "mlx").glob("*.stderr"),
                   *(FIXTURES / "mlx").glob("*.log")]),
    "overlap": sorted([*(FIXTURES / "vllm" / "overlap").glob("*-server.log"),
                       *(FIXTURES / "mlx" / "overlap").glob("*-server.log")]),
    # One log alone: its records come in the order of that log only.
    "ollama-061": [FIXTURES / "ollama" / "061-v01x-2023-jetson-golog-gin-runner-cuda-error.log"],
    "ollama-051": [FIXTURES / "ollama" / "051-v05-journald-nohost-markdown-bold-abort-499.log"],
}
FORMATS = ("csv", "parquet")


# --- the reference: the eager implementation this module replaced -------------------------------------------
def _old_flatten(frame: Any) -> Any:
    cols = []
    for name, dtype in frame.schema.items():
        if isinstance(dtype, pl.Struct):
            for field in dtype.fields:
                cols.append(pl.col(name).struct.field(field.name).alias(f"{name}_{field.name}"))
        elif isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct):
            # A list of records (issue 23's `breakdown.chain`, newer than this reference): as frames writes it.
            cols.append(pl.col(name).list.eval(pl.element().struct.json_encode()).list.join(";").alias(name))
        elif isinstance(dtype, pl.List):
            cols.append(pl.col(name).cast(pl.List(pl.Utf8)).list.join(";").alias(name))
        else:
            cols.append(pl.col(name))
    out = frame.select(cols)
    if any(isinstance(d, pl.Struct) for d in out.schema.values()):
        return _old_flatten(out)
    return out


def old_write_tables(an: Analysis, directory: str, fmt: str) -> list[str]:
    os.makedirs(directory, exist_ok=True)
    written: list[str] = []
    for table, kind in frames.TABLES:
        path = os.path.join(directory, f"{table}.{fmt}")
        spooled = an.spool.named_file(kind)
        if spooled is not None and os.path.getsize(spooled) > 0:
            frame = _old_flatten(pl.read_ndjson(spooled, infer_schema_length=None))
        else:
            frame = pl.DataFrame({"source_path": [], "source_line": []},
                                 schema={"source_path": pl.Utf8, "source_line": pl.Int64})
        if fmt == "csv":
            # The CSV contract since issue 22: floats to 12 significant digits (0.004913, not
            # 0.004913000000000001); Parquet keeps every bit.
            frame.with_columns(pl.col(pl.Float64).round_sig_figs(12)).write_csv(path)
        else:
            frame.write_parquet(path)
        written.append(path)
    return written
# -------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=sorted(GROUPS))
def analysis(request: pytest.FixtureRequest) -> Iterator[Analysis]:
    paths = GROUPS[request.param]
    assert paths, request.param
    an = Analysis([str(p) for p in paths])
    try:
        yield an
    finally:
        an.close()


def _read(path: str, fmt: str) -> pl.DataFrame:
    # CSV read as text: what is compared is what was written, not what a reader would infer from it.
    return pl.read_csv(path, infer_schema_length=0) if fmt == "csv" else pl.read_parquet(path)


def _assert_same_tables(an: Analysis, tmp: Path, fmt: str, same_order: bool) -> None:
    new = frames.write_tables(an, str(tmp / "new"), fmt)
    old = old_write_tables(an, str(tmp / "old"), fmt)
    # The summary tables come after the streamed ones: probes, then models (issue 23, tested in
    # tests/analyze/test_models_section.py against the JSON).
    assert [os.path.basename(p) for p in new] == [*map(os.path.basename, old), f"probes.{fmt}", f"models.{fmt}"]
    for new_path, old_path in zip(new, old):
        got, want = _read(new_path, fmt), _read(old_path, fmt)
        if same_order:
            if fmt == "csv":  # byte for byte
                assert Path(new_path).read_bytes() == Path(old_path).read_bytes(), new_path
            assert_frame_equal(got, want)
        else:
            assert sorted(got.columns) == sorted(want.columns), new_path
            assert_frame_equal(got.select(want.columns), want)


@pytest.mark.parametrize("fmt", FORMATS)
def test_tables_equal_the_eager_ones(analysis: Analysis, tmp_path: Path, fmt: str) -> None:
    """Default chunks: a fixture's spool is one chunk, so even the column order is the reference's."""
    _assert_same_tables(analysis, tmp_path, fmt, same_order=True)


@pytest.mark.parametrize("fmt", FORMATS)
def test_tables_equal_the_eager_ones_in_small_chunks(analysis: Analysis, tmp_path: Path, fmt: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of a few records: the schema is merged from many chunks and rows are read many at a time. A
    struct's field order may then differ from polars' (see infer_schema), never a type or a value."""
    monkeypatch.setattr(frames, "CHUNK_BYTES", 700)
    monkeypatch.setattr(frames, "SCHEMA_CHUNK_BYTES", 500)
    _assert_same_tables(analysis, tmp_path, fmt, same_order=False)


@pytest.mark.parametrize("fmt", FORMATS)
def test_probes_table(analysis: Analysis, tmp_path: Path, fmt: str) -> None:
    (path,) = [p for p in frames.write_tables(analysis, str(tmp_path), fmt) if p.endswith(f"probes.{fmt}")]
    table = pl.read_csv(path) if fmt == "csv" else pl.read_parquet(path)
    assert table.columns == ["source", "method", "path", "status", "count", "first", "last",
                             "latency_s_mean", "latency_s_max", "latency_s_count"]
    assert table.height == len(analysis.probes)
    assert (table["count"].sum() if table.height else 0) == analysis.probes.total
    want = analysis.probes.as_list(analysis.source_paths)
    assert [(r["source"], r["method"], r["path"], r["status"], r["count"], r["latency_s"]["count"]) for r in want] \
        == list(zip(*(table[c].to_list() for c in ("source", "method", "path", "status", "count",
                                                   "latency_s_count"))))


def test_probes_counted_in_a_polled_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through the CLI: a log polled by a health checker lists its probes in probes.csv / .parquet, once each
    (source, method, path, status), with the counts the JSON report has."""
    log = FIXTURES / "ollama" / "057-v03-docker-desktop-healthcheck-polling-tz-mismatch.log"
    assert main(["analyze", str(log), "--json", "--csv", str(tmp_path / "c"), "--parquet", str(tmp_path / "p")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["probes"], "the fixture is polled"
    want = {(p["method"], p["path"], p["status"]): p["count"] for p in doc["probes"]}
    for table in (pl.read_csv(tmp_path / "c" / "probes.csv"), pl.read_parquet(tmp_path / "p" / "probes.parquet")):
        assert dict(zip(zip(table["method"], table["path"], table["status"]), table["count"])) == want


def _lines(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def test_fields_that_appear_late_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A field null or `{}` for the first thousands of records, then set (facts_evidence, unknown,
    trigger_request), and a number that becomes a float: a schema from the first chunks would lose them."""
    src = {"path": "a.log", "line": 1}
    early = [{"n": i, "x": 1, "facts_evidence": {}, "unknown": {}, "trigger_request": None, "source": src}
             for i in range(3000)]
    late = [{"n": 3000, "x": 2.5, "facts_evidence": {"ttft_s": src}, "unknown": {"prompt_tokens": "why"},
             "trigger_request": {"time": "t", "source": src}, "source": src}]
    path = tmp_path / "request.jsonl"
    path.write_bytes(_lines(early + late))
    monkeypatch.setattr(frames, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(frames, "SCHEMA_CHUNK_BYTES", 4096)
    want = pl.read_ndjson(path, infer_schema_length=None)
    assert frames.infer_schema(str(path)) == want.schema
    got = frames.scan_spool(str(path)).collect()
    assert_frame_equal(got, want)
    flat = frames._flatten(frames.scan_spool(str(path))).collect()
    assert flat.row(-1, named=True)["facts_evidence_ttft_s_line"] == 1
    assert flat.row(-1, named=True)["trigger_request_source_path"] == "a.log"
    assert flat["x"].to_list()[-2:] == [1.0, 2.5]


def test_chunks_are_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    text = b"".join(b'{"a":"' + b"y" * (i % 37) + b'"}\n' for i in range(500)) + b'{"a":"no newline"}'
    path.write_bytes(text)
    chunks = list(frames._chunks(str(path), 64))
    assert b"".join(chunks) == text
    assert all(c.endswith(b"\n") for c in chunks[:-1])
