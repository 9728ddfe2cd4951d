"""Memory: each GPU (NVML) or the host's unified memory, the per-model breakdown and the budget line.

The budget line answers the eviction question directly: do the resident models, plus the next one,
fit in what this device has? The `next:` line under it answers it per model, from the memory budget (`b`).
With models resident on several hosts, what each host holds instead: this host's devices say nothing about
another's memory, so one budget over all of them would mislead."""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from ietop.model.budget import Budget
from ietop.model.snapshot import Snapshot
from ietop.pipeline.hardware import Hardware
from ietop.tui.format import bar, clean, clock, elide, secs, size
from ietop.tui.screens.budget import budget_here
from ietop.tui.widgets.residency import UNKNOWN_HOST, by_host, machine, several_hosts


def _na(value: object, unit: str) -> str:
    return "N/A" if value is None else f"{value}{unit}"


class MemoryPanel(Static):
    BORDER_TITLE = "Memory"

    _shown: object = None
    _parts: tuple[Text, ...] = ()

    def show(self, snap: Snapshot, hw: Hardware | None, live_note: str | None = None) -> None:
        """`hw` None: no sample of this host yet; then `live_note` (live: say so) or, in a replay, the devices
        the log names."""
        # Before the first layout there is no size yet: the narrowest the stylesheet allows.
        width = self.content_size.width or NARROWEST
        budget = budget_here(snap, hw)
        key = (hw, width, snap.log_gpus, tuple((r.model, r.size_bytes, r.vram_bytes, r.host) for r in snap.resident),
               live_note, budget)
        if key == self._shown:
            return
        self._shown = key
        parts: list[Text] = []
        if hw is None and live_note is not None:
            hw = Hardware(None, (), live_note, {})
        elif hw is None:  # replay: not this host's hardware; what the log says about its devices instead
            hw = Hardware(None, (), None if snap.log_gpus else "replay: no device in the log", {})
            for lg in snap.log_gpus:
                # What the engine logged: the device and how much of it was in use then (not now).
                name = elide(clean(lg.name).removeprefix("NVIDIA "), max(4, width - len("GPU  (log)")))
                parts.append(Text("GPU ", style="bold") + Text(name) + Text(" (log)", style="dim"))
                parts.append(_gauge(lg.used_bytes, lg.total_bytes, width))
                if lg.at is not None:
                    parts.append(Text(f"  in use at {clock(lg.at)}", style="dim"))
                    later = [r.model for r in snap.resident if (r.loaded_since or 0) > lg.at.timestamp()]
                    if later:  # the log's figure predates what is resident now: it does not count them
                        parts.append(Text(elide(f"  before {clean(later[-1])} loaded", width), style="dim"))
        for g in hw.gpus:
            # nvidia-smi's order and units: utilisation, power, temperature.
            label = f"GPU{g.index} "
            state = (f"  {_na(g.util_percent, '%')} {_na(g.power_w and round(g.power_w), 'W')}"
                     f" {_na(g.temperature_c, '°C')}")
            name = elide(clean(g.name).removeprefix("NVIDIA "), max(4, width - len(label) - len(state)))
            parts.append(Text(label, style="bold") + Text(name) + Text(state, style="dim"))
            parts.append(_gauge(g.memory_used, g.memory_total, width))
            for p in g.processes:
                who = hw.engine_pids.get(p.pid, "other")
                line = f"pid {p.pid} ({who}) {size(p.used_bytes)}"
                parts.append(Text(f"  {line}" if len(line) + 2 <= width else line, style="dim"))
        if not hw.gpus and hw.gpu_note:
            parts.append(Text(clean(hw.gpu_note), style="dim"))
        if hw.host is not None:
            h = hw.host
            swap = f"  swap {_pair(h.swap_used, h.swap_total)}" if h.swap_total else "  no swap"
            parts.append(Text("RAM", style="bold") + Text(swap, style="bold red" if h.swap_used > h.swap_total * 0.5
                                                          else "dim"))
            parts.append(_gauge(h.used, h.total, width))
            wired = getattr(h, "wired", None)
            if wired:  # macOS: what Metal holds for the GPU is in here
                parts.append(Text(f"  wired {size(wired)}", style="dim"))
            if hw.wired_limit:
                parts.append(Text(f"  GPU may wire {size(hw.wired_limit)}", style="dim"))  # iogpu.wired_limit_mb
        for e in hw.engines:
            cpu = "—" if e.cpu_percent is None else f"{e.cpu_percent:.0f}%"
            who, what = f"{e.engine} pid {e.pid}", f"RSS {size(e.rss_bytes)}, CPU {cpu}"
            if len(who) + 2 + len(what) <= width:
                parts.append(Text(f"{who}: {what}", style="dim"))
            else:
                parts.extend((Text(who, style="dim"), Text(f"  {what}", style="dim")))
        parts.extend(_breakdown(snap, hw, width, _next_line(budget, snap, width)))
        if tuple(parts) == self._parts:
            return  # a new sample that reads the same on screen (host memory moves by MiBs, shown by 0.1 GiB)
        # A layout pass of the whole screen (~15 ms) only when the panel's height may change: another number
        # of lines, or a changed one that wraps (the GPU note does at the narrowest). The idle dashboard
        # otherwise re-laid the screen on every sample.
        relayout = len(parts) != len(self._parts) or any(
            part.cell_len > width and part != old for part, old in zip(parts, self._parts, strict=True))
        self._parts = tuple(parts)
        self.update(Group(*parts), layout=relayout)


