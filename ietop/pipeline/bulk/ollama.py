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
# The latency's digit runs are bounded (15 with a unit, 7 in any other shape): the parser refuses a latency of
# 2**53 s or more as implausible (parsers.events.sane), and such a line must stay its to refuse. Go's own
# durations end at 2562047h47m16.854775807s.
_NOT_DIGIT = r"[!-/:-{}~µμ]"
PROBE_RE = (
    r'^\[GIN\] [0-9]{4}/[0-9]{2}/[0-9]{2} - (?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9] \| [123][0-9][0-9] \| *'
    r'(?:[0-9][0-9.]{0,14}(?:s|ms|µs|μs|us|ns)|(?:(?:[0-9]{1,7}' + _NOT_DIGIT + r'|' + _NOT_DIGIT + r')+[0-9]{0,7}'
    r'|[0-9]{1,7})) \| *[!-{}~]* \| (?:GET|HEAD) +"[^"\\|]*"$'
)
_UNITS = {"ms": 1e-3, "µs": 1e-6, "μs": 1e-6, "us": 1e-6, "ns": 1e-9}
"""A latency's last two characters → its unit; any other pair ends in `s` (`1.5s`, `0s`): seconds."""

# llama-server's per-request lines that parse to no event (parse_server_line() returns [] for them): the slot
# picked, the sampler chain, "processing task", cache trims, the timing header, "all slots are idle". Their
# only effect on the parser is the task id a continuation line inherits (ServerLineState.last_task) and the
# E5 era they show; the reader applies both. The pattern is _SERVER_RE's, with ASCII digits; a line holding
# one of the words parse_server_line() looks for, a star, an ESC, `]:` or a trailing `>`/CR (which
# strip_inner() might act on) is left to the parser.
SERVER_PREFIXES = ("slot ", "srv ", "que ", "cmn ")
SERVER_RE = r"^(?:slot|srv|que|cmn)\s+[^:]+?:\s+(?:id\s+(-?[0-9]+) \| task (-?[0-9]+) \| )?.*$"
SERVER_WORDS = ("new prompt", "prompt processing", " time =", "stop processing", "*", "\x1b", "]:")

# The envelopes strip_inner() takes off an access line in one step, then stops (the rest starts with "["):
# `docker logs -t`, journald's short form, a compose service column — its own patterns (_DOCKER_TS,
# _JOURNALD, _COMPOSE in parsers.text.envelope), in the order it tries them and under the conditions it
# tries them: a line that starts like a date (`2024-05-…`) is only ever docker's; journald needs a `]:`, no
# leading `[`, `{`, `time=` or space; compose is what journald did not take.
DOCKER_ENV = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?Z "
DATE_LIKE = r"^[0-9]...-..-"
OTHER_START = r"^(?:[\[{\s\x1c-\x1f]|time=)"
JOURNALD_ENV = r"^[^ ]+(?: +\d{1,2})? +\d\d:\d\d:\d\d(?:\.\d+)? +(?:[^ ]+ +)?[^ \[]+\[\d+\]: ?"
COMPOSE_ENV = r"^[A-Za-z0-9][\w.\-]* +\| "


def _latency(col: pl.Expr) -> pl.Expr:
    """Seconds of a one-unit Go duration (`52.021µs`), null for any other (`1m2.5s`)."""
    text = col.str.strip_chars_start(" ")
    number = text.str.strip_chars_end("nmuµμs").cast(pl.Float64, strict=False)
    unit = text.str.slice(-2).replace_strict(_UNITS, default=1.0, return_dtype=pl.Float64)
    return number * unit


def inert(lines: pl.Series) -> pl.DataFrame:
    """One row per llama-server line that gives no event: `row`, `task` (the id it sets as the last task, null
    when it sets none: no id, or a negative one)."""
    line = pl.col("line")
    frame = pl.DataFrame({"line": lines}).with_row_index("row")
    starts: Any = line.str.starts_with(SERVER_PREFIXES[0])
    for prefix in SERVER_PREFIXES[1:]:
        starts = starts | line.str.starts_with(prefix)
    # The prefixes first, alone: a filter computes every term of its predicate for every row, and these four
    # byte compares leave ~1 line in 10 of a busy window for the scans and regexes below (29 -> 13 ms a window).
    found = frame.filter(starts).filter(
        ~line.str.contains_any(list(SERVER_WORDS)) & ~line.str.ends_with(">") & ~line.str.ends_with("\r")
        & ~line.str.contains(COMPOSE_ENV) & line.str.contains(SERVER_RE))
    task = found["line"].str.extract(SERVER_RE, 2).cast(pl.Int64, strict=False)
    # An id the parser reads (any Unicode digit) but this pattern does not: leave the line to the parser.
    unsure = task.is_null() & found["line"].str.contains("| task ", literal=True)
    return pl.DataFrame({"row": found["row"], "task": task}).filter(~unsure).with_columns(
        task=pl.when(pl.col("task") >= 0).then(pl.col("task")))


def _unwrapped(framed: pl.DataFrame) -> pl.DataFrame:
    """The access lines inside one envelope: `line` is the inner line, as strip_inner() would leave it."""
    if not len(framed):
        return framed
    line = pl.col("line")
    docker = line.str.contains(DOCKER_ENV)
    journald = (~line.str.contains(DATE_LIKE) & ~line.str.contains(OTHER_START)
                & line.str.contains("]:", literal=True) & line.str.contains(JOURNALD_ENV))
    compose = (~line.str.contains(DATE_LIKE) & ~line.str.contains(OTHER_START) & ~journald
               & line.str.contains(COMPOSE_ENV))
    inner = (pl.when(docker).then(line.str.replace(DOCKER_ENV, ""))
             .when(journald).then(line.str.replace(JOURNALD_ENV, ""))
             .when(compose).then(line.str.replace(COMPOSE_ENV, "")))
    return framed.with_columns(inner.alias("line")).filter(line.str.starts_with(TAG))


def probes(lines: pl.Series) -> pl.DataFrame:
    """One row per probe line of `lines`: `row` (0-based in the window), `naive` (the stamp as epoch seconds
    read as UTC: the parser's offset is applied by the caller), `status`, `method`, `path`, `latency` (seconds;
    null for a compound Go duration such as `1m2.5s` or an unpadded column, which only the per-line path reads)."""
    line = pl.col("line")
    frame = pl.DataFrame({"line": lines}).with_row_index("row")
    tagged = frame.filter(line.str.contains(TAG, literal=True) & ~line.str.contains("*", literal=True)
                          & ~line.str.contains("\x1b", literal=True))
    bare = line.str.starts_with(TAG)
    inner = pl.concat([tagged.filter(bare), _unwrapped(tagged.filter(~bare))])
    found = inner.filter(line.str.contains(PROBE_RE))
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
