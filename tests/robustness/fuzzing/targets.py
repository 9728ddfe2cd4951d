"""The parsers, text and api targets (the parsers, framing and API readers on their own), and the glued and
scaling targets that only rerun known defects' reproducers: each a check of one `Input` returning its violations.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from tests.robustness.fuzzing.cases import Input
from tests.robustness.fuzzing.checks import (
    SLOW_LINE_S,
    CaseTimeout,
    Violation,
    exc_detail,
    exc_key,
    physical_lines,
    type_errors,
)
from tests.robustness.fuzzing.mutate import NUL_RUNS
from tests.robustness.fuzzing.seeds import api_seeds

# --------------------------------------------------------------------------------------- parsers target


def make_parser(engine: str) -> Any:
    from parsers.api.proxy_log import ProxyLogParser
    from parsers.mlx.log import MlxParser
    from parsers.ollama.log import OllamaParser
    from parsers.vllm.log import VllmParser

    if engine == "vllm":
        return VllmParser(year=2025)
    if engine == "mlx":
        return MlxParser()
    if engine == "proxy":
        return ProxyLogParser()
    return OllamaParser()


def _parse_all(engine: str, texts: Sequence[str]) -> tuple[list[list[Any]], list[Violation]]:
    """Every line through a fresh parser as the pipeline feeds it; the events per line (the flush last)."""
    from parsers.events import Event
    from parsers.text.envelope import strip_inner

    parser = make_parser(engine)
    per_line: list[list[Any]] = []
    out: list[Violation] = []
    n = 0
    try:
        for n, raw in enumerate(texts, 1):
            t0 = time.perf_counter()
            text, kind, env_ts = strip_inner(raw)
            took = time.perf_counter() - t0
            if took > SLOW_LINE_S:
                out.append(Violation("slow_line", "strip_inner", f"line {n} ({len(raw)} chars) took {took:.1f} s"))
            if not isinstance(text, str) or not isinstance(kind, str) or not (env_ts is None or isinstance(env_ts, datetime)):
                out.append(Violation("parser_type", "strip_inner", f"line {n}: {(text, kind, env_ts)!r:.200}"))
            if not text:
                per_line.append([])
                continue
            t0 = time.perf_counter()
            events = parser.parse(n, text, env_ts)
            took = time.perf_counter() - t0
            if took > SLOW_LINE_S:
                out.append(Violation("slow_line", engine, f"line {n} ({len(raw)} chars) took {took:.1f} s"))
            per_line.append(events)
        flush = getattr(parser, "flush", None)
        per_line.append(flush() if flush is not None else [])
    except CaseTimeout:
        raise
    except Exception as exc:
        return per_line, [Violation("parser_exception", f"{engine}:{exc_key(exc)}", f"line {n}: {exc_detail(exc)}")]
    for i, events in enumerate(per_line, 1):
        if not isinstance(events, list):
            out.append(Violation("parser_type", f"{engine}: parse() not a list", f"line {i}: {events!r:.200}"))
            continue
        for e in events:
            if not isinstance(e, Event):
                out.append(Violation("parser_type", f"{engine}: not an Event", f"line {i}: {e!r:.200}"))
                continue
            if not isinstance(e.line, int) or isinstance(e.line, bool) or not 0 <= e.line <= i:
                out.append(Violation("parser_type", f"{engine}: {type(e).__name__}.line outside [0, n]",
                                     f"line {i}: {e!r:.200}"))
            for err in type_errors(e)[:1]:
                out.append(Violation("parser_type", f"{engine}: {err.split('=')[0]}", f"line {i}: {err}"))
    return per_line, out


def check_parsers(inp: Input) -> list[Violation]:
    """One engine's parser over the case's lines; `detect_engine` over them; and the NUL-padding metamorphic
    relation on line `arg`: glued NULs (what copytruncate leaves) must not change what that line says."""
    from parsers.detect import detect_engine
    from parsers.events import Unparsed
    from parsers.text.framing import split_texts

    engine = inp.option or "ollama"
    data = inp.files[0]
    texts = [t for chunk in split_texts([data]) for t in chunk]
    per_line, out = _parse_all(engine, texts)
    try:
        found = detect_engine(texts[:200])
        if found not in (None, "ollama", "vllm", "mlx"):
            out.append(Violation("parser_type", "detect_engine", repr(found)))
    except CaseTimeout:
        raise
    except Exception as exc:
        out.append(Violation("parser_exception", f"detect:{exc_key(exc)}", exc_detail(exc)))
    if texts and not out:
        k = inp.arg % len(texts)
        said = per_line[k] if k < len(per_line) else []
        if said and not any(isinstance(e, Unparsed) for e in said):
            # Padded in the bytes, before the framing: where a fix strips the padding is its own choice.
            raw_lines = data.split(b"\n")
            raw_lines[k] = b"\x00" * NUL_RUNS[(inp.arg >> 8) % len(NUL_RUNS)] + raw_lines[k]
            padded = [t for chunk in split_texts([b"\n".join(raw_lines)]) for t in chunk]
            again, _ = _parse_all(engine, padded)
            if k < len(again) and repr(again[k]) != repr(said):
                out.append(Violation("nul_padding_changes_events", engine,
                                     f"line {k + 1}: {[type(e).__name__ for e in said]} -> "
                                     f"{[type(e).__name__ for e in again[k]]}"))
    return out


# ------------------------------------------------------------------------------------------ text target


def _chunks(data: bytes, arg: int) -> list[bytes]:
    rng = random.Random(arg)
    out, i = [], 0
    while i < len(data):
        n = rng.choice((1, 2, 3, 7, 64, 4096, 1 << 16))
        out.append(data[i: i + n])
        i += n
    return out


def check_text(inp: Input) -> list[Violation]:
    """Framing under any chunking and its columnar twin; envelopes; JSON records; detection; run starts."""
    from ietop.pipeline.bulk.lines import window_lines, windows
    from parsers.detect import detect_engine
    from parsers.text.envelope import strip_envelope
    from parsers.text.framing import split_lines, split_texts
    from parsers.text.journal_json import journal_record
    from parsers.text.runs import last_run_start
    from parsers.vllm.jsonlog import json_record

    data = inp.files[0]
    out: list[Violation] = []
    step = "split_lines"
    try:
        whole = list(split_lines([data]))
        chunked = list(split_lines(_chunks(data, inp.arg)))
        if whole != chunked:
            i = next((i for i, (a, b) in enumerate(zip(whole, chunked)) if a != b), min(len(whole), len(chunked)))
            out.append(Violation("framing", "split_lines depends on chunking",
                                 f"line {i + 1}: {whole[i:i + 1]!r:.150} vs {chunked[i:i + 1]!r:.150}"))
        if len(whole) != physical_lines(data):
            out.append(Violation("framing", "split_lines count", f"{len(whole)} vs {physical_lines(data)}"))
        texts = [t for chunk in split_texts(_chunks(data, inp.arg + 1)) for t in chunk]
        if texts != [ln.text for ln in whole]:
            out.append(Violation("framing", "split_texts differs from split_lines", ""))
        step = "window_lines"
        columnar = [t for w in windows(_chunks(data, inp.arg), 1 << 12) for t in window_lines(w).to_list()]
        if columnar != [ln.text for ln in whole]:
            i = next((i for i, (a, b) in enumerate(zip(columnar, whole)) if a != b.text),
                     min(len(columnar), len(whole)))
            out.append(Violation("framing", "window_lines differs from LineSplitter",
                                 f"line {i + 1}: {columnar[i:i + 1]!r:.150} vs "
                                 f"{[ln.text for ln in whole[i:i + 1]]!r:.150}"))
        step = "strip_envelope"
        stripped = []
        for ln in whole:
            t0 = time.perf_counter()
            st = strip_envelope(ln.text)
            took = time.perf_counter() - t0
            if took > SLOW_LINE_S:
                out.append(Violation("slow_line", "strip_inner", f"{len(ln.text)} chars took {took:.1f} s"))
            stripped.append(st.text)
            if not isinstance(st.text, str) or "\n" in st.text or not (st.ts is None or isinstance(st.ts, datetime)):
                out.append(Violation("parser_type", "strip_envelope", repr(st)[:200]))
                break
        step = "journal_record"
        for ln in whole:
            rec = journal_record(ln.text)
            if rec is not None and not (isinstance(rec, tuple) and len(rec) == 2 and isinstance(rec[1], str)
                                        and (rec[0] is None or isinstance(rec[0], datetime))):
                out.append(Violation("parser_type", "journal_record", repr(rec)[:200]))
                break
        step = "json_record"
        for ln in whole:
            jr = json_record(ln.text)
            if jr is not None and not (isinstance(jr, tuple) and isinstance(jr[0], list)
                                       and all(isinstance(s, str) for s in jr[0])
                                       and (jr[1] is None or isinstance(jr[1], datetime))):
                out.append(Violation("parser_type", "json_record", repr(jr)[:200]))
                break
        step = "detect_engine"
        if detect_engine(stripped[:200]) not in (None, "ollama", "vllm", "mlx"):
            out.append(Violation("parser_type", "detect_engine", ""))
        step = "last_run_start"
        for engine in ("ollama", "vllm", "mlx"):
            at = last_run_start(engine, data)
            if at is not None and not (0 <= at <= len(data) and (at == 0 or data[at - 1:at] == b"\n")):
                out.append(Violation("parser_type", "last_run_start", f"{engine}: {at}"))
    except CaseTimeout:
        raise
    except Exception as exc:
        out.append(Violation("parser_exception", f"{step}:{exc_key(exc)}", exc_detail(exc)))
    return out


# ------------------------------------------------------------------------------------------- api target


def check_api(inp: Input) -> list[Violation]:
    """One API entry point on a mutated body; `inp.option` is `api` or `stream:<seed index>`."""
    from parsers.api import engine_api
    from parsers.api.events import OllamaResidency
    from parsers.api.proxy_log import ProxyLogParser
    from parsers.api.stream import StreamMeter
    from parsers.events import EngineStatus, ModelList, ProxyRequest, Scrape
    from parsers.vllm.prometheus import ScrapeError, parse_scrape, parse_scrape_counted

    body = inp.files[0]
    api, _, index = inp.option.partition(":")
    ts = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
    status = (200, 200, 200, 503, 404, None)[inp.arg % 6]
    results: list[object] = []
    try:
        if api == "ollama_ps":
            st, res = engine_api.ollama_ps("http://x", ts, status, body, None)
            results += [st] + ([res] if res is not None else [])
            ok = isinstance(st, EngineStatus) and (res is None or isinstance(res, OllamaResidency))
        elif api == "ollama_version":
            st = engine_api.ollama_version("http://x", ts, status, body, None)
            results.append(st)
            ok = isinstance(st, EngineStatus)
        elif api == "openai_models":
            ml = engine_api.openai_models("vllm", "http://x", ts, status, body, None)
            results.append(ml)
            ok = isinstance(ml, ModelList)
        elif api == "mlx_health":
            st = engine_api.mlx_health("http://x", ts, status, body, None)
            results.append(st)
            ok = isinstance(st, EngineStatus)
        elif api == "proxy_log":
            parser = ProxyLogParser()
            events = [e for n, line in enumerate(body.decode("utf-8", "replace").split("\n"), 1)
                      for e in parser.parse(n, line)]
            results += events
            ok = True
        elif api == "scrape":
            text = body.decode("utf-8", "replace")
            try:
                scrape = parse_scrape(text, "file:x", ts, line=1)
                results.append(scrape)
                ok = isinstance(scrape, Scrape)
            except ScrapeError:
                ok = True  # documented: nothing at all could be read
            counted, bad = parse_scrape_counted(text, "file:x", ts, line=1)
            results.append(counted)
            ok = ok and isinstance(counted, Scrape) and isinstance(bad, int) and bad >= 0
        else:  # stream
            seed = api_seeds()[int(index or 0) % len(api_seeds())]
            meter = StreamMeter(seed.path or "/api/chat", seed.request, seed.content_type, 0.0)
            t = 0.0
            for chunk in _chunks(body, inp.arg):
                t += 0.01
                meter.feed(t, chunk)
            req = meter.finish(t + 0.01, status, None)
            results.append(req)
            ok = isinstance(req, ProxyRequest)
            for name in ("ttfb_s", "ttft_s", "itl_s", "e2e_s", "load_s"):
                value = getattr(req, name)
                if value is not None and not math.isfinite(value):
                    results.append(f"{name}={value}")
                    ok = False
    except CaseTimeout:
        raise
    except Exception as exc:
        return [Violation("parser_exception", f"{api}:{exc_key(exc)}", exc_detail(exc))]
    out = [] if ok else [Violation("parser_type", f"{api}: return value", repr(results)[:300])]
    for r in results:
        for err in type_errors(r)[:1]:
            out.append(Violation("parser_type", f"{api}: {err.split('=')[0]}", err))
    return out


# ------------------------------------------------------------------------------ reproducer-only targets


_RECORD_HEAD = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?:\d{4}-)?\d{2}-\d{2} \d{2}:\d{2}:\d{2}")


def check_glued(inp: Input) -> list[Violation]:
    """vLLM lines that hold several records (a lost newline, fixture 012): each record is read, in bounded time.
    Not drawn by the fuzzing (its slow_line and memory checks see the symptom): N7's regression check."""
    from parsers.events import Unparsed

    parser = make_parser("vllm")
    out: list[Violation] = []
    for n, text in enumerate(inp.files[0].decode("utf-8", "replace").split("\n"), 1):
        t0 = time.perf_counter()
        events = parser.parse(n, text)
        took = time.perf_counter() - t0
        records = len(_RECORD_HEAD.findall(text))
        if took > SLOW_LINE_S:
            out.append(Violation("slow_line", "vllm", f"line {n} ({len(text)} chars) took {took:.1f} s"))
        if records >= 2 and events and all(isinstance(e, Unparsed) for e in events):
            out.append(Violation("glued_records_lost", "vllm", f"line {n}: {records} records read as one Unparsed"))
    return out


SCALING_UNITS = 1500


def check_scaling(inp: Input) -> list[Violation]:
    """`strip_inner` on a line of SCALING_UNITS copies of the case's first line, then of four times as many: a
    linear reader takes about 4x as long; over 8x (and over 0.3 s) is superlinear. N14's regression check (a
    ratio, not a deadline: it holds on a fast machine and on a loaded one)."""
    from parsers.text.envelope import strip_inner

    unit = inp.files[0].split(b"\n")[0].decode("utf-8", "replace")
    times = []
    for n in (SCALING_UNITS, 4 * SCALING_UNITS):
        t0 = time.perf_counter()
        strip_inner(unit * n)
        times.append(time.perf_counter() - t0)
    if times[1] > 0.3 and times[1] > 8 * times[0]:
        return [Violation("superlinear", "strip_inner", f"{len(unit) * SCALING_UNITS} chars: {times[0]:.2f} s, "
                          f"4x as many: {times[1]:.2f} s")]
    return []
