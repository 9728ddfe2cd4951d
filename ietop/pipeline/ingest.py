"""Wires sources to parsers to the store. Shared by `analyze` (files, as fast as possible) and, later, by
replay and the live dashboard (the same events, from a tailer).

Files are read in streaming chunks; each line is framed, stripped of envelopes and parsed; the events of
several files are merged by time with `heapq.merge`, which holds one pending event per file, so memory
does not grow with the size of the logs.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import chain
from typing import Protocol

from ietop.model.store import Store
from ietop.sources.files import SourceError, read_chunks
from parsers.detect import detect_engine
from parsers.events import Event, Scrape, Unparsed
from parsers.ollama.gofmt import epoch
from parsers.ollama.log import ERAS, OllamaParser
from parsers.text.envelope import strip_envelope, strip_inner
from parsers.text.framing import split_lines, split_texts

DETECT_LINES = 200
FORCED_MIN_LINES = 20
FORCED_UNPARSED = 0.9
"""`--engine X` on a log whose first non-blank lines X's parser leaves unparsed this often (of at least
FORCED_MIN_LINES), while detection names another engine, is refused: see `_check_forced`."""
SUPPORTED = ("ollama", "mlx", "vllm", "proxy")
SCRAPE = "vllm-metrics"
"""A saved `/metrics` scrape: read whole (scrapes are kilobytes) and applied as one event."""
MAX_SCRAPE_BYTES = 64 << 20
_STAMP_RE = re.compile(r"(\d{4})-?(\d{2})-?(\d{2})[T_-]?(\d{2}):?(\d{2}):?(\d{2})(Z)?|(?<!\d)(1\d{9})(?!\d)")


class LineParser(Protocol):
    """What the pipeline needs of an engine parser (parsers.ollama.log.OllamaParser, parsers.mlx.log.MlxParser)."""

    engine: str

    @property
    def version(self) -> str | None: ...
    @property
    def era(self) -> str | None: ...
    def parse(self, line: int, text: str, env_ts: datetime | None = None) -> list[Event]: ...


def make_parser(engine: str, year: int | None = None) -> LineParser:
    if engine == "mlx":
        from parsers.mlx.log import MlxParser

        return MlxParser()
    if engine == "proxy":
        from parsers.api.proxy_log import ProxyLogParser

        return ProxyLogParser()
    if engine == "vllm":
        from parsers.vllm.log import VllmParser

        # vLLM stamps carry no year: take the file's.
        return VllmParser(year=year)
    return OllamaParser()


def _looks_like_scrape(head: list[str]) -> bool:
    first = [line for line in head[:10] if line.strip()]
    return bool(first) and all(
        line.startswith(("# HELP ", "# TYPE ", "# EOF")) or re.match(r"[a-zA-Z_:][\w:]*(\{.*\})? \S+", line)
        for line in first
    ) and any(line.startswith(("# TYPE ", "vllm:")) for line in first)


def _looks_like_proxy_log(head: list[str]) -> bool:
    """`ietop proxy --jsonl` output: JSON objects with the proxy's measurement keys."""
    first = head[0].lstrip()
    return first.startswith("{") and '"method"' in first and '"ttft_s"' in first and '"bytes_down"' in first


def scrape_time(path: str) -> datetime:
    """When a saved scrape was taken: a timestamp in its name (`metrics-20261129T155100Z.txt`,
    `metrics-1795967269.txt`), else the file's modification time."""
    import os

    name = os.path.basename(path)
    m = _STAMP_RE.search(name)
    if m is not None and m.group(8):
        return datetime.fromtimestamp(int(m.group(8)), tz=timezone.utc)
    if m is not None:
        y, mo, d, hh, mm, ss = (int(g) for g in m.groups()[:6])
        try:
            return datetime(y, mo, d, hh, mm, ss, tzinfo=timezone.utc if m.group(7) else None)
        except ValueError:
            pass
    return datetime.fromtimestamp(os.stat(path).st_mtime, tz=timezone.utc)


def _scrape_event(inp: FileInput) -> Iterator[tuple[float, int, int, Event]]:
    from parsers.vllm.prometheus import ScrapeError, parse_scrape

    data = b"".join(read_chunks(inp.path))
    if len(data) > MAX_SCRAPE_BYTES:
        raise FormatError(f"{inp.path}: a {len(data) >> 20} MiB metrics scrape is too large")
    text = data.decode("utf-8", errors="replace")
    ts = scrape_time(inp.path)
    try:
        scrape = parse_scrape(text, inp.path, ts, line=1)
    except ScrapeError as exc:
        raise FormatError(f"{inp.path}: {exc}") from exc
    # A last line without its newline counts, unless it is only NULs: padding, not a line, as the log framing
    # has it (parsers/text/framing.py; found again by fuzz run 6 on a scrape).
    inp.lines = text.count("\n") + bool(text[text.rfind("\n") + 1:].strip("\x00"))
    # Scrapes saved side by side are one endpoint's series (a window needs two of them).
    import os

    endpoint = "file:" + (os.path.dirname(os.path.abspath(inp.path)) or ".")
    yield (epoch(ts), inp.src, 0, Scrape(scrape.line, scrape.ts, endpoint, scrape.samples))


