"""What the budget reads, gathered from a store and its records: each model's memory figures with their lines
(load memory lines, `required=`, `runner.size`, vLLM's and MLX's own figures), `/api/ps` and `/api/tags`,
and the usable memory (a flag, the log's devices, vLLM's budget line, or this machine's GPUs and memory).

Each size keeps where it came from; the order of a model's figures is the order of trust: what was allocated,
then what the scheduler planned, then what an endpoint says, then estimates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ietop.model.budget import GIB, BudgetInputs, Figure, ModelSizes, Usable, gib
from ietop.model.engines.mlx import DEFAULT_MODEL
from ietop.model.records import Load, Ref, Unload
from ietop.model.snapshot import Interval
from ietop.model.store import Store
from ietop.model.timeline import build_timeline
from parsers.api.engine_api import ollama_ps, ollama_tags
from parsers.ollama.messages import human_bytes

_ALLOCATED = "allocated: the runner's memory line"
_PLANNED = {
    "weights": "planned: the scheduler's estimate before loading (memory.weights)",
    "kv": "planned: the scheduler's estimate before loading (memory.required.kv)",
    "graph": "planned: the scheduler's estimate before loading (memory.graph)",
    "total": "planned: the scheduler's estimate before loading (memory.required.full, required=)",
}
_VLLM_TOTAL = "vLLM preallocates total GPU memory × gpu_memory_utilization"
_VLLM_KEYS = ("model_memory_gib", "kv_available_gib", "cudagraph_gib", "usable_memory_gib")


@dataclass(frozen=True, slots=True)
class Machine:
    """This machine's memory, for when no log names a device: GPUs (NVML) and host or unified memory."""

    gpus: tuple[tuple[str, int], ...] = ()
    host_total: int | None = None
    unified: bool = False
    """Apple silicon: the GPU draws on the host's memory."""
    wired_limit: int | None = None
    """`iogpu.wired_limit_mb` when set (the GPU may wire this much of unified memory)."""


def machine(gpus: Sequence[tuple[str, int]], host_total: int | None, wired_limit: int | None,
            apple_silicon: bool) -> Machine:
    """This machine as the budget counts it, from what was sampled: its GPUs' memory (NVML), else host memory,
    which is the GPU's too on Apple silicon (then with `iogpu.wired_limit_mb` when set)."""
    unified = apple_silicon and not gpus
    return Machine(tuple(gpus), host_total, unified, wired_limit if unified else None)


@dataclass(frozen=True, slots=True)
class Endpoints:
    """What an Ollama server's non-loading endpoints said: `/api/ps` (name, size, size_vram) and `/api/tags`
    (name, size on disk), per server URL."""

    ps: tuple[tuple[str, str, int | None, int | None], ...] = ()
    tags: tuple[tuple[str, str, int | None], ...] = ()


def read_endpoints(answers: Sequence[tuple[str, int | None, bytes, str | None, int | None, bytes]]
                   ) -> tuple[Endpoints, list[str]]:
    """(server URL, /api/ps status, body, error, /api/tags status, body) of each server asked → what they said,
    and one line per server that could not be read. Both endpoints never load a model: in Ollama's
    server/routes.go (read at fb30760, 2026-08) PsHandler lists `s.sched.loadedModels()` and ListHandler the
    model-list cache of the manifests on disk; neither calls the scheduler's GetRunner."""
    ps: list[tuple[str, str, int | None, int | None]] = []
    tags: list[tuple[str, str, int | None]] = []
    failures: list[str] = []
    for base, ps_status, ps_body, error, tags_status, tags_body in answers:
        status, residency = ollama_ps(base, None, ps_status, ps_body, error)
        if residency is None:
            failures.append(f"{base}: {status.detail}")
            continue
        ps.extend((base, m.name, m.size, m.size_vram) for m in residency.models)
        listed = ollama_tags(tags_body) if tags_status == 200 else None
        tags.extend((base, name, size) for name, size in listed or ())
    return Endpoints(tuple(ps), tuple(tags)), failures


def _key(model: str) -> str:
    return model.replace("\\", "/").rsplit("/", 1)[-1]


