"""llama.cpp output as it appears inside an Ollama log: raw load output (`print_info:`, `llama_context:`),
the llama.cpp server's JSON lines (≤ v0.1.34) and `LEVEL [func] msg | k=v` lines (v0.1.35–v0.3.14), and
upstream llama-server's unprefixed `slot …`/`srv …` lines (v0.30+).

Every function returns ``None`` when the line is not of its shape, so the caller can try the next one,
and a (possibly empty) list of events when it is.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

from parsers.events import (
    ContextSize,
    ErrorEvent,
    Event,
    Offload,
    PrefillProgress,
    PromptTask,
    SlotRelease,
    Timing,
    Truncation,
)
from parsers.ollama.memory import llamacpp_memory

_SERVER_RE = re.compile(
    r"(?:slot|srv|que|cmn)\s+[^:]+?:\s+(?:id\s+(?P<slot>-?\d+) \| task (?P<task>-?\d+) \| )?(?P<msg>.*)$"
)
_NEW_PROMPT_RE = re.compile(
    r"new prompt, n_ctx_slot = (\d+), n_keep = (\d+), (?:task\.n_tokens|n_prompt_tokens) = (\d+)"
)
_PROGRESS_RE = re.compile(r"prompt processing, n_tokens =\s*(\d+), progress =\s*([0-9.]+), t =\s*([0-9.]+) s")
_TIMING_RE = re.compile(r"^\s*(prompt eval|eval|total) time =\s*([0-9.]+) ms /\s*(\d+) (?:tokens|runs)")
_STOP_RE = re.compile(r"stop processing: n_tokens = (\d+), truncated = (\d+)")
_CTX_RE = re.compile(
    r"(?:llama_new_context_with_model|llama_init_from_model|llama_context):\s+n_ctx(_per_seq|_seq)?\s*=\s*(\d+)"
)
_TRAIN_RE = re.compile(r"(?:print_info|llm_load_print_meta):\s+n_ctx_train\s*=\s*(\d+)")
_OFFLOADED_RE = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
_TEXT_SERVER_RE = re.compile(
    r"(?P<level>INFO|DEBUG|WARN|ERR|ERROR|VERB) \[\s*(?P<func>\w+)\] (?P<msg>.*?)(?: \| (?P<kv>.*))?$"
)
_KV_RE = re.compile(r'(\w+)=("[^"\\]*(?:\\.[^"\\]*)*"|\S*)')
_RAW_SHAPE_RE = re.compile(r"[A-Za-z_][\w.\-]*(?:\s*\[[^\]]*\])?:|\s|\*|[-=]{3}|[A-Z][a-z]+ \d+:|ggml|llama|CUDA|GGML")
_OOM_RE = re.compile(
    r"(?i)out of memory|cudaMalloc failed|hipMalloc failed|ErrorOutOfDeviceMemory|vk_error_out_of_device_memory|"
    r"kIOGPUCommandBufferCallbackErrorOutOfMemory|failed to allocate|unable to allocate \w+ buffer"
)
# Bounded (`.{0,2000}?`): a line of many `GGML_ASSERT(` without `) failed` was scanned to its end from each one.
_CRASH_RE = re.compile(
    r"GGML_ASSERT\(.{0,2000}?\) failed|^panic: |CUDA error|^SIGSEGV|^fatal error: |Segmentation fault")
# Every line _CRASH_RE matches holds one of its literal words, and every _OOM_RE match "memory" or "alloc":
# parse_raw_line() tests those words first (tests/parsers/test_ollama_lines.py checks the claim).


class ServerLineState:
    """llama-server continuation lines (`   eval time = …`) carry no task id: remember the last one."""

    __slots__ = ("last_task",)

    def __init__(self) -> None:
        self.last_task: int | None = None


def parse_server_line(text: str, line: int, ts: datetime | None, state: ServerLineState) -> list[Event] | None:
    """Upstream llama-server `slot …` / `srv …` lines and `print_timing` continuation lines."""
    m = _SERVER_RE.match(text)
    if m is None:
        t = _TIMING_RE.match(text)
        if t is None:
            return None
        return [_timing(t, line, ts, state.last_task)]
    task = int(m.group("task")) if m.group("task") is not None else None
    if task is not None and task >= 0:
        state.last_task = task
    msg = m.group("msg")
    # Each search only where its literal words are (most slot lines carry none of these facts).
    if "new prompt" in msg and (p := _NEW_PROMPT_RE.search(msg)) is not None:
        slot = int(m.group("slot")) if m.group("slot") is not None else None
        return [PromptTask(line, ts, slot, task, int(p.group(1)), int(p.group(2)), int(p.group(3)))]
    if "prompt processing" in msg and (p := _PROGRESS_RE.search(msg)) is not None:
        return [PrefillProgress(line, ts, task, int(p.group(1)), float(p.group(2)), float(p.group(3)))]
    if " time =" in msg and (t := _TIMING_RE.match(msg)) is not None:
        return [_timing(t, line, ts, task)]
    if "stop processing" in msg and (p := _STOP_RE.search(msg)) is not None:
        return [SlotRelease(line, ts, task, int(p.group(1)), p.group(2) != "0")]
    return []


def _timing(m: re.Match[str], line: int, ts: datetime | None, task: int | None) -> Timing:
    kind = {"prompt eval": "prompt", "eval": "eval", "total": "total"}[m.group(1)]
    return Timing(line, ts, kind, float(m.group(2)), int(m.group(3)), task)


def parse_raw_line(text: str, line: int, ts: datetime | None) -> list[Event] | None:
    """Raw llama.cpp / ggml / runner stderr. Recognised output without a fact yields []."""
    # Each regex below runs only when a word it cannot match without is in the line: a model load writes
    # hundreds of these lines, and a search for every pattern at every position was most of their cost.
    if "n_ctx" in text:
        if (m := _CTX_RE.search(text)) is not None:
            kind = "per_slot" if m.group(1) else "total"
            return [ContextSize(line, ts, int(m.group(2)), kind, "llama.cpp")]
        if (m := _TRAIN_RE.search(text)) is not None:
            return [ContextSize(line, ts, int(m.group(1)), "train", "llama.cpp")]
    if "offloaded " in text and (m := _OFFLOADED_RE.search(text)) is not None:
        return [Offload(line, ts, int(m.group(1)), int(m.group(2)))]
    if " size" in text and (found := llamacpp_memory(text, line, ts)) is not None:
        return found
    if text.startswith("llama_print_timings:") and (t := _TIMING_RE.match(text[20:])) is not None:
        return [_timing(t, line, ts, None)]
    low = text.lower()
    if ("memory" in low or "alloc" in low) and _OOM_RE.search(text) is not None:
        return [ErrorEvent(line, ts, "oom", text.strip()[:500])]
    if (
        "GGML_ASSERT(" in text or "panic: " in text or "CUDA error" in text or "SIGSEGV" in text
        or "fatal error: " in text or "Segmentation fault" in text
    ) and _CRASH_RE.search(text) is not None:
        return [ErrorEvent(line, ts, "runner_crash", text.strip()[:500])]
    if "error loading model" in text:
        return [ErrorEvent(line, ts, "load_failed", text.strip()[:500])]
    if _RAW_SHAPE_RE.match(text) is not None:
        return []
    return None


def parse_json_line(text: str, line: int) -> list[Event] | None:
    """llama.cpp server JSON lines (E0–E2 ≤ v0.1.34): `{"function":…,"level":…,"msg":…}`."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: JSON nested ~1,000 deep
        return None
    if not isinstance(obj, dict):
        return None
    msg = obj.get("msg", obj.get("message"))
    if not isinstance(msg, str):
        return None
    stamp = obj.get("timestamp")
    ts = datetime.fromtimestamp(stamp, tz=timezone.utc) if isinstance(stamp, int) and stamp > 0 else None
    fields = {str(k): v for k, v in obj.items()}
    return _server_msg(msg, fields, str(obj.get("level", "")), line, ts)


