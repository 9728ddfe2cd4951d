"""`LoadMemory` events: what a load takes in memory, from the lines of every Ollama era that state it.

Each event is one line's figure in bytes (its `line` prints the number, or the figures it is computed from):

* **The scheduler's estimate** (planned): `offload to gpu` (v0.1.32–v0.1.44), `offload to <library>`
  (v0.1.45–v0.5.11), `msg=offload` (v0.5.12–v0.12.10): total = `memory.required.full`, kv =
  `memory.required.kv`, graph = `memory.graph.full`, weights = the model's tensors plus `projector.weights`.
  `memory.weights.total` is not that in every release (llm/memory.go, MemoryEstimate): v0.1.45–v0.6.0 summed
  each repeating layer *with its share of the KV cache* and left out the output layer, so there weights =
  total - kv + nonrepeating; v0.6.1–v0.6.2 printed only the repeating layers (`repeating` equal to `total`),
  so there weights = total + nonrepeating; v0.1.33–v0.1.44 and v0.6.3+ print the whole. `msg=offload` is
  the same line in v0.5.12–v0.6.0 and after: only the server's version tells them apart (`MemoryContext`),
  and without it the later meaning is taken. v0.1.32's `offload to gpu` has other fields (required, kv,
  fulloffload) and no weights. v0.1.33–v0.1.44 logged the estimate from EstimateGPULayers, so once per call
  (the scheduler calls it more than once for a load); later releases once per runner launch.
* **Ollama's device lines** (v0.11.5+, ml/backend.go → ml/device.go `BackendMemory.Log`): `model weights`,
  `kv cache`, `compute graph` with `device=` and `size=`, then `total memory size=`. A device line is printed
  only for a size above zero (`if sum > 0`), so no `0 B` device line comes from there. llm/server.go logs the
  set at DEBUG after every fit/alloc attempt and once at INFO for the load (deferred in ollamaServer.Load,
  also when it fails): only INFO lines count, an attempt's layout may not be the one loaded. From v0.12.11 the
  llama engine (runner started without `--ollama-engine`) prints the same INFO set from Ollama's own
  estimate before llama.cpp loads ("Synthesize memory allocation information based on our estimates",
  llamaServer.Load): those are planned. Before v0.11.5 the Go engine's ml/backend/ggml/ggml.go printed
  `model weights buffer=<name> size=…` once per buffer and `compute graph backend=… buffer_type=<name>
  size=…` per backend after each graph reserve (v0.6.0–v0.11.4 at INFO; a reserve may run more than once, the
  last one holds the most, and a size may be `0 B`; v0.6.0's form has no size and is skipped); from v0.11.5
  they are TRACE and repeat the device lines, so they are not read.
* **llama.cpp's own output** (raw runner lines): the weights summary `llm_load_print_meta: model size = …`
  (≤ v0.5.x) / `print_info: file size = …` (v0.6.0+, llama-server), the KV summary `… KV self size = …`
  (`kv self size = … MB` in 2023), or `llama_kv_cache…: size = … (N cells, …)` (v0.12+, recurrent state
  `llama_memory_recurrent: size = …`), and `<ctx>: <device> compute buffer size = …` per backend. llama.cpp
  means MiB by its `MB` (it divides by 1024²).

Why the llama.cpp summaries and not the per-device buffer lines (`CUDA0 model buffer size`, `CUDA0 KV buffer
size`): one figure per part, never both, or a consumer adds them twice; the summaries are printed by every
llama.cpp Ollama shipped (the buffer lines only since ggml-backend, early 2024); the weights summary comes
before its buffers and the KV summary after its buffers, so a line-by-line parser cannot drop one once it
has seen the other; and the model buffers are not a partition of the weights (a `CPU_Mapped` buffer is a view
over a file range that can overlap tensors copied to the GPU, as llm/llama_server.go notes; tied embeddings
are loaded twice: sample 030 prints 531.52 + 1594.93 MiB of buffers for a 1.56 GiB model). The compute
buffers have no summary, so they are read per device. llama.cpp's vision projector (clip) prints its own
`model size:` and compute buffers; they are left out: keyed by part and device they would replace the
model's own figures.

Repeats a consumer must expect within one load: a model with two KV caches (iswa: one for the SWA layers,
one for the rest; hybrid: attention and recurrent) prints two kv summaries, which add up; llama-server's
`--fit` (E5) first loads the model without allocating to measure it (llama.cpp llama_params_fit, its output
demoted to debug, which Ollama's `--log-verbosity 4` shows), so a probe's figures can come before the real
load's, which replace them (llm/llama_server.go keeps the last buffer line per component for that reason).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal

from parsers.events import Event, LoadMemory
from parsers.ollama.gofmt import parse_attrs

_UNITS = {
    "B": 1,
    "KiB": 1 << 10,
    "MiB": 1 << 20,
    "GiB": 1 << 30,
    "TiB": 1 << 40,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
}
_LLAMA_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}
"""llama.cpp's units: its `MB` (2023 releases) is a MiB, the value divided by 1024²."""

