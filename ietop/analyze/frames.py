"""`--csv DIR` / `--parquet DIR`: one table per entity, through polars (imported lazily: it is heavy
and only this edge needs it).

Tables are built from the spooled JSON lines and streamed to disk, so their peak memory is flat in the size
of the log: a GB of log spools hundreds of MB of records, and reading them whole (`pl.read_ndjson`, as this
module did) took the peak of `analyze --parquet` on a 1 GiB synthetic log from the analysis' 0.43 GB to 1.16 GB
(bench/tables_rss.py). Two passes over each spool file, both in bounded memory:

1. The schema: polars infers one per chunk of lines and the chunks' schemas are merged with polars' own
   supertype rules (the rules its whole-file inference folds rows with). A sample would not do: a field can
   be null or `{}` for the first many thousand records (`facts_evidence`, `unknown`, `trigger_request`) and
   a schema that missed it would drop the data or fail on it.
2. The rows: chunks parsed with that schema feed a lazy frame (an IO-source plugin) whose flattening runs on
   polars' streaming engine and sinks to the file.

The spool files are read, not memory-mapped: `pl.scan_ndjson(path)` maps the whole file, and mapped pages
count in the resident set as much as parsed ones do. Nested fields (`source`, `trigger_request`) are flattened
into `source_path`/`source_line` style columns and lists joined with ";" because CSV has no nesting.

CSV is text that people read (`cat`, `less`, a spreadsheet, which applies bidi controls within a cell), and it has
no escape syntax: the characters `parsers.text.inert` forbids are written as the stand-ins the terminal report
shows (`\\x9b`, `\\u202e`). Such a value then differs from the log's (and a stand-in cannot be told from the same
text written literally); `--parquet` and `--json` keep it exact. Only values that held such a character change.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ietop.analyze.report import Analysis
from parsers.text.inert import characters, stand_in

if TYPE_CHECKING:
    import polars as pl

TABLES = (("requests", "request"), ("loads", "load"), ("unloads", "unload"),
          ("truncations", "truncation"), ("errors", "error"), ("hints", "hint"))
PROBES_TABLE = "probes"
MODELS_TABLE = "models"
"""Per engine and model (the JSON's `models`): one row each, built in memory (one row per model). Its two lists
(`evicted_for`, `evicted_by_this`: model and count) stay lists of structs in Parquet; CSV has no nesting, so
there each is its JSON text (`[{"model":"qwen3:8b","count":1}]`: a model name can hold any separator)."""
PROMPTS = ("prompts", "prompt")
"""Written only with --include-prompts (prompt text is private): the JSON's `prompts`, source flattened."""

CHUNK_BYTES = 1 << 20
"""Bytes of JSON lines parsed at a time. Larger chunks parse no faster but raise the peak (polars' allocator
keeps what a bigger parse took): 1 MiB is ~2,000 requests."""
SCHEMA_CHUNK_BYTES = 4 << 20
"""Inferring a schema keeps no rows, so its chunks can be larger (fewer, cheaper merges)."""
ROW_GROUP_ROWS = 32_768
"""Parquet row group: the sink buffers one whole group before writing it; polars' default (~122k rows)
cost ~50 MB more at the peak on a 175 MB request spool, for no gain to readers of tables this narrow."""


def _chunks(path: str, size: int) -> Iterator[bytes]:
    """The file's whole lines, about `size` bytes at a time (a longer line comes whole, in a larger chunk)."""
    with open(path, "rb") as f:
        rest = b""
        while True:
            block = f.read(size)
            if not block:
                if rest.strip():
                    yield rest
                return
            if rest:
                block = rest + block
            cut = block.rfind(b"\n") + 1
            rest = block[cut:]
            if cut:
                yield block[:cut]


def infer_schema(path: str) -> pl.Schema:
    """The schema `pl.read_ndjson(path, infer_schema_length=None)` infers, in memory bounded by a chunk.

    Types come out the same; the order of fields (a record's or a nested struct's) can differ only where
    polars' own order depends on which rows come first (fields of `facts_evidence` no single chunk holds all of)."""
    import polars as pl

    merged: pl.Struct | None = None
    seen: list[pl.Struct] = []
    for chunk in _chunks(path, SCHEMA_CHUNK_BYTES):
        part = pl.Struct(pl.scan_ndjson(chunk, infer_schema_length=None).collect_schema())
        # Most chunks of a kind have a shape seen before: merging it again would change nothing.
        if part in seen:
            continue
        seen.append(part)
        if merged is None:
            merged = part
            continue
        # A one-column frame of each, concatenated "relaxed": the supertype of two structs is what the
        # whole-file inference computes for two rows (common fields widened, missing ones appended).
        both = pl.concat([pl.DataFrame(schema={"r": merged}), pl.DataFrame(schema={"r": part})],
                         how="vertical_relaxed")
        dtype = both.schema["r"]
        assert isinstance(dtype, pl.Struct)
        merged = dtype
    return pl.Schema() if merged is None else pl.Schema({f.name: f.dtype for f in merged.fields})


def scan_spool(path: str) -> pl.LazyFrame:
    """The records of one spool file as a lazy frame that reads them a chunk at a time."""
    import polars as pl

    schema = infer_schema(path)
    try:
        from polars.io.plugins import register_io_source
    except ImportError:  # an older polars: it still streams, with the file mapped (see the module doc)
        return pl.scan_ndjson(path, schema=schema)

    def source(with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None,
               _batch_size: int | None) -> Iterator[pl.DataFrame]:
        left = n_rows
        for chunk in _chunks(path, CHUNK_BYTES):
            frame = pl.read_ndjson(chunk, schema=schema)
            # The engine may push a projection, a filter or a limit down: the plugin contract is to apply them.
            if with_columns is not None:
                frame = frame.select(with_columns)
            if predicate is not None:
                frame = frame.filter(predicate)
            if left is not None:
                frame = frame.head(left)
                left -= frame.height
            yield frame
            if left is not None and left <= 0:
                return

    return register_io_source(source, schema=schema, explain_name="ietop spool", explain_detail=path)


def _flatten(frame: pl.LazyFrame) -> pl.LazyFrame:
    import polars as pl

    cols = []
    for name, dtype in frame.collect_schema().items():
        if isinstance(dtype, pl.Struct):
            for field in dtype.fields:
                cols.append(pl.col(name).struct.field(field.name).alias(f"{name}_{field.name}"))
        elif isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct):
            # A list of records (a request's `breakdown.chain`): each as its JSON object, joined by ";".
            cols.append(pl.col(name).list.eval(pl.element().struct.json_encode()).list.join(";").alias(name))
        elif isinstance(dtype, pl.List):
            cols.append(pl.col(name).cast(pl.List(pl.Utf8)).list.join(";").alias(name))
        else:
            cols.append(pl.col(name))
    out = frame.select(cols)
    # One more level (trigger_request.source) is enough for every record ietop writes.
    if any(isinstance(d, pl.Struct) for d in out.collect_schema().values()):
        return _flatten(out)
    return out


