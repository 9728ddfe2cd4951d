"""The building blocks of the demo incident (``make_incident.py``): the constants of the imagined
machine, Go's text formats as Ollama v0.32 prints them, the log being written, and the cast (models and
their runners). The templates that use them, and the sources each line shape is copied from, are in
``make_incident.py`` and ``incident_lifecycle.py``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

START = datetime(2026, 11, 28, 14, 0, 0, tzinfo=timezone.utc)
VERSION = "0.32.13"
OLLAMA_HOME = "/usr/share/ollama/.ollama"
BLOBS = f"{OLLAMA_HOME}/models/blobs"
LIB = "/usr/local/lib/ollama"
GPU_ID = "GPU-5b8f3c1e-7a2d-4e90-b6c4-2f1d9a0e8c37"
GPU_TOTAL_GIB = 24.0
GPU_FREE_GIB = 23.6
GPU_MIN_GIB = 457 / 1024
CLIENT = "127.0.0.1"
N_KEEP = 4
BATCH = 512
DEFAULT_OUT = Path(__file__).with_name("incident.log")


# -- Go text formats -------------------------------------------------------------------------------
def _needs_quote(s: str) -> bool:
    """Go slog's rule: empty, or a space, `=`, `"` or an unprintable character."""
    return s == "" or any(c in ' ="' or not c.isprintable() for c in s)


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    s = str(v)
    if _needs_quote(s):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return s


def go_duration(seconds: float) -> str:
    """Go's time.Duration.String, as GIN prints a latency (truncated to seconds from one minute up)."""
    ns = round(seconds * 1e9)
    if ns < 1_000:
        return f"{ns}ns"
    for unit, scale, places in (("µs", 1_000, 3), ("ms", 1_000_000, 6), ("s", 1_000_000_000, 9)):
        if ns < scale * 1_000 or unit == "s":
            if unit == "s" and ns >= 60 * scale:
                whole = ns // scale
                return f"{whole // 60}m{whole % 60}s"
            text = f"{ns // scale}.{ns % scale:0{places}d}".rstrip("0").rstrip(".")
            return text + unit
    raise AssertionError("unreachable")


def gib(x: float) -> str:
    """format.HumanBytes2 of a GiB amount."""
    return f"{x:.1f} GiB" if x >= 1.0 else f"{x * 1024:.1f} MiB"


def _stamp(t: float) -> datetime:
    return START + timedelta(milliseconds=round(t * 1000))


@dataclass(order=True)
class _Line:
    t: float
    seq: int
    text: str = field(compare=False)


class Log:
    """Lines with the time they were written; rendered in time order (ties keep emission order).
    llama-server lines carry no timestamp in the log (Ollama starts it with --no-log-timestamps), so
    their time only places them."""

    def __init__(self) -> None:
        self._lines: list[_Line] = []

    def _add(self, t: float, text: str) -> None:
        self._lines.append(_Line(round(t, 6), len(self._lines), text))

    # slog text lines: 012:1-4, 001:1-8 (the v0.32 era, same envelope-less `time=… level=… source=…`)
    def slog(self, t: float, level: str, source: str, msg: str, *attrs: tuple[str, object]) -> None:
        dt = _stamp(t)
        stamp = f"{dt:%Y-%m-%dT%H:%M:%S}.{dt.microsecond // 1000:03d}Z"
        tail = "".join(f" {k}={_value(v)}" for k, v in attrs)
        self._add(t, f"time={stamp} level={level} source={source} msg={_value(msg)}{tail}")

    def raw(self, t: float, *texts: str) -> None:
        for text in texts:
            self._add(t, text)

    # GIN access lines: 039:1 (127.0.0.1 client, /api/chat), 007:8-9 (HEAD / + GET /api/ps);
    # written when the request finishes, clock to the second, latency right-aligned in 13 characters.
    def gin(self, t_end: float, status: int, latency: float, method: str, path: str) -> None:
        dt = _stamp(t_end)
        self._add(t_end, f"[GIN] {dt:%Y/%m/%d - %H:%M:%S} | {status:3d} | {go_duration(latency):>13} | "
                         f"{CLIENT:>15} | {method:<7}  \"{path}\"")

    def render(self) -> str:
        return "".join(line.text + "\n" for line in sorted(self._lines))


