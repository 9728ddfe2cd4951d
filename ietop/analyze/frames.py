"""`--csv DIR` / `--parquet DIR`: one table per entity, through polars (imported lazily: it is heavy
and only this edge needs it).

Tables are built from the spooled JSON lines with polars' NDJSON reader, so a large report goes to disk
without passing through Python dicts. Nested fields (`source`, `trigger_request`) are flattened into
`source_path`/`source_line` style columns because CSV has no nesting.
"""

from __future__ import annotations

import os
from typing import Any

from ietop.analyze.report import Analysis

TABLES = (("requests", "request"), ("loads", "load"), ("unloads", "unload"),
          ("truncations", "truncation"), ("errors", "error"), ("hints", "hint"))


def _flatten(frame: Any) -> Any:
    import polars as pl

    cols = []
    for name, dtype in frame.schema.items():
        if isinstance(dtype, pl.Struct):
            for field in dtype.fields:
                cols.append(pl.col(name).struct.field(field.name).alias(f"{name}_{field.name}"))
        elif isinstance(dtype, pl.List):
            cols.append(pl.col(name).cast(pl.List(pl.Utf8)).list.join(";").alias(name))
        else:
            cols.append(pl.col(name))
    out = frame.select(cols)
    # One more level (trigger_request.source) is enough for every record ietop writes.
    if any(isinstance(d, pl.Struct) for d in out.schema.values()):
        return _flatten(out)
    return out


def write_tables(an: Analysis, directory: str, fmt: str) -> list[str]:
    """Write each entity table to `directory` as csv or parquet; returns the written paths."""
    import polars as pl

    os.makedirs(directory, exist_ok=True)
    written: list[str] = []
    for table, kind in TABLES:
        path = os.path.join(directory, f"{table}.{fmt}")
        spooled = an.spool.named_file(kind)
        if spooled is not None and os.path.getsize(spooled) > 0:
            frame = _flatten(pl.read_ndjson(spooled, infer_schema_length=None))
        else:
            frame = pl.DataFrame({"source_path": [], "source_line": []},
                                 schema={"source_path": pl.Utf8, "source_line": pl.Int64})
        if fmt == "csv":
            frame.write_csv(path)
        else:
            frame.write_parquet(path)
        written.append(path)
    return written