_SIZES_FROM = {
    "ollama": "Ollama: poll /api/ps, or OLLAMA_DEBUG logs",
    "vllm": "vLLM: its log's start-up lines",
    "mlx": "MLX: its process's RSS, live",
}
"""Where a resident model's size would come from, per engine, when nothing gave it."""
NARROWEST = 24
"""Content width at the stylesheet's min-width (#memory: 28 with the border and the padding)."""


def _pair(used: int | None, total: int | None) -> str:
    """`2.1/140.4 GiB`, or `581.4 MiB/23.5 GiB` when the units differ."""
    u, t = size(used), size(total)
    u_num, _, u_unit = u.partition(" ")
    return f"{u_num}/{t}" if u_unit and t.endswith(" " + u_unit) else f"{u}/{t}"


def _gauge(used: int | None, total: int | None, width: int) -> Text:
    """`  ████░░░░ 2.1/140.4 GiB` on one line of the panel: the bar takes what the numbers leave."""
    tail = " " + _pair(used, total)
    room = width - len(tail)
    indent = "  " if room >= 6 else ""  # at the narrowest, the bar keeps the room the indent would take
    return Text(indent) + bar(used, total, max(2, room - len(indent))) + Text(tail)


def _next_line(budget: Budget | None, snap: Snapshot, width: int) -> Text | None:
    """`next: vision fits · reasoner no (swap 58.3s)` (narrower: `+reasoner ✗ swap 58.3s · +vision ✓`): the models
    not resident that would fit beside the resident ones, and the first that would not with what loading it
    costs. None unless the budget knows the usable memory and every resident model's size."""
    if budget is None or budget.usable.size is None or not snap.resident:
        return None
    sizes = {_short(f.model): f.total.size for f in budget.models if f.total is not None}
    held = {_short(r.model): sizes.get(_short(r.model), r.size_bytes) for r in snap.resident}
    if any(v is None for v in held.values()):
        return None
    room = budget.usable.size - sum(v or 0 for v in held.values())
    fits: list[str] = []
    first_not: tuple[str, float | None] | None = None
    for f in budget.models:
        if _short(f.model) in held or f.total is None:
            continue
        if f.total.size <= room:
            fits.append(f.model)
        elif first_not is None:
            first_not = (f.model, f.load_s)
    if not fits and first_not is None:
        return None
    named = [*fits, *([first_not[0]] if first_not else [])]
    swap = "?" if first_not is None or first_not[1] is None else secs(first_not[1])
    short = _tagless(named)
    # The widest wording that fits: full names, then without their tags (when still unambiguous).
    for name in ({n: n for n in named}, short):
        said = [f"{clean(name[n])} fits" for n in fits]
        if first_not is not None:
            said.append(f"{clean(name[first_not[0]])} no (swap {swap})")
        text = "next: " + " · ".join(said)
        if cell_len(text) <= width:
            return Text(text, style="dim")
    # Then `+model ✗`/`✓`, the one that does not fit first, and as many that fit as there is room for: what
    # is left out is a name that fits, never the swap's cost.
    said = [f"+{clean(short[n])} ✓" for n in fits]
    if first_not is not None:
        said.insert(0, f"+{clean(short[first_not[0]])} ✗ swap {swap}")
    kept = list(said)
    while len(kept) > 1 and cell_len(" · ".join([*kept, "…"])) > width:
        kept.pop()
    text = " · ".join(kept if len(kept) == len(said) else [*kept, "…"])
    return Text(elide(text, width), style="dim")


