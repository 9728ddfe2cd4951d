"""Pieces of the vLLM log parser that keep no per-log state: one message (the text after a record's
`[file.py:N] `, or a bare line) to events, the uvicorn access line, the noise vLLM's processes print
outside its logging. `parsers.vllm.log` owns the envelope, the clock and the multi-line state;
`parsers.vllm.errors` the error texts. Formats: reference/vllm-formats.md §1-§6.

Each `*_events` function returns None when the message is not its shape, so the caller can tell
"recognised, nothing to report" ([]) from "not this" (None).
"""

from __future__ import annotations

import ast
import re
from datetime import datetime

from parsers.events import EngineStats, ErrorEvent, Event, HttpAccess, Preemption, PromptText, RequestLogged
from parsers.vllm.errors import clip

_NUM = r"-?\d+(?:\.\d+)?"

# ---- periodic stats (§3) -------------------------------------------------------------------------------

_V1_HEAD_RE = re.compile(r"(?:Engine (\d+)|(\d+) Engines Aggregated): (?=Avg prompt throughput: )")
_V0_PREFIX_RATE_RE = re.compile(rf"Prefix cache hit rate: GPU: ({_NUM})%, CPU: ({_NUM})%\.?")
_SNAKE_RE = re.compile(r"[^0-9a-z]+")


def snake(key: str) -> str:
    return _SNAKE_RE.sub("_", key.lower()).strip("_")


def _value(text: str) -> tuple[float, str] | None:
    """`124.9 tokens/s` → (124.9, "tokens/s"); `15.3%` → (0.153, "%"); None when not a number."""
    text = text.strip()
    try:
        if text.endswith("%"):
            # The log prints 1-2 decimals: rounding keeps 82.1% == 0.821 exactly.
            return round(float(text[:-1]) / 100, 6), "%"
        number, _, unit = text.partition(" ")
        return float(number.replace(",", "")), unit.strip()
    except ValueError:
        return None


# Segment keys (lower-cased) of the fields EngineStats names; V0 called the queue Pending.
_FIELDS = {"avg prompt throughput": "prompt_tps", "avg generation throughput": "gen_tps", "running": "running",
           "waiting": "waiting", "pending": "waiting", "swapped": "swapped", "prefix cache hit rate": "prefix_hit_rate"}


def stats_event(msg: str, line: int, ts: datetime | None) -> tuple[EngineStats, bool] | None:
    """V1 `Engine 000: Avg prompt throughput: …` or V0 `Avg prompt throughput: …` → (stats, is_v1).

    Parsed as `Key: value` segments, never by position: the segments and their order change between
    versions (optional Deferred, KV fetch, Preemptions, Corrupted, External/MM hit rates)."""
    engine: str | None = None
    aggregated: float | None = None
    if msg.startswith("Avg prompt throughput: "):
        body = msg
    else:
        head = _V1_HEAD_RE.match(msg)
        if head is None:
            return None
        if head.group(1) is not None:
            engine = str(int(head.group(1)))  # the DP rank, as `/metrics` labels it (engine="0")
        else:
            engine, aggregated = "all", float(head.group(2))
        body = msg[head.end():]
    body = body.rstrip()
    if body.endswith("."):
        body = body[:-1]  # V0 from ~0.5 ends the line with `%.`
    segments: list[list[str]] = []
    for part in body.split(", "):
        key, sep, value = part.partition(": ")
        if sep:
            segments.append([key, value])
        elif segments:
            # `KV fetch: a waiting to start, b in progress, c completed waiting` has commas in its value.
            segments[-1].append(part)
    fields: dict[str, float] = {}
    extra: dict[str, float] = {}
    if aggregated is not None:
        extra["engines_aggregated"] = aggregated
    for key, *values in segments:
        low = key.lower()
        if len(values) > 1:
            # A value of several `N words` parts: one extra per part, named after its words.
            for piece in values:
                parsed = _value(piece)
                if parsed is not None:
                    extra[snake(f"{key} {parsed[1]}")] = parsed[0]
            continue
        parsed = _value(values[0])
        if parsed is None:
            continue
        number = parsed[0]
        name = _FIELDS.get(low)
        if name is not None:
            fields[name] = number
        elif low.endswith("kv cache usage"):
            # The first is the serving device's (GPU, or CPU/XPU/… in V1); V0's second one is the CPU swap
            # space.
            if "kv_usage" in fields:
                extra[snake(key.rsplit(" ", 3)[0]) + "_kv_usage"] = number
            else:
                fields["kv_usage"] = number
        else:
            extra[snake(key)] = number
    running, waiting, swapped = (int(fields[n]) if n in fields else None for n in ("running", "waiting", "swapped"))
    stats = EngineStats(line, ts, engine, fields.get("prompt_tps"), fields.get("gen_tps"), running, waiting,
                        swapped, fields.get("kv_usage"), fields.get("prefix_hit_rate"), tuple(extra.items()))
    return stats, engine is not None