class FormatError(Exception):
    """The file is readable but is not a log ietop can parse (one-line message)."""


@dataclass(slots=True)
class FileInput:
    path: str
    engine: str
    parser: LineParser
    src: int
    lines: int = 0


def sniff(path: str, engine: str | None = None) -> str:
    """The engine of a file: given, or detected from its first lines. Raises FormatError/SourceError."""
    if engine is not None:
        if engine not in SUPPORTED:
            raise FormatError(f"{path}: engine {engine!r} is not supported (supported: {', '.join(SUPPORTED)})")
        # --engine vllm also covers its saved /metrics scrapes, which are not logs.
        if engine == "vllm" and _looks_like_scrape(_head(path)):
            return SCRAPE
        _check_forced(path, engine)
        return engine
    head = _detect_head(path)
    if not head:
        raise FormatError(f"{path}: empty log, nothing to analyze")
    found = _detect(head)
    if found is None:
        raise FormatError(f"{path}: unknown log format (not an Ollama, vLLM or MLX log); pass --engine to force one")
    if found not in SUPPORTED and found != SCRAPE:
        raise FormatError(f"{path}: looks like a {found} log, which analyze does not support")
    return found


def _detect_head(path: str) -> list[str]:
    """The first DETECT_LINES non-blank inner lines, as detection reads them."""
    head: list[str] = []
    for line in split_lines(read_chunks(path, 1 << 16)):
        st = strip_envelope(line.text)
        if st.text:
            head.append(st.text)
        if len(head) >= DETECT_LINES:
            break
    return head


def _detect(head: list[str]) -> str | None:
    if _looks_like_scrape(head):
        return SCRAPE
    if _looks_like_proxy_log(head):
        return "proxy"
    return detect_engine(head)


def _check_forced(path: str, engine: str) -> None:
    """Refuse `--engine` onto another engine's log, before any work. Its parser would leave nearly every line
    unparsed and the report would read like an idle server. Both conditions are needed: a log the user
    forces because detection fails (or mixes other output in) is still read as asked."""
    parser = make_parser(engine, file_year(path))
    total = unparsed = 0
    # Read as file_events reads it (envelopes stripped, their times passed on), so the count is the report's.
    for n, raw in enumerate(chain.from_iterable(split_texts(read_chunks(path, 1 << 16))), 1):
        text, _kind, env_ts = strip_inner(raw)
        if not text.strip():
            continue
        total += 1
        unparsed += any(type(e) is Unparsed for e in parser.parse(n, text, env_ts))
        if total >= DETECT_LINES:
            break
    if total < FORCED_MIN_LINES or unparsed < FORCED_UNPARSED * total:
        return
    found = _detect(_detect_head(path))
    if found is None or found == engine:
        return
    looks = "vllm" if found == SCRAPE else found  # a /metrics scrape is read with --engine vllm
    raise FormatError(f"{path}: --engine {engine} left {unparsed} of the first {total} lines unparsed; "
                      f"the log looks like {looks} (drop --engine, or pass --engine {looks})")


def _head(path: str) -> list[str]:
    head: list[str] = []
    for line in split_lines(read_chunks(path, 1 << 16)):
        if line.text:
            head.append(line.text)
        if len(head) >= 20:
            break
    return head


def file_year(path: str) -> int | None:
    """The year a file was last written (a zone-less, year-less log clock's year), None when it is absent."""
    import os

    try:
        return datetime.fromtimestamp(os.stat(path).st_mtime, tz=timezone.utc).year
    except OSError:
        return None


@dataclass(slots=True)
class Clock:
    """A reader's running clock: the latest time seen and the events numbered so far."""

    last_t: float = float("-inf")
    seq: int = 0


Item = tuple[float, int, int, Event]


def sequenced(src: int, batches: Iterator[list[Event]], clock: Clock) -> Iterator[Item]:
    """(t, src, seq, event) for the events of `batches`, in order. A line without a time takes the last time
    seen before it."""
    last_t, seq = clock.last_t, clock.seq
    try:
        for events in batches:
            for event in events:
                ts = event.ts
                if ts is not None:
                    t = epoch(ts)
                    # Interleaved writers jitter by milliseconds; never let one line reorder the stream.
                    last_t = t if t > last_t else last_t
                seq += 1
                yield (last_t, src, seq, event)
    finally:
        clock.last_t, clock.seq = last_t, seq