def parse_text_server_line(text: str, line: int, ts: datetime | None) -> list[Event] | None:
    """llama.cpp server text lines (v0.1.35–v0.3.14): `INFO [update_slots] input truncated | n_ctx=2048 …`."""
    m = _TEXT_SERVER_RE.match(text)
    if m is None:
        return None
    fields: dict[str, object] = {}
    for k, v in _KV_RE.findall(m.group("kv") or ""):
        fields[k] = _json_value(v)
    stamp = fields.get("timestamp")
    if ts is None and isinstance(stamp, int) and stamp > 0:
        ts = datetime.fromtimestamp(stamp, tz=timezone.utc)
    return _server_msg(m.group("msg"), fields, m.group("level"), line, ts)


def _json_value(raw: str) -> object:
    # json.loads costs ~3 us a call; most values are plain integers or plain quoted strings, which it would
    # read the same way (no sign, no leading zero, not long; no escape, no inner quote, no control character).
    if raw.isdigit() and raw.isascii() and len(raw) <= 18 and (raw[0] != "0" or raw == "0"):
        return int(raw)
    if len(raw) >= 2 and raw[0] == '"' and raw[-1] == '"':
        inner = raw[1:-1]
        if "\\" not in inner and '"' not in inner and inner.isprintable():
            return inner
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


def _int(fields: dict[str, object], key: str) -> int | None:
    v = fields.get(key)
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.isascii() and v.isdigit():
        return int(v)
    return None


def _server_msg(msg: str, f: dict[str, object], level: str, line: int, ts: datetime | None) -> list[Event]:
    if msg == "new slot" and (n := _int(f, "n_ctx_slot")) is not None:
        return [ContextSize(line, ts, n, "per_slot", "llama.cpp slot")]
    if msg == "input truncated" and (n := _int(f, "n_ctx")) is not None:
        return [Truncation(line, ts, n, None, _int(f, "n_keep"), None, True, "input_truncated")]
    if msg.startswith("prompt eval time") and (n := _int(f, "n_prompt_tokens_processed")) is not None:
        ms = f.get("t_prompt_processing")
        return [Timing(line, ts, "prompt", float(ms) if isinstance(ms, (int, float)) else 0.0, n, _int(f, "task_id"))]
    if msg.startswith("generation eval time") and (n := _int(f, "n_decoded")) is not None:
        ms = f.get("t_token_generation")
        return [Timing(line, ts, "eval", float(ms) if isinstance(ms, (int, float)) else 0.0, n, _int(f, "task_id"))]
    if msg == "slot released":
        tr = f.get("truncated")
        return [SlotRelease(line, ts, _int(f, "task_id"), _int(f, "n_past"), tr if isinstance(tr, bool) else None)]
    if level in ("ERR", "ERROR"):
        return [ErrorEvent(line, ts, "other", msg[:500])]
    return []