class _Models:
    def __init__(self, name: Callable[[str], str]) -> None:
        self.name = name
        self.by_key: dict[str, ModelSizes] = {}

    def get(self, engine: str, model: str) -> ModelSizes:
        display = self.name(model)
        key = _key(display)
        found = self.by_key.get(key)
        if found is None:
            found = self.by_key[key] = ModelSizes(engine, display)
        return found


def _load_figures(m: ModelSizes, ld: Load) -> None:
    for part, into in (("weights", m.weights), ("kv", m.kv), ("graph", m.graph), ("total", m.total)):
        got = ld.memory_part(part)
        if got is None or into:
            continue  # the newest load with a figure wins (loads are walked newest first)
        size, refs, planned = got
        into.append(Figure(size, _PLANNED[part] if planned else _ALLOCATED, refs))


def gather(store: Store, loads: Sequence[Load], unloads: Sequence[Unload], *, endpoints: Endpoints | None = None,
           machine: Machine | None = None, memory: int | None = None, reserve: int | None = None,
           intervals: Sequence[Interval] | None = None) -> BudgetInputs:
    """The budget's inputs from a store after its logs were read (and `store.flush()`), the loads and unloads
    its sink received, what endpoints said, and this machine; `memory`/`reserve` in bytes from the flags.
    `intervals`: the residency timeline of these loads and unloads, when the caller has built it already."""
    tracker = store.loads
    models = _Models(tracker.name)
    newest_first = sorted(loads, key=lambda ld: ld.t_end if ld.t_end is not None else ld.t_begin, reverse=True)
    paths = [s.path for s in store.sources]

    def named(ld: Load) -> str | None:
        # A load the log never names (an excerpt, llama.cpp's own output) still sizes a model: its load line.
        if ld.model is not None:
            return ld.model
        return f"unnamed (load at {_key(paths[ld.ref.src])}:{ld.ref.line})" if ld.memory else None

    for ld in reversed(newest_first):  # models in the order they first loaded
        if (name := named(ld)) is not None:
            models.get(ld.engine, name)
    for ld in newest_first:
        if (name := named(ld)) is None:
            continue
        m = models.get(ld.engine, name)
        _load_figures(m, ld)
        if ld.ok:
            m.loads += 1
            if ld.duration_s is not None and ld.begin_known:
                m.load_seconds.append(ld.duration_s)
            if m.ctx is None and ld.ctx is not None:
                m.ctx, m.parallel = ld.ctx, ld.parallel
            if ld.trigger is not None and ld.trigger.path:
                m.on_demand_paths[ld.trigger.path] = m.on_demand_paths.get(ld.trigger.path, 0) + 1
    for u in unloads:
        if u.is_eviction and u.for_model and u.model:
            models.get(u.engine, u.for_model).evicted.append((tracker.name(u.model), u.ref))
    for name, (size, ref) in tracker.runner_sizes.items():
        models.get("ollama", name).total.append(
            Figure(size, "runner.size: what Ollama's scheduler counts the runner as taking", (ref,)))
    vllm, mlx = store.engine_trackers()
    for src, vt in vllm.items():
        facts, refs = vt.startup_facts, vt.startup_refs
        if not any(key in refs for key in _VLLM_KEYS):
            continue
        served = next((ld.model for ld in newest_first if ld.ref.src == src and ld.model), None)
        # A log that starts after the model was named (or a worker's own log) still sizes the server's model.
        m = models.get("vllm", served or f"vLLM server ({_key(store.sources[src].path)})")
        for key, into, how in (("model_memory_gib", m.weights, "vLLM: the weights' memory after loading"),
                               ("kv_available_gib", m.kv, "vLLM: the memory it reserved for the KV cache"),
                               ("cudagraph_gib", m.graph, "vLLM: CUDA graph capture"),
                               ("usable_memory_gib", m.total, _VLLM_TOTAL)):
            value = facts.get(key)
            if isinstance(value, (int, float)) and key in refs:
                into.append(Figure(round(value * GIB), how, (refs[key],)))
    for src, mt in mlx.items():
        if mt.cache_peak is not None:
            gb, ref, model = mt.cache_peak
            name = model if model != DEFAULT_MODEL else f"default model ({_key(store.sources[src].path)})"
            models.get("mlx", name).kv.append(
                Figure(round(gb * 1e9), "mlx_lm: the prompt cache's size at its largest (its KV in memory)", (ref,)))
    for url, name, in_ps, _vram in (endpoints.ps if endpoints else ()):
        if in_ps is not None:
            models.get("ollama", name).total.append(Figure(in_ps, "size in /api/ps", endpoint=f"{url}/api/ps"))
    for url, name, on_disk in (endpoints.tags if endpoints else ()):
        if on_disk is not None:
            m = models.get("ollama", name)
            m.weights.append(Figure(on_disk, "estimated: the model file's size in /api/tags (its weights on disk)",
                                    endpoint=f"{url}/api/tags", estimated=True))
    usable = usable_memory(store, memory, reserve, machine)
    if intervals is None:
        intervals = build_timeline(loads, unloads, lambda m: tracker.name(m) if m else None)
    return BudgetInputs(tuple(models.by_key.values()), usable, intervals, _max_loaded(store),
                        tuple(s.path for s in store.sources))


