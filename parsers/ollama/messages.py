"""The vocabulary of Ollama's slog lines: `msg` text → events (reference/ollama-formats.md §3–§7).

Attributes are tokenized only for messages that carry a fact, so the common case (a message ietop does
not need) costs one dict lookup and a few `startswith` calls.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from datetime import datetime

from parsers.events import (
    CacheSlot,
    ContextSize,
    DefaultContext,
    ErrorEvent,
    Event,
    Eviction,
    GpuInfo,
    GpuMemory,
    IdleTimer,
    LoadDecision,
    LoadDone,
    LoadProgress,
    LoadRequest,
    LoadStart,
    Offload,
    PromptText,
    RequestArrival,
    RunnersLoaded,
    ServerConfig,
    Truncation,
    UnloadStep,
)
from parsers.ollama.gofmt import parse_attrs, parse_go_duration
from parsers.ollama.memory import DEVICE_PARTS, device_line, offload_memory
from parsers.ollama.memory import human_bytes as human_bytes  # its home before memory.py; ietop.model reads it here

_SHELL_SPACE_RE = re.compile(r"[ \t\r\n]+")
_ENV_RE = re.compile(r'env="map\[(.*)\]"')
_ENV_PAIR_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):(\[[^\]]*\]|\S*)")
_LOADREQ_RE = re.compile(r"\{Operation:(\w+)")
_LOADREQ_FIELD_RE = re.compile(r"\b(Parallel|BatchSize|KvSize|KvCacheType):(\S*)")
_STARTED_RE = re.compile(r"(?:llama runner|llama-server) started in ([0-9.]+) seconds")
_OFFLOADED_RE = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
_PROGRESS_RE = re.compile(r"model load progress ([0-9.]+)")

Handler = Callable[[str, str, str, int, "datetime | None"], "list[Event]"]


def env_map(text: str) -> tuple[tuple[str, str], ...] | None:
    """`env="map[K:V K2:[a b]]"` → ((K, V), (K2, [a b])); None when absent."""
    m = _ENV_RE.search(text)
    if m is None:
        return None
    return tuple((k, v) for k, v in _ENV_PAIR_RE.findall(m.group(1)))


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _model(a: Mapping[str, str]) -> str | None:
    """The model a scheduler line is about: a name where DEBUG gives one, else the blob path."""
    return a.get("runner.name") or a.get("model") or a.get("modelPath") or a.get("runner.model") or None


def _server_config(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    env = env_map(attrs)
    return [ServerConfig(line, ts, env)] if env is not None else []


def _gpu(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    a = parse_attrs(attrs)
    name = a.get("description") or a.get("name")
    return [GpuInfo(line, ts, a.get("id", "?"), a.get("library", "?"), name, a.get("total"), a.get("available"))]


def _vram_ctx(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    a = parse_attrs(attrs)
    ctx = _int(a.get("default_num_ctx"))
    return [DefaultContext(line, ts, ctx, a.get("total_vram"))] if ctx is not None else []


def _fit(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    a = parse_attrs(attrs)
    required = a.get("required") or a.get("predicted")
    return [LoadDecision(line, ts, a.get("model"), _int(a.get("parallel")), required, a.get("available"))]


def _updated_vram(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    a = parse_attrs(attrs)
    decision = LoadDecision(line, ts, None, None, None, a.get("available"), co_resident=True)
    device = a.get("gpu")
    if device is None:
        return [decision]
    return [decision, GpuMemory(line, ts, device, a.get("total"), None, a.get("available"))]


def _gpu_memory(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    a = parse_attrs(attrs)
    device = a.get("id")
    return [GpuMemory(line, ts, device, None, a.get("free"), a.get("available"))] if device is not None else []


def _evict_for_load(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    # The victim is not named at INFO; `predicted_num_ctx` on these lines belongs to the incoming model.
    return [Eviction(line, ts, None, "evicted")]


def _victim(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    a = parse_attrs(attrs)
    return [Eviction(line, ts, _model(a), "evicted", _int(a.get("runner.num_ctx")), a.get("runner.model"),
                     human_bytes(a.get("runner.size")))]


def _expire(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    a = parse_attrs(attrs)
    return [UnloadStep(line, ts, "expire", _model(a), None, _int(a.get("runner.num_ctx")))]


def _unload_step(stage: str) -> Handler:
    def handler(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
        a = parse_attrs(attrs)
        return [UnloadStep(line, ts, stage, _model(a), None, _int(a.get("runner.num_ctx")))]

    return handler


def _vram_wait(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    a = parse_attrs(attrs)
    secs = a.get("seconds")
    seconds = float(secs) if secs else None
    return [UnloadStep(line, ts, "vram_wait", _model(a) or a.get("runner"), seconds)]


def _idle(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    a = parse_attrs(attrs)
    dur = a.get("duration")
    if "zero duration" in msg and "non-zero" not in msg:
        return [
            IdleTimer(line, ts, "0s", 0.0, _model(a), _int(a.get("runner.num_ctx"))),
            UnloadStep(line, ts, "expire", _model(a)),
        ]
    blob = a.get("runner.model") if a.get("runner.name") else None
    return [IdleTimer(line, ts, dur, parse_go_duration(dur) if dur else None, _model(a), _int(a.get("runner.num_ctx")),
                      blob, human_bytes(a.get("runner.size")), human_bytes(a.get("runner.vram")))]


def _start(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    a = parse_attrs(attrs)
    cmd = a.get("cmd", "")
    if '"' in cmd or "'" in cmd:
        try:
            argv = shlex.split(cmd, posix=False)
        except ValueError:
            argv = cmd.split()
    else:
        # What shlex gives a command line without quotes (its whitespace, no comments in split()), at a
        # hundredth of its cost: shlex reads one character at a time in Python.
        stripped = cmd.strip(" \t\r\n")
        argv = _SHELL_SPACE_RE.split(stripped) if stripped else []
    flags: dict[str, str] = {}
    for i, tok in enumerate(argv[:-1]):
        if tok.startswith("-"):
            flags[tok] = argv[i + 1]
    runner = {"starting llama-server": "llama-server", "starting runner": "runner"}.get(msg, "llama server")
    if runner == "llama server" and ("runner" in argv[1:2] or "--ollama-engine" in argv):
        runner = "go runner"
    ctx = _int(flags.get("--ctx-size") or flags.get("-c"))
    par = _int(flags.get("--parallel") or flags.get("-np"))
    ngl = _int(flags.get("--n-gpu-layers") or flags.get("-ngl"))
    return [LoadStart(line, ts, flags.get("--model") or flags.get("-m"), runner, ctx, par, ngl)]


def _cgo_start(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    return [LoadStart(line, ts, None, "cgo")]


def _mlx_start(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    return [LoadStart(line, ts, parse_attrs(attrs).get("model"), "mlx runner")]


def _load_request(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    a = parse_attrs(attrs)
    req = a.get("request", "")
    m = _LOADREQ_RE.match(req)
    if m is None:
        return []
    f = dict(_LOADREQ_FIELD_RE.findall(req))
    return [LoadRequest(line, ts, m.group(1), _int(f.get("Parallel")), _int(f.get("BatchSize")),
                        _int(f.get("KvSize")), f.get("KvCacheType") or None)]


def _offload(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    a = parse_attrs(attrs)
    done = _int(a.get("layers.offload") or a.get("layers.real"))
    total = _int(a.get("layers.model"))
    return [Offload(line, ts, done, total), *offload_memory(msg, a, line, ts)]


def _loaded(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    n = _int(parse_attrs(attrs).get("count"))
    return [RunnersLoaded(line, ts, n)] if n is not None else []


def _waiting(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    return [LoadProgress(line, ts, None, parse_attrs(attrs).get("status"))]


def _truncating(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    a = parse_attrs(attrs)
    limit = _int(a.get("limit"))
    if limit is None:
        return []
    return [Truncation(line, ts, limit, _int(a.get("prompt")), _int(a.get("keep")), _int(a.get("new")))]


def _exceeds(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    a = parse_attrs(attrs)
    limit = _int(a.get("limit"))
    if limit is None:
        return []
    return [Truncation(line, ts, limit, _int(a.get("prompt")), None, None, False, "exceeds")]


def _cache_slot(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    a = parse_attrs(attrs)
    vals = [_int(a.get(k)) for k in ("id", "prompt", "used", "remaining")]
    if any(v is None for v in vals):
        return []
    slot, prompt, used, remaining = (v if v is not None else 0 for v in vals)
    return [CacheSlot(line, ts, slot, prompt, used, remaining)]


def _too_large(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    n = _int(parse_attrs(attrs).get("n_ctx_train"))
    return [ContextSize(line, ts, n, "train", "ollama")] if n is not None else []


def _error(kind: str) -> Handler:
    def handler(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
        a = parse_attrs(attrs)
        detail = a.get("error") or a.get("string") or ""
        return [ErrorEvent(line, ts, kind, (msg + (": " + detail if detail else ""))[:500])]

    return handler


def _load_error(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    err = parse_attrs(attrs).get("error", "")
    low = err.lower()
    kind = "oom" if ("out of memory" in low or "requires more system memory" in low) else "load_failed"
    if "process has terminated" in low or "exit status" in low:
        kind = "runner_crash" if kind != "oom" else kind
    return [ErrorEvent(line, ts, kind, (msg + ": " + err)[:500] if err else msg)]


def _arrival(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    return [RequestArrival(line, ts, _model(parse_attrs(attrs)))]


def _prompt_text(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    a = parse_attrs(attrs)
    text = a.get("prompt") or a.get("input") or a.get("messages") or ""
    if not text or text.isdigit():
        return []
    return [PromptText(line, ts, text)]


EXACT: dict[str, Handler] = {
    "server config": _server_config,
    "inference compute": _gpu,
    "gpu memory": _gpu_memory,
    "vram-based default context": _vram_ctx,
    "loaded runners": _loaded,
    "truncating input prompt": _truncating,
    "input exceeds context length": _exceeds,
    "loading cache slot": _cache_slot,
    "starting llama server": _start,
    "starting runner": _start,
    "starting llama-server": _start,
    "starting mlx runner subprocess": _mlx_start,
    "load": _load_request,
    "offload": _offload,
    "waiting for server to become available": _waiting,
    "waiting for llama-server to become available": _waiting,
    "llama-server model fits alongside existing models": _fit,
    "llama-server model predicted to exceed available memory, evicting": _evict_for_load,
    "evicting all other loaded models for OOM retry": _evict_for_load,
    "model requires more memory than is currently available, evicting a model to make space": _evict_for_load,
    "model requires more gpu memory than is currently available, evicting a model to make space": _evict_for_load,
    "model requires more system memory than is currently available, evicting a model to make space": _evict_for_load,
    "resetting model to expire immediately to make room": _victim,
    "found an idle runner to unload": _victim,
    "max runners achieved, unloading one to make room": _evict_for_load,
    "timer expired, expiring to unload": _expire,
    "runner expired event received": _unload_step("expired_event"),
    "sending an unloaded event": _unload_step("completed"),
    "unload completed": _unload_step("completed"),
    "llama server stopped": _unload_step("stopped"),
    "llama-server stopped": _unload_step("stopped"),
    "stopping mlx runner subprocess": _unload_step("stopped"),
    "changing loaded model": _unload_step("switch"),
    "gpu VRAM usage didn't recover within timeout": _vram_wait,
    "runner with non-zero duration has gone idle, adding timer": _idle,
    "runner with non-zero duration has gone idle, resetting timer": _idle,
    "runner with zero duration has gone idle, expiring to unload": _idle,
    "requested context size too large for model": _too_large,
    "client connection closed before server finished loading, aborting load": _error("client_abort"),
    "client connection closed before llama-server finished loading, aborting load": _error("client_abort"),
    "aborting completion request due to client closing the connection": _error("client_abort"),
    "aborting embedding request due to client closing the connection": _error("client_abort"),
    "aborting embeddings request due to client closing the connection": _error("client_abort"),
    "aborting chat request due to client closing the connection": _error("client_abort"),
    "error loading llama server": _load_error,
    "llama runner terminated": _error("runner_crash"),
    "llama-server terminated": _error("runner_crash"),
    "llama runner process no longer running": _error("runner_crash"),
    "llama-server process no longer running": _error("runner_crash"),
    "post predict error": _error("runner_crash"),
    "llama-server completion error": _error("runner_crash"),
    "llama-server chat error": _error("runner_crash"),
    "Load failed": _error("load_failed"),
    "NewLlamaServer failed": _error("load_failed"),
    "failed to create server": _error("load_failed"),
    "model request too large for system": _error("oom"),
    "runtime OOM detected; expiring loaded models to clear memory before next request": _error("oom"),
    "generate request": _prompt_text,
    "chat request": _prompt_text,
    "completion request": _prompt_text,
    "generate handler": _prompt_text,
    "chat handler": _prompt_text,
    "embedding request": _prompt_text,
    "evaluating already loaded": _arrival,
    **dict.fromkeys(DEVICE_PARTS, device_line),
}


def slog_events(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    """Events for one slog message; [] for messages that carry nothing ietop uses."""
    handler = EXACT.get(msg)
    if handler is not None:
        return handler(msg, attrs, level, line, ts)
    c = msg[:1]
    if c == "n" and msg.startswith("new model will fit in available VRAM"):
        return _fit(msg, attrs, level, line, ts)
    if c == "u" and msg.startswith("updated VRAM"):
        return _updated_vram(msg, attrs, level, line, ts)
    if c == "l" and (m := _STARTED_RE.match(msg)) is not None:
        return [LoadDone(line, ts, float(m.group(1)))]
    if c == "o":
        if msg.startswith("offload to "):
            return _offload(msg, attrs, level, line, ts)
        if (m := _OFFLOADED_RE.match(msg)) is not None:
            return [Offload(line, ts, int(m.group(1)), int(m.group(2)))]
    if c == "m" and (m := _PROGRESS_RE.match(msg)) is not None:
        return [LoadProgress(line, ts, float(m.group(1)))]
    if c == "L" and msg.startswith("Loading Dynamic llm server"):
        return _cgo_start(msg, attrs, level, line, ts)
    if c == "e" and msg.startswith("evaluating") and "already loaded" in msg + attrs:
        return _arrival(msg, attrs, level, line, ts)
    if c == "f" and msg.startswith("finished request signal received after model unloaded"):
        return _error("other")(msg, attrs, level, line, ts)
    return []
