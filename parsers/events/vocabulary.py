"""Typed events produced by the engine parsers.

Every event is a slotted dataclass, treated as immutable once built but not ``frozen=True``: a frozen
dataclass sets each field through ``object.__setattr__``, which made building events a measurable share of
live ingest, and its extra generated methods a third of this module's import time (start to first frame).
``line`` is the 1-based physical line number in the source
that the event came from (the pipeline knows the path); ``ts`` is the time the log line itself carries,
timezone-aware when the log gives an offset and naive (local clock, zone unknown) otherwise, or ``None``
when the line carries no time at all (raw llama.cpp output). Parsers never read a clock.

The events describe what a line *says*, not what it means for a request or a model: joining a load with
the request that caused it is the model's job (``ietop.model``), because it needs lines that come later.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from parsers.events.base import Event


@dataclass(slots=True)
class Unparsed(Event):
    """A line no parser recognised. Counted, never dropped silently; its text is not kept."""


@dataclass(slots=True)
class ServerStart(Event):
    """`Listening on ADDR (version X)`: the engine's version and the address it listens on."""

    version: str | None
    listen: str | None


@dataclass(slots=True)
class ServerStop(Event):
    """The server process of this log stopped: its own shutdown lines (vLLM `[shutdown]`), or a new server
    started in the same log (vLLM's banner after a load). What it held is no longer resident."""


@dataclass(slots=True)
class ServerConfig(Event):
    """The engine's configured settings (Ollama `server config env=map[...]`): a claim, not evidence."""

    settings: tuple[tuple[str, str], ...]


@dataclass(slots=True)
class GpuInfo(Event):
    """A compute device the engine found at start-up."""

    device_id: str
    library: str
    name: str | None
    total: str | None
    available: str | None


@dataclass(slots=True)
class GpuMemory(Event):
    """A device's memory as the scheduler logged it before a load (Ollama `gpu memory` v0.11.5+, `updated
    VRAM…` v0.1.33+): `free` what the device reported free, `available` what the scheduler counted as left
    for another model. A figure of that moment, not of now."""

    device_id: str
    total: str | None
    free: str | None
    available: str | None


@dataclass(slots=True)
class DefaultContext(Event):
    """The engine picked a default context from the VRAM tier (Ollama v0.15.5+)."""

    ctx: int
    total_vram: str | None


@dataclass(slots=True)
class LoadDecision(Event):
    """The scheduler decided a model will fit and is about to load it (or updated VRAM for co-residency)."""

    model: str | None
    parallel: int | None
    required: str | None
    available: str | None
    co_resident: bool = False


@dataclass(slots=True)
class LoadStart(Event):
    """A model runner was launched. ``ctx_total`` is the total KV context (all slots) where logged."""

    model: str | None
    runner: str
    ctx_total: int | None = None
    parallel: int | None = None
    gpu_layers: int | None = None


@dataclass(slots=True)
class LoadRequest(Event):
    """Ollama E4 runner `load request` (fit/alloc/commit): the effective layout of a load."""

    op: str
    parallel: int | None
    batch_size: int | None
    kv_size: int | None
    kv_cache_type: str | None


@dataclass(slots=True)
class Offload(Event):
    """How many layers went to the GPU (x of y). ``offloaded < total`` is a partial offload."""

    offloaded: int | None
    total: int | None


@dataclass(slots=True)
class LoadMemory(Event):
    """Memory a load takes, as the engine logged it, one part per line: ``weights`` (the model's tensors),
    ``kv`` (the KV cache of every slot at the context in effect), ``graph`` (compute buffers) or ``total``.
    ``device`` is the card (or ``CPU``) where the line is one of several per-device lines; the parts of one
    load add up over devices. ``planned`` marks the scheduler's estimate made before loading (Ollama's
    `offload` line, `memory.required.*`), against what was allocated (E4 device lines, llama.cpp buffers)."""

    part: str
    size_bytes: int
    device: str | None = None
    planned: bool = False


@dataclass(slots=True)
class LoadProgress(Event):
    """Load progress (0..1) or a status change while waiting for the runner."""

    progress: float | None
    status: str | None = None


@dataclass(slots=True)
class LoadDone(Event):
    """`llama runner started in X seconds` and equivalents: the load completed."""

    duration_s: float


@dataclass(slots=True)
class RunnersLoaded(Event):
    """`loaded runners count=N`: how many models are resident after a load."""

    count: int


@dataclass(slots=True)
class ContextSize(Event):
    """A context size read from the runner itself (evidence of what is in effect).

    ``kind`` is one of ``total`` (all slots), ``per_slot`` or ``train`` (the model's trained maximum).
    """

    ctx: int
    kind: str
    origin: str


