"""Prometheus text exposition (a `/metrics` scrape) -> one :class:`parsers.events.Scrape`.

The text format has enough corners (label escapes, `+Inf`/`NaN`, exponents, optional timestamps, counters
with or without `_total`) that a hand-written parser would drift from the spec, so this module delegates the
syntax to ``prometheus_client.parser`` — the maintained reference implementation in Python.

Third-party import: this is the ONE module in `parsers` allowed a non-stdlib import (prometheus_client,
already a project dependency, pure Python, no I/O). Every other parser stays stdlib-only; the architecture
test and the import-linter contract carry an explicit exception for this file.

What this module adds on top of the library:
- totality: the library's parser is a generator that stops at the first bad line. A bad scrape is re-read
  family block by family block, then line by line inside a bad block, so everything readable is kept and
  the unreadable lines are counted (:func:`parse_scrape_counted`);
- names are canonicalised across vLLM versions (:mod:`parsers.vllm.metrics`), and an old-name sample is
  dropped when the same series is present under the new name (deprecated names are exposed twice);
- `*_created` samples (creation-time gauges the client library adds) are dropped: they are not state;
- labels are sorted tuples, values floats; exposition timestamps are ignored (the scrape has one time).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from prometheus_client.parser import text_string_to_metric_families

from parsers.events import MetricSample, Scrape
from parsers.vllm.metrics import canonical

__all__ = ["ScrapeError", "parse_scrape", "parse_scrape_counted"]

Labels = tuple[tuple[str, str], ...]
# (0-based physical line index within the text, raw sample name, labels, value)
_Raw = tuple[int, str, dict[str, str], float]


class ScrapeError(ValueError):
    """Nothing at all could be read from a non-empty scrape (the endpoint is not speaking Prometheus)."""


def parse_scrape(text: str, endpoint: str, ts: datetime | None, line: int = 0) -> Scrape:
    """Parse one scrape. Bad lines are skipped; raises :class:`ScrapeError` only when no sample parsed
    and at least one line failed. ``line`` is the 1-based line where ``text`` starts in a saved file (each
    sample then gets its own line), 0 for a live poll (every sample gets 0)."""
    scrape, errors, parsed, first_error = _parse(text, endpoint, ts, line)
    if parsed == 0 and errors:
        where = " ".join(endpoint.split())  # the message stays one line whatever the caller passed
        raise ScrapeError(f"no Prometheus sample parsed from {where}: {errors} bad line(s); first: {first_error}")
    return scrape


def parse_scrape_counted(text: str, endpoint: str, ts: datetime | None, line: int = 0) -> tuple[Scrape, int]:
    """Like :func:`parse_scrape` but never raises: returns the scrape and the number of unreadable lines
    (duplicate series count as unreadable: the format forbids them)."""
    scrape, errors, _parsed, _first = _parse(text, endpoint, ts, line)
    return scrape, errors


def _parse(text: str, endpoint: str, ts: datetime | None, line: int) -> tuple[Scrape, int, int, str]:
    raws, errors, first_error = _read(text)
    kept: dict[tuple[str, Labels], MetricSample] = {}
    kept_raw: dict[tuple[str, Labels], str] = {}
    for index, raw_name, label_map, value in raws:
        if raw_name.endswith("_created"):
            continue
        name = canonical(raw_name)
        key = (name, tuple(sorted(label_map.items())))
        sample = MetricSample(line + index if line > 0 else 0, ts, name, key[1], value)
        if key not in kept:
            kept[key], kept_raw[key] = sample, raw_name
            continue
        had_current = kept_raw[key] == name
        if raw_name != name and had_current:
            continue  # a deprecated twin of a series already read under its current name: expected
        if raw_name == name and not had_current:
            kept[key], kept_raw[key] = sample, raw_name  # the current spelling wins (vllm-formats.md §8.2)
            continue
        errors += 1  # the same series twice under the same spelling: invalid exposition, first one kept
        first_error = first_error or f"line {index + 1}: duplicate series {raw_name}"
    return Scrape(line, ts, endpoint, tuple(kept.values())), errors, len(raws), first_error


def _read(text: str) -> tuple[list[_Raw], int, str]:
    """All readable samples with their line index, the number of unreadable lines, the first error."""
    lines = text.split("\n")  # the library iterates a StringIO, which splits on "\n" only
    numbered = list(enumerate(lines))
    try:
        return _parse_chunk(numbered), 0, ""
    except Exception:  # the library raises ValueError, IndexError, ...: recover block by block below
        pass
    raws: list[_Raw] = []
    errors = 0
    first_error = ""
    for header, body in _blocks(numbered):
        try:
            raws.extend(_parse_chunk(header + body))
            continue
        except Exception:  # a bad line somewhere in this family: read it line by line
            pass
        try:
            _parse_chunk(header)
        except Exception as exc:
            errors += len(header)
            first_error = first_error or _describe(header[0][0], exc)
            header = []
        for item in body:
            try:
                raws.extend(_parse_chunk([*header, item]))
            except Exception as exc:
                errors += 1
                first_error = first_error or _describe(item[0], exc)
    return raws, errors, first_error


def _parse_chunk(numbered: list[tuple[int, str]]) -> list[_Raw]:
    """Parse some lines with the library; raise if it fails or if samples cannot be matched to lines."""
    sample_lines = [i for i, text in numbered if _is_sample_line(text)]
    if any(len(text.split()) < 2 and "}" not in text for _, text in numbered if _is_sample_line(text)):
        # A bare token has no value: the library would read "NaN" alone as metric "Na" with value NaN.
        raise ValueError("sample line without a value")
    families = text_string_to_metric_families("\n".join(t for _, t in numbered))
    samples = [s for family in families for s in family.samples]
    if len(samples) != len(sample_lines):
        # The library yields one sample per sample line, in order; anything else means we misread it.
        raise ValueError("sample count does not match the sample lines")
    return [(i, s.name, dict(s.labels), float(s.value)) for i, s in zip(sample_lines, samples, strict=True)]


def _blocks(numbered: list[tuple[int, str]]) -> Iterator[tuple[list[tuple[int, str]], list[tuple[int, str]]]]:
    """Split lines into family blocks: a run of comment lines (HELP/TYPE) and the samples after it."""
    header: list[tuple[int, str]] = []
    body: list[tuple[int, str]] = []
    for item in numbered:
        stripped = item[1].strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            if body:
                yield header, body
                header, body = [], []
            header.append(item)
        else:
            body.append(item)
    if header or body:
        yield header, body


def _is_sample_line(text: str) -> bool:
    stripped = text.strip()
    return bool(stripped) and not stripped.startswith("#")


def _describe(index: int, exc: Exception) -> str:
    # One line, bounded: the message may quote the offending text.
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return f"line {index + 1}: {reason[:120]}"