def on_machine(inputs: BudgetInputs, machine: Machine | None) -> BudgetInputs:
    """The inputs with this machine's memory as the usable size when nothing else gave one: the dashboard
    learns its host (a hardware sample) after the store gathered them."""
    if inputs.usable.size is not None or machine is None:
        return inputs
    return replace(inputs, usable=machine_memory(machine, 0, ""))


def _max_loaded(store: Store) -> int | None:
    value = store.settings.configured.get("OLLAMA_MAX_LOADED_MODELS")
    try:
        n = int(str(value))
    except (TypeError, ValueError):
        return None
    return n if n > 0 else None


def usable_memory(store: Store, memory: int | None, reserve: int | None, machine: Machine | None) -> Usable:
    """Usable model memory, most specific source first: `--memory`, the log's devices, vLLM's budget line,
    this machine. `--reserve` comes off whichever was used."""
    off = reserve or 0
    less = f" minus --reserve {gib(reserve)}" if reserve else ""
    if memory is not None:
        return Usable(max(0, memory - off), f"--memory {gib(memory)} (given){less}")
    cards: list[tuple[str, int]] = []
    refs: list[Ref] = []
    for device, info in store.gpus.items():
        total = human_bytes(info.total)
        if total is not None:
            cards.append((info.name or device, total))
            if device in store.gpu_refs:
                refs.append(store.gpu_refs[device])
    if cards:
        named = ", ".join(f"{n} {gib(b)}" for n, b in cards)
        return Usable(max(0, sum(b for _, b in cards) - off),
                      f"the log's devices: {named}{less}", tuple(refs), tuple(cards))
    vllm, _mlx = store.engine_trackers()
    for vt in vllm.values():
        value = vt.startup_facts.get("usable_memory_gib")
        if isinstance(value, (int, float)) and "usable_memory_gib" in vt.startup_refs:
            return Usable(max(0, round(value * GIB) - off),
                          f"vLLM's budget line (total × gpu_memory_utilization){less}",
                          (vt.startup_refs["usable_memory_gib"],))
    return machine_memory(machine, off, less)


def machine_memory(machine: Machine | None, off: int, less: str) -> Usable:
    if machine is None:
        return Usable(None, "unknown: the logs name no device's size; give --memory GiB")
    if machine.gpus:
        named = ", ".join(f"{n} {gib(b)}" for n, b in machine.gpus)
        return Usable(max(0, sum(b for _, b in machine.gpus) - off), f"this machine's GPUs (NVML): {named}{less}",
                      cards=machine.gpus)
    if machine.host_total is None:
        return Usable(None, "unknown: no device in the log and none found here; give --memory GiB")
    if machine.unified:
        if machine.wired_limit:
            return Usable(max(0, machine.wired_limit - off),
                          f"unified memory: iogpu.wired_limit_mb {gib(machine.wired_limit)}{less}")
        # macOS lets the GPU wire about three quarters of unified memory by default (two thirds on ≤ 36 GiB
        # machines): Metal's recommendedMaxWorkingSetSize, which Ollama reports as the device's total.
        share = 0.75 if machine.host_total > 36 * GIB else 2 / 3
        return Usable(max(0, round(machine.host_total * share) - off),
                      f"estimated: macOS's default GPU share ({share:.0%}) of {gib(machine.host_total)} unified "
                      f"memory{less}", estimated=True)
    return Usable(max(0, machine.host_total - off),
                  f"this machine's memory (no GPU found): {gib(machine.host_total)}{less}", estimated=True)