_NUMBER = r"([0-9]+(?:\.[0-9]+)?) ([KMG]i?B)\b"
_LLAMA_WEIGHTS_RE = re.compile(r"(?:llm_load_print_meta|print_info): +(?:model|file) size *= *" + _NUMBER)
_LLAMA_KV_RE = re.compile(
    r"(?:llama_new_context_with_model|llama_init_from_model|llama_context|llama_kv_cache\w*|llama_memory_recurrent)"
    r": +(?:KV self size|kv self size|size) *= *" + _NUMBER
)
_LLAMA_COMPUTE_RE = re.compile(
    r"(?:llama_new_context_with_model|llama_init_from_model|llama_context): +(\S+) compute buffer size *= *" + _NUMBER
)
_VERSION_RE = re.compile(r"v?(\d{1,9})\.(\d{1,9})\.(\d{1,9})")

DEVICE_PARTS = {"model weights": "weights", "kv cache": "kv", "compute graph": "graph", "total memory": "total"}
"""Ollama's device-line messages (v0.11.5+; `model weights` and `compute graph` also v0.6.0–v0.11.4)."""
_STARTS = ("starting runner", "starting llama server", "starting llama-server")
IN_CONTEXT = frozenset({"offload", *DEVICE_PARTS, *_STARTS})
"""Messages whose memory meaning depends on more than their text (`MemoryContext`): the parser must not
remember them by their text."""


def human_bytes(text: str | None) -> int | None:
    """Go's `format.HumanBytes2` output (`6.6 GiB`, `512 MiB`) → bytes; None when absent or unreadable."""
    if not text:
        return None
    number, _, unit = text.strip().partition(" ")
    try:
        return _bytes(number, _UNITS[unit.strip()])
    except (ValueError, KeyError, ArithmeticError):  # not a number (`nan`, `inf`, `1.2.3`), or no unit
        return None


def offload_memory(
    msg: str, a: Mapping[str, str], line: int, ts: datetime | None, kv_in_weights: bool | None = None
) -> list[Event]:
    """The scheduler's estimate on an `offload` line, one planned event per part it gives.
    `kv_in_weights`: whether `memory.weights.total` holds the KV cache (v0.1.45–v0.6.0); None: as the message
    shows (`offload to <library>` yes, `offload to gpu` and `offload` no)."""
    if kv_in_weights is None:
        kv_in_weights = msg.startswith("offload to ") and msg != "offload to gpu"
    total = human_bytes(a.get("memory.required.full"))
    if total is None and msg == "offload to gpu":
        # v0.1.32 (llm/server.go): required = the full-offload footprint, fulloffload = its graph.
        return _planned(
            line, ts, human_bytes(a.get("required")), human_bytes(a.get("kv")), None, human_bytes(a.get("fulloffload"))
        )
    kv = human_bytes(a.get("memory.required.kv"))
    weights = human_bytes(a.get("memory.weights.total"))
    output = human_bytes(a.get("memory.weights.nonrepeating"))
    if weights is not None and output is not None:
        if kv_in_weights:
            weights = weights - kv + output if kv is not None else None
        elif output and a.get("memory.weights.repeating") == a.get("memory.weights.total"):
            weights += output  # v0.6.1–v0.6.2: `total` printed the repeating layers only
    if weights is not None:
        weights += human_bytes(a.get("projector.weights")) or 0
    return _planned(line, ts, total, kv, weights, human_bytes(a.get("memory.graph.full")))