def v0_prefix_rate_event(msg: str, line: int, ts: datetime | None) -> EngineStats | None:
    """V0's separate `Prefix cache hit rate: GPU: a%, CPU: b%` line (prefix caching on)."""
    m = _V0_PREFIX_RATE_RE.fullmatch(msg.rstrip())
    if m is None:
        return None
    return EngineStats(line, ts, None, None, None, None, None, None, None, round(float(m.group(1)) / 100, 6),
                       (("cpu_prefix_hit_rate", round(float(m.group(2)) / 100, 6)),))


# ---- request logging (§4) -------------------------------------------------------------------------------

_RECEIVED_RE = re.compile(r"Received request (\S+?): ")
_DETAILS_RE = re.compile(r"Request (\S+?) details: ")
_ADDED_RE = re.compile(r"Added request (\S+?)\.?")
_ABORTED_RE = re.compile(r"Aborted request(?:\(s\)|s)? (\S+?)\.?")
_JSON_BODY_RE = re.compile(r"Request (\S+) JSON body: ")
# `model_dump_json` writes keys without spaces; a quote inside a string value is escaped, so this is the key.
_STREAM_RE = re.compile(r'"stream":(true|false)[,}]')
_ENDED_RE = re.compile(r"Request (\S+?) (aborted|failed)\b")
_FINISHED_RE = re.compile(r"Finished request (\S+?)\.?")
_GENERATED_RE = re.compile(r"Generated response (\S+?)( \(streaming (?:delta|complete)\))?(?: details)?: ")
_MAX_TOKENS_RE = re.compile(r"\bmax_tokens=(\d+)")
_TOKEN_IDS_RE = re.compile(r"prompt_token_ids: \[([^\]]*)\]")
# The engine-side id appends `-<8 hex>` to the API id (~0.11+): strip it so `added` and `received` agree,
# but only when what remains still looks like an API id (ends in a completion index or a long hex/uuid run).
_ENGINE_SUFFIX_RE = re.compile(r"(.+-(?:\d+|[0-9a-f]{12,}))-[0-9a-f]{8}")


def _unrepr(text: str) -> str:
    """The prompt as Python printed it (`'…'` or `"…"`); raw when cut short or not a literal."""
    text = text.strip()
    if len(text) >= 2 and text[0] in "'\"" and text[-1] == text[0]:
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return text[1:-1]
        return value if isinstance(value, str) else str(value)
    return text[1:] if text[:1] in ("'", '"') else text


def _token_count(text: str) -> int | None:
    m = _TOKEN_IDS_RE.search(text)
    if m is None:
        return None
    ids = m.group(1).strip()
    return ids.count(",") + 1 if ids else 0


def _prompt(rest: str, end_marker: str) -> tuple[str | None, str]:
    """Split `prompt: '…'<end_marker>…` into (the prompt as printed, the part after it); `_unrepr` reads it."""
    if not rest.startswith("prompt: "):
        return None, rest
    # rfind: the prompt is free text and may itself contain the marker; what follows it does not.
    cut = rest.rfind(end_marker)
    if cut < 0:
        return rest[8:], ""  # the line was cut inside the prompt
    return rest[8:cut], rest[cut:]


