"""The columnar core of `analyze` (and of replay's read-back): bulk line shapes in polars, rare lines in Python.

A big log is nearly all a few line shapes (health checks above all). Those are recognised and extracted by
polars expressions over byte windows of the file, never as one Python object per line; every other line goes,
in file order and with its line number, through the engine's own parser and the event-by-event store, exactly
as `ietop.pipeline.ingest.file_events` reads it. `stream.bulk_file_events` is that reader.

Why here and not in `parsers/`: the parsers are stdlib-only by contract (they run in the dashboard's hot loop
and in tests without polars); a shape here is a *restatement* of a parser's rule for lines it would certainly
parse one way, and tests/pipeline/test_bulk_differential.py holds the two to the same facts.
"""