def _planned(
    line: int, ts: datetime | None, total: int | None, kv: int | None, weights: int | None, graph: int | None
) -> list[Event]:
    parts = (("total", total), ("kv", kv), ("weights", weights), ("graph", graph))
    return [LoadMemory(line, ts, part, size, None, True) for part, size in parts if size is not None]


def device_line(msg: str, attrs: str, level: str, line: int, ts: datetime | None) -> list[Event]:
    """`model weights device=CUDA0 size="11.5 GiB"` and its kin (E4), and the Go engine's ggml.go forms
    (`buffer=`, `buffer_type=`; v0.6.0–v0.11.4): INFO lines only (see the module's note)."""
    if level != "INFO":
        return []
    a = parse_attrs(attrs)
    size = human_bytes(a.get("size"))
    if size is None:
        return []
    part = DEVICE_PARTS[msg]
    if part == "total":
        return [LoadMemory(line, ts, part, size)]
    device = a.get("device") or a.get("buffer") or a.get("buffer_type")
    return [LoadMemory(line, ts, part, size, device)] if device else []


def llamacpp_memory(text: str, line: int, ts: datetime | None) -> list[Event] | None:
    """llama.cpp's weights and KV summaries and its compute buffers; None for any other line."""
    if "buffer size" in text:
        if (m := _LLAMA_COMPUTE_RE.match(text)) is not None:
            return [LoadMemory(line, ts, "graph", _llama_bytes(m.group(2), m.group(3)), m.group(1))]
        return None
    # Both patterns are anchored at a function name: a line of another function fails at its first letters.
    if (m := _LLAMA_KV_RE.match(text)) is not None:
        return [LoadMemory(line, ts, "kv", _llama_bytes(m.group(1), m.group(2)))]
    if (m := _LLAMA_WEIGHTS_RE.match(text)) is not None:
        return [LoadMemory(line, ts, "weights", _llama_bytes(m.group(1), m.group(2)))]
    return None


def _llama_bytes(number: str, unit: str) -> int:
    return _bytes(number, _LLAMA_UNITS[unit])


def _bytes(number: str, unit: int) -> int:
    """`number` `unit`s in bytes. A size past a float's range (300 digits, never written by an engine) is read as
    a Decimal, not as an infinity int() refuses: the store then refuses its line as implausible
    (parsers.events.sane), as it does any other impossible number."""
    try:
        return int(float(number) * unit)
    except OverflowError:
        return int(Decimal(number) * unit)


def _version(text: str | None) -> tuple[int, int, int] | None:
    m = _VERSION_RE.match(text) if text else None
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m is not None else None


class MemoryContext:
    """What an Ollama memory line means beyond its own text: whether the runner being loaded is the llama
    engine (its v0.12.11+ device lines are Ollama's estimate), and the server's version (what `msg=offload`'s
    `memory.weights.total` holds). One per log, fed every `IN_CONTEXT` message in order."""

    __slots__ = ("llama_engine",)

    def __init__(self) -> None:
        self.llama_engine = False

    def read(self, msg: str, attrs: str, events: list[Event], version: str | None) -> list[Event]:
        """`events` (what the message gave alone) as this context reads them."""
        if msg in _STARTS:
            # A runner started for device discovery (v0.12+, discover/runner.go) has no model and loads nothing.
            if "--model " in attrs:
                self.llama_engine = "--ollama-engine" not in attrs
            return events
        if msg == "offload":
            v = _version(version)
            if v is not None and (0, 5, 12) <= v < (0, 6, 1) and events:
                first = events[0]
                kept = [ev for ev in events if not isinstance(ev, LoadMemory)]
                return kept + offload_memory(msg, parse_attrs(attrs), first.line, first.ts, kv_in_weights=True)
            return events
        if self.llama_engine:
            return [
                LoadMemory(ev.line, ev.ts, ev.part, ev.size_bytes, ev.device, True)
                if isinstance(ev, LoadMemory)
                else ev
                for ev in events
            ]
        return events
