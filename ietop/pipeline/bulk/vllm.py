"""vLLM's health checks as a polars shape: uvicorn access lines the parser would read as exactly one successful
GET/HEAD HttpAccess and nothing else (`/health`, `/metrics`, `/v1/models`: most lines of a busy server).

The pattern is a subset of the parser's route for such a line: strip_inner() leaves it unchanged (no ESC, no
star, no `]:`, no trailing `>`/CR), then an optional `(APIServer pid=N) ` prefix (parsers.vllm.log._PREFIX_RE),
uvicorn's `INFO:` (UVICORN_RE) and the access grammar (parsers.vllm.lines._ACCESS_RE), with ASCII digits. What
the line would change in the parser (the end of a raw error's message, an indented block; the V1 process name)
the reader applies: see ietop.pipeline.bulk.stream.
"""

from __future__ import annotations

import polars as pl

PROBE_RE = (
    r'^(?:\(([^()]*) pid=[0-9]+\) )?INFO: +\S* - "(GET|HEAD) (\S+) HTTP/[0-9.]+" ([123][0-9][0-9])(?: .*)?$'
)
# \x1c-\x1f are whitespace to Python's `\S` (the parser's) and not to polars' (Rust's): left to the parser.
_REFUSED = ("\x1b", "*", "]:", "│", "\x1c", "\x1d", "\x1e", "\x1f")


def probes(lines: pl.Series) -> pl.DataFrame:
    """One row per probe line: `row` (0-based in the window), `proc` (the process prefix, null without one),
    `method`, `path`, `status`."""
    line = pl.col("line")
    frame = pl.DataFrame({"line": lines}).with_row_index("row")
    found = frame.filter(line.str.contains(" HTTP/", literal=True) & line.str.contains("INFO:", literal=True)
                         & ~line.str.contains_any(list(_REFUSED)) & ~line.str.ends_with(">")
                         & ~line.str.ends_with("\r") & line.str.contains(PROBE_RE))
    groups = found["line"].str.extract_groups(PROBE_RE)
    return pl.DataFrame({
        "row": found["row"],
        "proc": groups.struct.field("1"),
        "method": groups.struct.field("2"),
        "path": groups.struct.field("3"),
        "status": groups.struct.field("4").cast(pl.Int32),
    })
