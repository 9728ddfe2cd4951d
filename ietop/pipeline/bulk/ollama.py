"""Ollama's health checks as a polars shape: which lines of a window are successful GET/HEAD access lines
that parsers.ollama.gin would certainly read as exactly one non-inference HttpAccess, and their fields.

The pattern is a strict subset of what the per-line path takes without a second look: a bare line (no
envelope, no ANSI colour, no markdown star, so strip_inner() returns it unchanged), GIN's own layout
(`_GIN_PLAIN_RE`), a status below 400, GET or HEAD (never inference), a valid wall-clock stamp. Anything
else (POST, errors, enveloped or coloured lines, odd spacing) is left to the per-line path.
"""

from __future__ import annotations

from typing import Any

import polars as pl

TAG = "[GIN] "
# Validated whole by one DFA match (no captures: a capturing engine costs three times as much); the fields
# are then cut at the places this pattern fixes: the stamp at 6, the status at 30, the method after the one
# `| GET `/`| HEAD ` the line can hold (no other column may contain a bar or a space), the path inside the
# only quotes (one group: cheap where the whole pattern's would not be). A latency padded to GIN's 13
# columns (nearly all) is read from them.
PROBE_RE = (
    r'^\[GIN\] [0-9]{4}/[0-9]{2}/[0-9]{2} - (?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9] \| [123][0-9][0-9] \| *'
    r'(?:[0-9][0-9.]*(?:s|ms|µs|μs|us|ns)|[!-{}~µμ]+) \| *[!-{}~]* \| (?:GET|HEAD) +"[^"\\|]*"$'
)
_UNITS = (("ms", 1e-3), ("µs", 1e-6), ("μs", 1e-6), ("us", 1e-6), ("ns", 1e-9), ("s", 1.0))


def _latency(col: pl.Expr) -> pl.Expr:
    """Seconds of a one-unit Go duration (`52.021µs`), null for any other (`1m2.5s`)."""
    text = col.str.strip_chars()
    number = text.str.strip_chars_end("nmuµμs").cast(pl.Float64, strict=False)
    unit: Any = pl.when(text.str.ends_with(_UNITS[0][0])).then(_UNITS[0][1])
    for suffix, seconds in _UNITS[1:]:
        unit = unit.when(text.str.ends_with(suffix)).then(seconds)
    result: pl.Expr = number * unit.otherwise(None)
    return result


def probes(lines: pl.Series) -> pl.DataFrame:
    """One row per probe line of `lines`: `row` (0-based in the window), `naive` (the stamp as epoch seconds
    read as UTC: the parser's offset is applied by the caller), `status`, `method`, `path`, `latency` (seconds;
    null for a compound Go duration such as `1m2.5s` or an unpadded column, which only the per-line path reads)."""
    line = pl.col("line")
    frame = pl.DataFrame({"line": lines}).with_row_index("row")
    found = frame.filter(line.str.starts_with(TAG) & ~line.str.contains("*", literal=True)
                         & ~line.str.contains("\x1b", literal=True) & line.str.contains(PROBE_RE))
    padded = line.str.slice(49, 3) == " | "
    return found.select(
        "row",
        (line.str.slice(6, 21).str.strptime(pl.Datetime("us"), "%Y/%m/%d - %H:%M:%S", strict=False)
         .dt.epoch("us").cast(pl.Float64) / 1e6).alias("naive"),
        line.str.slice(30, 3).cast(pl.Int32).alias("status"),
        pl.when(line.str.contains("| HEAD ", literal=True)).then(pl.lit("HEAD")).otherwise(pl.lit("GET"))
        .alias("method"),
        line.str.extract(r'"([^"]*)"$', 1).alias("path"),
        pl.when(padded).then(_latency(line.str.slice(36, 13))).alias("latency"),
    ).filter(pl.col("naive").is_not_null())
