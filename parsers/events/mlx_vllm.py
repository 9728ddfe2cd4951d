"""Events of the MLX (``mlx_lm.server``) and vLLM parsers: generation, usage and throughput lines, vLLM's
stats, start-up facts, request logging and Prometheus scrapes.

Part of the event vocabulary of ``parsers.events``, which re-exports every class here; kept apart so
that neither module is too long to read in one sitting. The same conventions hold (see there).
"""

from __future__ import annotations

from dataclasses import dataclass

from parsers.events.base import Event


@dataclass(slots=True)
class Admission(Event):
    """A request was admitted to generation (MLX `Prompt Cache:` / `KV Caches:` stats line)."""

    sequences: int | None
    cache_gb: float | None
    user_cache_tokens: int | None = None


@dataclass(slots=True)
class GenerationStart(Event):
    """MLX DEBUG `Starting stream:` / `Starting completion:`."""

    stream: bool


@dataclass(slots=True)
class TokenDelta(Event):
    """One generated token (MLX DEBUG logs one record per token). Its text is not kept: it is output."""


@dataclass(slots=True)
class Usage(Event):
    """The usage block of a response (MLX DEBUG `Outgoing Response`): ground truth for one request."""

    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    model: str | None = None
    finish_reason: str | None = None
    path: str | None = None
    """The endpoint the response's `object` belongs to (`chat.completion` → `/v1/chat/completions`,
    `text_completion` → `/v1/completions`)."""


@dataclass(slots=True)
class Throughput(Event):
    """Old MLX DEBUG `Prompt: X tokens-per-sec` / `Generation: X tokens-per-sec` (no counts)."""

    kind: str
    tokens_per_s: float


@dataclass(slots=True)
class PeakMemory(Event):
    """Old MLX DEBUG `Peak memory: X GB`."""

    gb: float


@dataclass(slots=True)
class EngineStats(Event):
    """A periodic stats line (vLLM V0 every 5 s, V1 every 10 s). Fractions are 0..1 (the log prints
    percent); ``None`` where the line has no such segment. ``engine`` is the data-parallel rank
    (V1 `Engine 000:`), None for V0. ``extra`` holds any other `Key: value` segment, numerically."""

    engine: str | None
    prompt_tps: float | None
    gen_tps: float | None
    running: int | None
    waiting: int | None
    swapped: int | None
    kv_usage: float | None
    prefix_hit_rate: float | None
    extra: tuple[tuple[str, float], ...] = ()


@dataclass(slots=True)
class StartupFact(Event):
    """One fact of an engine's start-up, by key: version, max_model_len, weights_load_s,
    model_memory_gib, model_load_s, kv_available_gib, kv_cache_tokens, gpu_blocks, cpu_blocks,
    max_concurrency, max_concurrency_tokens, init_engine_s, served_model, listen. ``value`` is a number
    or a string as the key implies."""

    key: str
    value: float | str


@dataclass(slots=True)
class RequestLogged(Event):
    """vLLM request logging (`--enable-log-requests`), one line of a request's life by ``phase``: ``body``
    (DEBUG `JSON body`, id without its `chatcmpl-`/`cmpl-` prefix), ``details`` (DEBUG), ``received``,
    ``added`` (the engine has it), ``output`` (`--enable-log-outputs`: `Generated response`), ``finished``
    (V0), ``aborted`` or ``failed``. ``prompt_tokens`` from the logged prompt token ids when present (the
    real prompt size). ``stream``: whether the client asked for a stream, where the line says (None: it does
    not). ``late``: a `received` line in the engine's own wording (vLLM before ~0.5), written when generation
    starts, i.e. after a stream's access line, not before it as the API server's request logger does."""

    request_id: str
    phase: str
    prompt_tokens: int | None = None
    max_tokens: int | None = None
    stream: bool | None = None
    late: bool = False


@dataclass(slots=True)
class Preemption(Event):
    """V0 scheduler warning that a request was preempted (only every 50th is logged)."""

    request_id: str | None
    mode: str | None
    cumulative: int | None


@dataclass(slots=True)
class MetricSample(Event):
    """One sample of a Prometheus scrape, name canonicalised across engine versions (see
    parsers.vllm.metrics). ``labels`` sorted; histogram samples keep their `_bucket`/`_sum`/`_count`
    suffix and `le` label. ``line`` is the line in a saved scrape file, 0 for a live poll."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


@dataclass(slots=True)
class Scrape(Event):
    """A whole /metrics scrape at one instant (the unit the model computes deltas between)."""

    endpoint: str
    samples: tuple[MetricSample, ...]