# -- the cast ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Model:
    name: str
    num_ctx: int
    """Per slot: what the requests ask for (qwen3:8b) or OLLAMA_CONTEXT_LENGTH (gemma3:27b)."""
    size_gib: float
    pp_rate: float
    """Prefill, tokens per second, alone on the GPU."""
    tg_rate: float
    """Decode, tokens per second, alone on the GPU."""
    layers: int
    meta: tuple[str, ...]
    eog: tuple[str, ...]
    sampler: str
    buffers: tuple[str, ...]
    kv_mib: float
    vocab: tuple[int, str]
    """Special-token cache size and token-to-piece cache size (MB) of the tokenizer."""

    @property
    def blob(self) -> str:
        digest = hashlib.sha256(f"ietop-demo/{self.name}".encode()).hexdigest()
        return f"{BLOBS}/sha256-{digest}"

    @property
    def parallel(self) -> int:
        return 2


# print_info block: 003:13-29 (the same llama-server build prints `print_info: key = value`).
QWEN3 = Model(
    "qwen3:8b", 4096, 6.6, 4300.0, 121.5, 37,
    meta=("arch                  = qwen3", "vocab_only            = 0", "no_alloc              = 0",
          "n_ctx_train           = 40960", "n_embd                = 4096", "n_layer               = 36",
          "n_head                = 32", "n_head_kv             = 8", "n_rot                 = 128",
          "n_swa                 = 0", "n_embd_head_k         = 128", "n_embd_head_v         = 128",
          "n_gqa                 = 4", "model type            = 8B", "model params          = 8.19 B",
          "general.name          = Qwen3 8B"),
    eog=("151643 ('<|endoftext|>')", "151645 ('<|im_end|>')", "151662 ('<|fim_pad|>')",
         "151663 ('<|repo_name|>')", "151664 ('<|file_sep|>')"),
    sampler="top_k = 20, top_p = 0.950, min_p = 0.000, xtc_probability = 0.000, xtc_threshold = 0.100, "
            "typical_p = 1.000, top_n_sigma = -1.000, temp = 0.600",
    buffers=("load_tensors:   CPU_Mapped model buffer size =   333.84 MiB",
             "load_tensors:        CUDA0 model buffer size =  4455.35 MiB"),
    kv_mib=1152.0, vocab=(26, "0.9311"),
)
GEMMA3 = Model(
    "gemma3:27b", 8192, 19.4, 1830.0, 38.6, 63,
    meta=("arch                  = gemma3", "vocab_only            = 0", "no_alloc              = 0",
          "n_ctx_train           = 131072", "n_embd                = 5376", "n_layer               = 62",
          "n_head                = 32", "n_head_kv             = 16", "n_rot                 = 128",
          "n_swa                 = 1024", "is_swa_any            = 1", "n_embd_head_k         = 128",
          "n_embd_head_v         = 128", "n_gqa                 = 2", "model type            = 27B",
          "model params          = 27.01 B", "general.name          = Gemma 3 27b It"),
    eog=("1 ('<eos>')", "106 ('<end_of_turn>')"),
    sampler="top_k = 64, top_p = 0.950, min_p = 0.000, xtc_probability = 0.000, xtc_threshold = 0.100, "
            "typical_p = 1.000, top_n_sigma = -1.000, temp = 1.000",
    buffers=("load_tensors:   CPU_Mapped model buffer size =  1102.50 MiB",
             "load_tensors:        CUDA0 model buffer size = 15407.61 MiB"),
    kv_mib=2320.0, vocab=(6414, "1.9446"),
)


@dataclass
class Runner:
    model: Model
    pid: int
    port: int
    next_task: int = 0

    def group(self, unloaded: bool = False) -> tuple[tuple[str, object], ...]:
        """The runnerRef LogValue group (012:3); after unload() the name, GPUs and options are nil
        (ollama v0.32.13 sched.go:1366-1378, LogValue at sched.go:1501)."""
        head: tuple[tuple[str, object], ...] = () if unloaded else (
            ("runner.name", f"registry.ollama.ai/library/{self.model.name}"),
            ("runner.inference", f"[{{ID:{GPU_ID} Library:CUDA}}]"),
        )
        tail: tuple[tuple[str, object], ...] = () if unloaded else (("runner.num_ctx", self.model.num_ctx),)
        return (*head, ("runner.size", gib(self.model.size_gib)), ("runner.vram", gib(self.model.size_gib)),
                ("runner.parallel", self.model.parallel), ("runner.pid", self.pid),
                ("runner.model", self.model.blob), *tail)
