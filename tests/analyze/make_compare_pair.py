"""Write a SYNTHETIC before/after pair of Ollama logs for `ietop compare` (issue 23, item 3).

Not real engine output: every line comes from the demo incident's templates (`ietop/demo/make_incident.py`,
`incident_lifecycle.py`, `incident_parts.py`), whose shapes are copied from real lines in `fixtures/ollama/`
(each template cites its fixture and line); the few lines written here cite theirs too. Models, times and token
counts are invented. Nothing is random: the same script writes the same bytes.

The story is the seeds' "the embedder evicted the chat model": the same twelve requests, in the same order and
with the same prompts and answers, are served twice by Ollama 0.32.13 on one 24 GiB GPU.

- before (2026-11-28): `OLLAMA_KEEP_ALIVE:5m0s OLLAMA_MAX_LOADED_MODELS:1`. Every knowledge search loads
  nomic-embed-text, which evicts qwen3:8b (the loaded-model cap is reached), so the next chat reloads qwen3:8b;
  a pause of eight minutes lets the keep-alive timer unload it, and the chat after it cold-loads too.
- after (2026-11-29): `OLLAMA_KEEP_ALIVE:30m0s OLLAMA_MAX_LOADED_MODELS:3`. Both models load once and stay:
  no eviction, no expiry, one cold load each.

    python tests/analyze/make_compare_pair.py OUT_DIR     # writes OUT_DIR/before.log and OUT_DIR/after.log
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ietop.demo.incident_lifecycle import load, startup, stop
from ietop.demo.incident_parts import QWEN3, Log, Model, Runner
from ietop.demo.make_incident import Req, keep_alive_expiry, serve

EMBED = Model(
    "nomic-embed-text:latest", 2048, 0.5, 9000.0, 1.0, 13,
    # print_info block in the shape of 003:13-29; nomic-bert's figures.
    meta=("arch                  = nomic-bert", "vocab_only            = 0", "no_alloc              = 0",
          "n_ctx_train           = 2048", "n_embd                = 768", "n_layer               = 12",
          "n_head                = 12", "n_head_kv             = 12", "n_rot                 = 64",
          "n_swa                 = 0", "n_embd_head_k         = 64", "n_embd_head_v         = 64",
          "n_gqa                 = 1", "model type            = 137M", "model params          = 136.73 M",
          "general.name          = nomic-embed-text-v1.5"),
    eog=("102 ('[SEP]')",),
    sampler="top_k = 40, top_p = 0.950, min_p = 0.050, xtc_probability = 0.000, xtc_threshold = 0.100, "
            "typical_p = 1.000, top_n_sigma = -1.000, temp = 0.800",
    buffers=("load_tensors:   CPU_Mapped model buffer size =    44.72 MiB",
             "load_tensors:        CUDA0 model buffer size =   216.14 MiB"),
    kv_mib=0.0, vocab=(5, "0.2032"),
)

CHATS = (Req("/api/chat", 640, 410), Req("/api/chat", 1210, 520), Req("/api/chat", 380, 260),
         Req("/api/chat", 905, 610), Req("/api/chat", 512, 330), Req("/api/chat", 744, 450),
         Req("/api/chat", 1020, 700), Req("/api/chat", 290, 180))
"""The chat requests, in order; a knowledge search (an embedding) comes before every chat but the first and the
seventh, and an eight-minute pause before the seventh."""
SEARCH_BEFORE = {2, 3, 4, 5, 6, 8}
PAUSE_BEFORE = 7


def evict_by_count(log: Log, t: float, victim: Runner) -> float:
    """The loaded-model cap is reached: the idle runner is unloaded to make room. The DEBUG `max runners
    achieved` line (reference/ollama-formats.md §5.2, `runner_count=N`; its source line is not checked), then
    the victim lines of 012:3-4 and the unload chain of the demo's `stop`."""
    log.slog(t, "DEBUG", "sched.go:1679", "max runners achieved, unloading one to make room", ("runner_count", 1))
    log.slog(t, "DEBUG", "sched.go:1686", "found an idle runner to unload", *victim.group())
    log.slog(t, "DEBUG", "sched.go:339", "resetting model to expire immediately to make room", *victim.group(),
             ("refCount", 0))
    t = stop(log, t + 0.001, victim, converged=0.31)
    log.slog(t, "DEBUG", "sched.go:356", "unload completed", *victim.group(unloaded=True))
    return t + 0.001


def embed(log: Log, runner: Runner, t: float, arrived: float, warm: bool) -> float:
    """One `/api/embed` call: its GIN line (039:1 shape) and the runner's idle timer (049:3-6)."""
    t_end = t + 0.038
    if warm:
        log.slog(t + 0.003, "DEBUG", "sched.go:1382", "evaluating already loaded", ("model", runner.model.blob))
    log.gin(t_end, 200, t_end - arrived, "POST", "/api/embed")
    log.slog(t_end + 0.001, "DEBUG", "sched.go:394", "runner with non-zero duration has gone idle, adding timer",
             *runner.group(), ("duration", "5m0s"))
    log.slog(t_end + 0.001, "DEBUG", "sched.go:412", "after processing request finished event", *runner.group(),
             ("refCount", 0))
    return t_end


def build(after: bool) -> str:
    log = Log()
    startup(log, 0.412)
    chat: Runner | None = None
    embedder: Runner | None = None
    pid = 3100
    t = 60.0
    for i, q in enumerate(CHATS, 1):
        if i == PAUSE_BEFORE:
            if not after and chat is not None:
                # Five idle minutes after the last request the keep-alive timer unloads qwen3:8b (before only).
                keep_alive_expiry(log, t + 300.001, chat)
                chat = None
            t += 480.0
        if i in SEARCH_BEFORE:
            arrived = t
            if embedder is None:
                if chat is not None and not after:
                    t = evict_by_count(log, t + 0.004, chat)
                    chat = None
                pid += 1
                embedder, ready = load(log, t + 0.004, EMBED, pid, 41000 + pid, 1.12)
                assert embedder is not None
                t = embed(log, embedder, ready, arrived, warm=False)
            else:
                t = embed(log, embedder, t, arrived, warm=True)
            t += 6.0
        arrived = t
        warm = chat is not None
        if chat is None:
            if embedder is not None and not after:
                t = evict_by_count(log, t + 0.004, embedder)
                embedder = None
            pid += 1
            chat, t = load(log, t + 0.004, QWEN3, pid, 40000 + pid, 4.17)
            assert chat is not None
        t = serve(log, chat, t, q, arrived=arrived, warm=warm)
        t += 35.0
    text = log.render()
    if after:
        text = (text.replace("OLLAMA_KEEP_ALIVE:5m0s", "OLLAMA_KEEP_ALIVE:30m0s")
                .replace("OLLAMA_MAX_LOADED_MODELS:2", "OLLAMA_MAX_LOADED_MODELS:3")
                .replace("duration=5m0s", "duration=30m0s")
                .replace("2026-11-28", "2026-11-29").replace("2026/11/28", "2026/11/29"))
    else:
        text = text.replace("OLLAMA_MAX_LOADED_MODELS:2", "OLLAMA_MAX_LOADED_MODELS:1")
    return text


def write(out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = out_dir / "before.log", out_dir / "after.log"
    for path, after in zip(paths, (False, True), strict=True):
        path.write_text(build(after), encoding="utf-8", newline="\n")
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Write the synthetic before/after pair of Ollama logs.")
    ap.add_argument("out_dir", type=Path)
    write(ap.parse_args(argv).out_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