def probes_frame(an: Analysis) -> pl.DataFrame:
    """The counted probes (`ietop.analyze/2`'s `probes`), one row per source, method, path and status: few
    rows, built in memory. The schema is fixed so an empty table (`--all-requests`) still has its columns."""
    import polars as pl

    text, whole, real = pl.String(), pl.Int64(), pl.Float64()
    schema = pl.Schema({"source": text, "method": text, "path": text, "status": whole, "count": whole,
                        "first": text, "last": text,
                        "latency_s": pl.Struct({"mean": real, "max": real, "count": whole})})
    return pl.DataFrame(an.probes.as_list(an.source_paths), schema=schema)


def models_frame(an: Analysis, fmt: str) -> pl.DataFrame:
    """The `models` rows with a fixed schema (an empty table still has its columns)."""
    import json

    import polars as pl

    from ietop.model.per_model import COLUMNS

    text, whole, real = pl.String(), pl.Int64(), pl.Float64()
    pairs = pl.List(pl.Struct({"model": text, "count": whole}))
    counts = {"requests", "cold_loads", "loads", "loads_failed", "evictions_suffered", "evictions_caused",
              "truncations"}
    lists = ("evicted_for", "evicted_by_this")
    schema = pl.Schema({c: text if c in ("engine", "model") else whole if c in counts
                        else (text if fmt == "csv" else pairs) if c in lists else real for c in COLUMNS})
    rows = an.models()
    if fmt == "csv":
        rows = [{**r, **{c: json.dumps(r[c], ensure_ascii=False) for c in lists}} for r in rows]
    return pl.DataFrame(rows, schema=schema)


def _inert(frame: pl.LazyFrame) -> pl.LazyFrame:
    """Every text column with each forbidden character replaced by its stand-in (`parsers.text.inert.visible`'s,
    done by polars: one multi-pattern pass in the streaming engine, no row through Python)."""
    import polars as pl

    texts = [name for name, dtype in frame.collect_schema().items() if dtype == pl.String]
    if not texts:
        return frame
    chars = characters()
    return frame.with_columns(pl.col(texts).str.replace_many(chars, [stand_in(c) for c in chars]))


def _write(frame: pl.LazyFrame, path: str, fmt: str) -> None:
    if fmt == "csv":
        import polars as pl

        # 12 significant digits: a sum of floats prints as 0.004913, not 0.004913000000000001 (CSV is read by
        # people; Parquet keeps every bit).
        _inert(frame).with_columns(pl.col(pl.Float64).round_sig_figs(12)).sink_csv(path)
    else:
        frame.sink_parquet(path, row_group_size=ROW_GROUP_ROWS)


def write_tables(an: Analysis, directory: str, fmt: str) -> list[str]:
    """Write each entity table (`prompts` too with --include-prompts), then `probes` and `models`, to `directory`
    as csv or parquet; returns the written paths."""
    import polars as pl

    os.makedirs(directory, exist_ok=True)
    written: list[str] = []
    for table, kind in (*TABLES, PROMPTS) if an.include_prompts else TABLES:
        path = os.path.join(directory, f"{table}.{fmt}")
        spooled = an.spool.named_file(kind)
        frame: pl.LazyFrame
        if spooled is not None and os.path.getsize(spooled) > 0:
            frame = scan_spool(spooled)
        else:
            frame = pl.LazyFrame({"source_path": [], "source_line": []},
                                 schema={"source_path": pl.Utf8, "source_line": pl.Int64})
        _write(_flatten(frame), path, fmt)
        written.append(path)
    path = os.path.join(directory, f"{PROBES_TABLE}.{fmt}")
    _write(_flatten(probes_frame(an).lazy()), path, fmt)
    written.append(path)
    path = os.path.join(directory, f"{MODELS_TABLE}.{fmt}")
    _write(models_frame(an, fmt).lazy(), path, fmt)
    written.append(path)
    return written