def request_events(msg: str, line: int, ts: datetime | None) -> list[Event] | None:
    """`Received request`, `Added request`, DEBUG `Request … details`, `Aborted request`, output logging.
    Prompt text goes into `PromptText` only; generated text is never kept."""
    first = msg[:1]
    if first == "R":
        if (m := _RECEIVED_RE.match(msg)) is not None:
            rest = msg[m.end():]
            # The engine's own wording (vLLM before the API server's request logger) says `sampling_params:`;
            # the last `params: ` is the marker after the prompt (a SamplingParams repr has no such text).
            at = rest.rfind("params: ")
            late = at >= 9 and rest[at - 9:at] == "sampling_"
            prompt, params = _prompt(rest, ", sampling_params: " if late else ", params: ")
            mt = _MAX_TOKENS_RE.search(params)
            events: list[Event] = [RequestLogged(line, ts, m.group(1), "received", _token_count(params),
                                                 int(mt.group(1)) if mt else None, late=late)]
            if prompt is not None:
                events.append(PromptText(line, ts, prompt, _unrepr))
            return events
        if (m := _DETAILS_RE.match(msg)) is not None:
            prompt, rest = _prompt(msg[m.end():], ", prompt_token_ids: ")
            events = [RequestLogged(line, ts, m.group(1), "details", _token_count(rest))]
            if prompt is not None:
                events.append(PromptText(line, ts, prompt, _unrepr))
            return events
        if (m := _JSON_BODY_RE.match(msg)) is not None:
            body = msg[m.end():]
            # Only the keys the client set are dumped: no `stream` key in a whole body is the default, False.
            sm = _STREAM_RE.search(body)
            stream = sm.group(1) == "true" if sm is not None else False if body.rstrip().endswith("}") else None
            return [RequestLogged(line, ts, m.group(1), "body", stream=stream), PromptText(line, ts, body)]
        if (m := _ENDED_RE.match(msg)) is not None:
            return [RequestLogged(line, ts, m.group(1), m.group(2))]
    elif first == "A":
        if (m := _ADDED_RE.fullmatch(msg.rstrip())) is not None:
            rid = m.group(1)
            suffix = _ENGINE_SUFFIX_RE.fullmatch(rid)
            return [RequestLogged(line, ts, suffix.group(1) if suffix else rid, "added")]
        if (m := _ABORTED_RE.fullmatch(msg.rstrip())) is not None:
            return [ErrorEvent(line, ts, "client_abort", clip(f"aborted request {m.group(1)}"))]
    elif first == "G" and msg.startswith("Generated response "):
        # --enable-log-outputs: the generated text is not ours to keep; the id and the stream wording are.
        if (m := _GENERATED_RE.match(msg)) is None:
            return []
        return [RequestLogged(line, ts, m.group(1), "output", stream=m.group(2) is not None)]
    elif first == "F" and (m := _FINISHED_RE.fullmatch(msg.rstrip())) is not None:
        return [RequestLogged(line, ts, m.group(1), "finished")]  # V0, with request logging on
    return None


# ---- preemption (§5) --------------------------------------------------------------------------------------

_PREEMPT_RE = re.compile(r"(?:Sequence group|[Rr]equest) (\S+) is preempted (?:by|in) (?:PreemptionMode\.)?(\w+) mode"
                         r"(?:.*?total_num_cumulative_preemption=(\d+))?")


def preemption_event(msg: str, line: int, ts: datetime | None) -> Preemption | None:
    m = _PREEMPT_RE.match(msg)
    if m is None:
        return None
    return Preemption(line, ts, m.group(1), m.group(2).upper(), int(m.group(3)) if m.group(3) else None)


# ---- uvicorn (§7) ------------------------------------------------------------------------------------------

UVICORN_RE = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL|TRACE): +")
# The client is absent where uvicorn has none to show (`INFO:      - "GET /health …"`: vLLM on --uds).
_ACCESS_RE = re.compile(r'(?:(\S+) )?- "([A-Z]+) (\S+) HTTP/[\d.]+" (\d{3})(?: .*)?')
_UVICORN_LISTEN_RE = re.compile(r"Uvicorn running on (\S+)")


def access_event(rest: str, line: int, ts: datetime | None) -> HttpAccess | None:
    """`127.0.0.1:39830 - "POST /v1/chat/completions HTTP/1.1" 200 OK` (no time, no latency)."""
    m = _ACCESS_RE.fullmatch(rest)
    if m is None:
        return None
    client = m.group(1) or ""
    host, sep, port = client.rpartition(":")
    if sep and port.isascii() and port.isdigit():
        client = host
    return HttpAccess(line, ts, int(m.group(4)), None, "", client or None, m.group(2), m.group(3))


def uvicorn_listen(rest: str) -> str | None:
    m = _UVICORN_LISTEN_RE.match(rest)
    return m.group(1) if m is not None else None


# ---- noise printed outside logging (§1) ---------------------------------------------------------------

# The bar is bounded: `.*` scanned to the end of the line and back from every `%|`, and tqdm's carriage returns
# make one line of thousands of bars (a 1 MB line took minutes).
_TQDM_RE = re.compile(r"\d{1,3}%(?: Completed)? ?\|.{0,400}?\d{1,12}/\d{1,12} \[")
_PY_WARNING_RE = re.compile(r"\S+\.py:\d+: \w*Warning: ")
_C10_RE = re.compile(r"\[([WIEF])[^\]]*\.(?:cpp|cc|h):\d+\] ")
_STRAY_PREFIXES = (
    "Triton is installed", "Triton not installed", "nanobind: ", " - leaked ", " - ... skipped", "See https://nanobind",
    "WARNING: All log messages before absl::InitializeLog()",
)


def noise_kind(text: str) -> str | None:
    """"warning" (a Python warning: its source line follows, indented), "c10-error", "noise", or None."""
    if text.startswith(_STRAY_PREFIXES):
        return "noise"
    if _PY_WARNING_RE.match(text) is not None:
        return "warning"
    if text[:1] == "[" and (m := _C10_RE.match(text)) is not None:
        return "c10-error" if m.group(1) in "EF" else "noise"
    if "%" in text and _TQDM_RE.search(text) is not None:
        return "noise"
    return None