@dataclass(slots=True)
class Eviction(Event):
    """The scheduler decided to unload a model to make room (INFO eviction lines, DEBUG victim lines)."""

    model: str | None
    reason: str
    num_ctx: int | None = None
    blob: str | None = None
    """The model's blob path when the line names the model both ways (DEBUG `runner.name` and
    `runner.model`): how a load, which only knows the blob, is matched with its name."""
    size_bytes: int | None = None
    """DEBUG `runner.size`: what the scheduler counted the victim as taking."""


@dataclass(slots=True)
class UnloadStep(Event):
    """A step of an unload: ``expire`` (keep-alive timer), ``stopped``/``completed``, ``switch``,
    ``vram_wait`` (the WARN that VRAM did not recover: an unload happened just before)."""

    stage: str
    model: str | None = None
    seconds: float | None = None
    num_ctx: int | None = None


@dataclass(slots=True)
class IdleTimer(Event):
    """A runner went idle and its keep-alive timer was (re)armed for ``duration``."""

    duration: str | None
    duration_s: float | None
    model: str | None = None
    num_ctx: int | None = None
    blob: str | None = None
    """The runner's model file (DEBUG `runner.model`), when the line names both: the blob's name."""
    size_bytes: int | None = None
    """DEBUG `runner.size` / `runner.vram`: what the scheduler counts the runner as taking."""
    vram_bytes: int | None = None


@dataclass(slots=True)
class Truncation(Event):
    """A prompt longer than the context. ``truncated`` is False for forms that shift instead (v0.4.2)."""

    limit: int
    prompt: int | None
    keep: int | None
    new: int | None
    truncated: bool = True
    form: str = "truncating"


@dataclass(slots=True)
class PromptTask(Event):
    """A runner slot started a prompt: the real prompt size (llama-server `task.n_tokens`, JSON slot)."""

    slot: int | None
    task: int | None
    n_ctx_slot: int | None
    n_keep: int | None
    n_tokens: int | None


@dataclass(slots=True)
class CacheSlot(Event):
    """E3/E4 DEBUG `loading cache slot`: prompt tokens, reused from cache, still to evaluate."""

    slot: int
    prompt: int
    used: int
    remaining: int


@dataclass(slots=True)
class PrefillProgress(Event):
    """Prompt-processing progress: ``n_tokens`` processed of ``total`` (when the line gives the total:
    MLX `Prompt processing progress: p/N`, where N is the uncached part of the prompt), ``t_s`` seconds
    into the prefill (llama-server)."""

    task: int | None
    n_tokens: int
    progress: float
    t_s: float | None
    total: int | None = None


@dataclass(slots=True)
class Timing(Event):
    """A per-request timing line: ``kind`` is ``prompt`` (prefill), ``eval`` (decode) or ``total``."""

    kind: str
    ms: float
    tokens: int
    task: int | None = None


@dataclass(slots=True)
class SlotRelease(Event):
    """A slot finished a task (`stop processing` / `slot released`)."""

    task: int | None
    n_tokens: int | None
    truncated: bool | None


@dataclass(slots=True)
class HttpAccess(Event):
    """One completed HTTP request (an access-log line), written when the response finished."""

    status: int
    latency_s: float | None
    latency_raw: str
    client: str | None
    method: str
    path: str


@dataclass(slots=True)
class AccessCount(Event):
    """``count`` successful non-inference access lines (health checks, `/api/tags`…) that a consumer which
    keeps no such request asked to have counted instead of parsed one by one; ``line`` and ``ts`` are the
    last one's. Never produced by ``parse()``: only by a feed that took the parser's health-check shortcut
    (``ok_probe_re``, see parsers.ollama.gin)."""

    count: int


@dataclass(slots=True)
class ErrorEvent(Event):
    """An error. ``kind``: oom, runner_crash, load_failed, client_abort, engine_dead or other."""

    kind: str
    message: str


@dataclass(slots=True)
class RequestArrival(Event):
    """DEBUG scheduler line marking a request's arrival at an already loaded model."""

    model: str | None


@dataclass(slots=True)
class RequestBody(Event):
    """A request body logged at arrival (MLX DEBUG `Incoming Request Body`): what was asked for.
    ``model`` is None when the body names none (the server's default model)."""

    model: str | None
    stream: bool | None
    max_tokens: int | None
    path: str | None = None
    """The endpoint the body's shape belongs to: `messages` → `/v1/chat/completions`, `prompt` →
    `/v1/completions` (the access line of the same request names it)."""


@dataclass(slots=True)
class PromptText(Event):
    """Prompt or request-body text found in a DEBUG/TRACE line. Untrusted and private: reports omit it
    unless the user asks (`--include-prompts`)."""

    raw: str = field(repr=False)
    """The text as the line has it; `decode`, when set, turns it into the prompt (vLLM logs a Python repr:
    decoded only if someone reads it, since nearly every report omits it)."""
    decode: Callable[[str], str] | None = field(default=None, repr=False)

    @property
    def text(self) -> str:
        return self.decode(self.raw) if self.decode is not None else self.raw

    @property
    def chars(self) -> int:
        return len(self.text)