def file_events(inp: FileInput, on_read: Callable[[int, int], None] | None = None) -> Iterator[Item]:
    """(t, src, seq, event) for one file, every line through the parser. `on_read(bytes, lines)`, when given,
    is told what each chunk read held (progress)."""
    parser = inp.parser

    def chunks() -> Iterator[bytes]:
        for chunk in read_chunks(inp.path):
            if on_read is not None:
                on_read(len(chunk), chunk.count(b"\n"))
            yield chunk

    def batches() -> Iterator[list[Event]]:
        n = 0
        for raw in chain.from_iterable(split_texts(chunks())):
            n += 1
            text, _kind, env_ts = strip_inner(raw)
            if text:
                yield parser.parse(n, text, env_ts)
        inp.lines = n
        yield flush_events(parser)

    return sequenced(inp.src, batches(), Clock())


def flush_events(parser: LineParser) -> list[Event]:
    """At the end of a file: what the parser still holds (multi-line records such as MLX tracebacks
    complete only there)."""
    flush = getattr(parser, "flush", None)
    return list(flush()) if flush is not None else []


def open_inputs(store: Store, paths: Iterable[str], engine: str | None = None,
                names: Mapping[str, str] | None = None) -> list[FileInput]:
    """Sniff each file (engine and era), register it as a store source, give it a parser.
    Raises SourceError/FormatError: a file that cannot be read is a one-line error before any work.
    `names`: the name to show for a path read under another (a pipe copied to a temporary file)."""
    inputs: list[FileInput] = []
    names = names or {}
    for path in paths:
        # A name that is not UTF-8 (bytes the OS handed over as surrogates) cannot be written to any report:
        # its odd bytes are shown escaped (`bad\xff.log`).
        shown = names.get(path, path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        try:
            found = sniff(path, engine)
        except (FormatError, SourceError) as exc:
            if shown == path:
                raise
            raise type(exc)(str(exc).replace(path, shown).replace(repr(path), shown)) from exc
        src = store.add_source(shown, "vllm" if found == SCRAPE else found)
        inputs.append(FileInput(path, found, make_parser(found, file_year(path)), src))
    return inputs


Stream = Callable[[FileInput], Iterator[tuple[float, int, int, Event]]]
"""One log file's (t, src, seq, event) in file order: file_events, or the dashboard replay's own reading."""


def merged_events(inputs: list[FileInput], stream: Stream = file_events) -> Iterator[tuple[float, int, int, Event]]:
    """The events of all inputs merged by time (`heapq.merge` holds one pending event per file); each log
    is read by `stream`, a metrics scrape by its own reader."""
    streams = [_scrape_event(inp) if inp.engine == SCRAPE else stream(inp) for inp in inputs]
    if len(streams) == 1:
        return streams[0]
    return heapq.merge(*streams, key=lambda x: (x[0], x[1], x[2]))


def run_files(
    store: Store,
    paths: Iterable[str],
    engine: str | None = None,
    since: float | None = None,
    until: float | None = None,
    stream: Stream = file_events,
    names: Mapping[str, str] | None = None,
) -> list[FileInput]:
    """Analyze files into `store`; returns the inputs (with line counts). Raises SourceError/FormatError.
    `stream` reads each log (file_events, or the columnar reader of ietop.pipeline.bulk); `names` as for
    open_inputs."""
    inputs = open_inputs(store, paths, engine, names)
    store.apply_all(
        (src, t if t != float("-inf") else 0.0, event)
        for t, src, _seq, event in merged_events(inputs, stream)
        if (since is None or t >= since) and (until is None or t <= until)
    )
    store.flush()
    for inp in inputs:
        info = store.sources[inp.src]
        info.lines = inp.lines
        era = inp.parser.era
        if inp.engine == SCRAPE:
            info.format = "Prometheus /metrics scrape"
        else:
            info.format = ERAS.get(era, era) if era else f"{inp.engine} (format version not determined)"
        info.version = info.version or inp.parser.version
    return inputs


def parse_time_arg(text: str) -> float:
    """`--since/--until`: ISO-8601; a value without a zone is read like the log's zone-less clocks."""
    try:
        ts = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"invalid time {text!r}: use ISO-8601, e.g. 2025-02-20T16:34:00") from exc
    return epoch(ts)


__all__ = ["FormatError", "SourceError", "epoch", "parse_time_arg", "run_files", "sniff"]