def _short(model: str) -> str:
    return model.replace("\\", "/").rsplit("/", 1)[-1]


def _tagless(names: Sequence[str]) -> dict[str, str]:
    """Each name without its path and `:tag`, unless two would then read the same."""
    short = {n: _short(n).split(":", 1)[0] or n for n in names}
    return short if len(set(short.values())) == len(short) else {n: n for n in names}


def _breakdown(snap: Snapshot, hw: Hardware, width: int, next_line: Text | None = None) -> Sequence[Text]:
    then = [next_line] if next_line is not None else []
    sized = [r for r in snap.resident if r.size_bytes]
    if not sized:
        if not snap.resident:
            return []
        # Where each engine's sizes would come from (once per engine, in the rows' order).
        where = "; ".join(dict.fromkeys(_SIZES_FROM[r.engine] for r in snap.resident if r.engine in _SIZES_FROM))
        return [Text(f"per-model sizes: unknown ({where})" if where else "per-model sizes: unknown", style="dim"),
                *then]
    several = several_hosts(snap.resident)
    if several:
        sized = by_host(sized)
    models = []
    for r in sized:
        amount = size(r.size_bytes)
        room = max(4, width - 3 - len(amount))
        name = elide(clean(r.model), room)
        models.append(Text(f"  {name}{' ' * (room - cell_len(name))} {amount}"))
    if several:
        return [Text("resident per host:", style="bold"), *_per_host(snap, width), *models]
    total = sum(r.size_bytes or 0 for r in sized)
    budget = (sum(g.memory_total or 0 for g in hw.gpus) or sum(g.total_bytes or 0 for g in snap.log_gpus)
              or (hw.host.total if hw.host else 0))
    if not budget:
        return [Text("resident:", style="bold"), *models, *then]
    # The sum first, what would fit beside it, then its parts: when the panel is too short for every model,
    # the last ones fall off its bottom edge, not the budget lines.
    frac = total / budget
    style = "bold red" if frac > 0.9 else "yellow" if frac > 0.75 else "green"
    where = "VRAM" if hw.gpus or snap.log_gpus else "RAM"
    return [Text("budget ", style="bold") + Text(f"{frac:.0%} of {where}", style=style),
            _gauge(total, budget, width), *then, *models]


def _per_host(snap: Snapshot, width: int) -> list[Text]:
    """`127.0.0.2: 7.9 GiB`, one line per host, what its resident models hold (`≥` when one's size is unknown)."""
    held: dict[str, tuple[int, bool]] = {}
    for r in by_host(snap.resident):
        name = machine(r.host) or UNKNOWN_HOST
        total, unknown = held.get(name, (0, False))
        held[name] = (total + (r.size_bytes or 0), unknown or not r.size_bytes)
    lines = []
    for name, (total, unknown) in held.items():
        amount = ("≥ " if unknown and total else "") + (size(total) if total else "?")
        label = elide(clean(name), max(4, width - len(amount) - 2))
        lines.append(Text(label, style="bold") + Text(f": {amount}"))
    return lines
