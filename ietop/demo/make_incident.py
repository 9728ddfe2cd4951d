"""Write `ietop/demo/incident.log`, the bundled demo incident that `ietop demo` replays.

One Ollama v0.32 server log (the llama-server runner era, OLLAMA_DEBUG=1 as in the era's fixtures 001
and 012), about twelve minutes of 2026-11-28 (14:00-14:12 UTC), in which every dashboard panel has
something to show:

- 14:00:00 startup: `server config` claims OLLAMA_CONTEXT_LENGTH:8192 OLLAMA_NUM_PARALLEL:2
  OLLAMA_MAX_LOADED_MODELS:2 OLLAMA_KEEP_ALIVE:5m0s; version and listen lines; one 24 GiB GPU.
- 14:01:12 the first chat cold-loads qwen3:8b; the client asks for num_ctx 4096, so the launch says
  `-c 8192 -np 2` (4096 tokens per slot, not the 8192 the environment claims); a second chat arrives
  during the load and waits for it.
- 14:01:33-14:02:57 chats (one continues a conversation from the prompt cache, one writes a 2,870-token
  answer), and a batch summarizer whose documents are truncated to fit the 4096-token slot.
- 14:03:05 an IDE agent asks for gemma3:27b: it is predicted not to fit next to qwen3:8b, qwen3:8b is
  evicted, and the agent's 10 s timeout gives up during the load (499; the load is aborted).
- 14:03:18 the same prompt again from the chat UI: gemma3:27b loads in 12.4 s and answers (31 s).
- 14:05:40 the summarizer needs qwen3:8b again: gemma3:27b is evicted and qwen3:8b reloads (the thrash).
- 14:07 the last request; 14:12 the keep-alive timer unloads qwen3:8b.

The log is synthetic but derived: each line comes from a template whose shape is copied from a real line
in `fixtures/ollama/` (cited as `NNN:line` by each template group; the files are listed in README.md) or,
where the fixture corpus holds no example of that message in this era, from the Ollama v0.32.13 source
the format reference was checked against (cited as `ollama v0.32.13 file.go:N`). Models, sizes, times
and token counts are invented. Nothing is random: the same script writes the same bytes.

    python ietop/demo/make_incident.py [--out PATH]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from ietop.demo.incident_lifecycle import evict, load, slot_prefix, startup, stop
from ietop.demo.incident_parts import BATCH, DEFAULT_OUT, GEMMA3, N_KEEP, QWEN3, Log, Runner


# -- requests ----------------------------------------------------------------------------------------
@dataclass
class Req:
    """One inference request: what the client sent and how the runner served it."""

    path: str
    prompt: int
    """Tokens llama-server is given (after any truncation)."""
    output: int
    slot: int = 0
    cached: int = 0
    """Prefix tokens reused from the slot's KV cache (a conversation continued)."""
    truncated_from: int | None = None
    messages: int = 1
    shared: bool = False
    """Another slot decodes at the same time (each runs about 10% slower)."""


def serve(log: Log, r: Runner, t: float, q: Req, *, arrived: float | None = None, warm: bool = True,
          idle_after: bool = True, refcount_after: int = 0) -> float:
    """The lines of one request from `t`, when the scheduler hands it a runner, to its GIN line; its
    latency counts from `arrived` (default `t`: no wait). `warm`: the runner was already loaded. Returns
    the time of the GIN line."""
    m = r.model
    if warm:
        # Per-request scheduler DEBUG line: ollama v0.32.13 sched.go:1382 (`evaluating already loaded`,
        # model=<blob>), same attribute shape as 013:2.
        log.slog(t + 0.003, "DEBUG", "sched.go:1382", "evaluating already loaded", ("model", m.blob))
    if q.path == "/api/generate":
        # ollama v0.32.13 llama_server.go:1527 (prompt_len in characters of the rendered prompt).
        chars = round((q.truncated_from or q.prompt) * 4.13)
        log.slog(t + 0.011, "DEBUG", "llama_server.go:1527", "llama-server completion request", ("media", 0),
                 ("prompt_len", chars))
    else:
        log.slog(t + 0.011, "DEBUG", "llama_server.go:1880", "llama-server chat request", ("messages", q.messages),
                 ("tools", 0))
    if q.truncated_from is not None:
        # 066:1 / 067:3 (`truncating input prompt limit= prompt= keep= new=`, runner.go there); in v0.32.13
        # llama_server.go:315 with the context-shift limit num_ctx - (num_ctx - keep) / 2.
        log.slog(t + 0.046, "WARN", "llama_server.go:315", "truncating input prompt", ("limit", q.prompt),
                 ("prompt", q.truncated_from), ("keep", N_KEEP), ("new", q.prompt))
    task = r.next_task
    r.next_task += 1
    s = q.slot
    t1 = t + 0.052
    lines: list[str] = []
    if q.cached:
        # Cache reuse (reference §6.3, llama-server `get_availabl` line).
        sim = q.cached / q.prompt
        lines.append(slot_prefix("get_availabl", s, -1)
                     + f"selected slot by LCP similarity, sim_best = {sim:.3f} (> 0.100 thold), f_keep = 1.000")
    # Per-request sampler block and task lines: 019:1-10.
    lines += [
        slot_prefix("launch_slot_", s, -1) + "sampler chain: logits -> penalties -> ?dry -> ?top-n-sigma -> top-k "
        "-> ?typical -> top-p -> ?min-p -> ?xtc -> ?temp-ext -> dist ",
        slot_prefix("launch_slot_", s, -1) + "sampler params: ",
        "        repeat_last_n = 64, repeat_penalty = 1.000, frequency_penalty = 0.000, presence_penalty = 0.000",
        "        dry_multiplier = 0.000, dry_base = 1.750, dry_allowed_length = 2, dry_penalty_last_n = 64",
        f"        {m.sampler}",
        "        mirostat = 0, mirostat_lr = 0.100, mirostat_ent = 5.000, adaptive_target = -1.000, "
        "adaptive_decay = 0.900",
        slot_prefix("launch_slot_", s, task) + "processing task, is_child = 0",
        slot_prefix("operator()", s, task) + f"new prompt, n_ctx_slot = {m.num_ctx}, n_keep = {N_KEEP}, "
        f"task.n_tokens = {q.prompt}",
    ]
    # Prompt processing in batches of -b: 019:9-13.
    for done in range(q.cached, q.prompt, BATCH):
        lines.append(slot_prefix("operator()", s, task) + f"cached n_tokens = {done}, memory_seq_rm [{done}, end)")
    log.raw(t1, *lines)
    # Speeds: small batches under-use the GPU, a fuller KV cache slows both phases; a deterministic
    # +-2% wobble keeps the figures from repeating.
    evaluated = q.prompt - q.cached
    wobble = 1.0 + ((task * 7919 + q.prompt * 31 + q.output) % 41 - 20) / 1000.0
    pp = m.pp_rate * min(1.0, 0.6 + evaluated / 1200) * (1 - 0.2 * (q.cached + evaluated / 2) / m.num_ctx)
    prompt_ms = evaluated / (pp * wobble) * 1000.0
    tg = m.tg_rate * (1 - 0.15 * (q.prompt + q.output / 2) / m.num_ctx) * (0.9 if q.shared else 1.0)
    eval_ms = q.output / (tg * wobble) * 1000.0
    t2 = t1 + (prompt_ms + eval_ms) / 1000.0
    # print_timing (three prefixed lines of the current llama-server; prefix 019:12, format reference §6.3)
    # and the slot release / idle lines (reference §6.3).
    end_lines = [
        slot_prefix("print_timing", s, task) + f"prompt eval time = {prompt_ms:10.2f} ms / {evaluated:5d} tokens "
        f"({prompt_ms / evaluated:8.2f} ms per token, {evaluated / prompt_ms * 1000:8.2f} tokens per second)",
        slot_prefix("print_timing", s, task) + f"       eval time = {eval_ms:10.2f} ms / {q.output:5d} tokens "
        f"({eval_ms / q.output:8.2f} ms per token, {q.output / eval_ms * 1000:8.2f} tokens per second)",
        slot_prefix("print_timing", s, task) + f"      total time = {prompt_ms + eval_ms:10.2f} ms / "
        f"{evaluated + q.output:5d} tokens",
        slot_prefix("release", s, task) + f"stop processing: n_tokens = {q.prompt + q.output}, truncated = 0",
    ]
    if idle_after:
        end_lines.append("srv  update_slots: all slots are idle")
    log.raw(t2, *end_lines)
    t_end = t2 + 0.004
    log.gin(t_end, 200, t_end - (t if arrived is None else arrived), "POST", q.path)
    # After the access line: 049:3-6 (`context for request finished`, the keep-alive timer, refCount);
    # the runner-group form of v0.32.13 sched.go:489/394/412. The request that waited for the load ends
    # through the load's own goroutine (sched.go:748, no attributes; 013:5).
    if warm:
        log.slog(t_end + 0.001, "DEBUG", "sched.go:489", "context for request finished", *r.group())
    else:
        log.slog(t_end + 0.001, "DEBUG", "sched.go:748", "context for request finished")
    if refcount_after == 0:
        log.slog(t_end + 0.001, "DEBUG", "sched.go:394", "runner with non-zero duration has gone idle, adding timer",
                 *r.group(), ("duration", "5m0s"))
    log.slog(t_end + 0.001, "DEBUG", "sched.go:412", "after processing request finished event", *r.group(),
             ("refCount", refcount_after))
    return t_end


def ollama_ps(log: Log, t: float, head_s: float, ps_s: float) -> None:
    # `ollama ps`: HEAD / then GET /api/ps (007:8-9).
    log.gin(t, 200, head_s, "HEAD", "/")
    log.gin(t + 0.002, 200, ps_s, "GET", "/api/ps")


def keep_alive_expiry(log: Log, t: float, runner: Runner) -> None:
    # ollama v0.32.13 sched.go:396 `timer expired, expiring to unload`, then the expired-runner chain.
    log.slog(t, "DEBUG", "sched.go:396", "timer expired, expiring to unload", *runner.group())
    t = stop(log, t, runner, converged=0.49)
    log.slog(t + 0.001, "DEBUG", "sched.go:362", "ignoring unload event with no pending requests")


# -- the incident ------------------------------------------------------------------------------------
def build() -> str:
    """The whole log. Slots follow llama-server's choice: a continued conversation goes back to the slot
    that caches it (LCP similarity), a new one to the least recently used slot."""
    log = Log()
    startup(log, 0.412)
    log.gin(31.204, 200, 0.000227, "GET", "/api/version")  # the chat UI connects
    log.gin(31.219, 200, 0.004913, "GET", "/api/tags")

    # 14:01:12 the first chat cold-loads qwen3:8b; a second chat (14:01:14) waits for the load too.
    t = 72.180
    a, ready = load(log, t + 0.004, QWEN3, 2318, 40031, 4.17)
    assert a is not None
    serve(log, a, ready, Req("/api/chat", 412, 286, slot=0, shared=True), arrived=t, warm=False,
          idle_after=False, refcount_after=1)
    serve(log, a, ready + 0.002, Req("/api/chat", 1186, 655, slot=1, shared=True), arrived=74.050)

    # 14:01:33-14:02:55 chats, the summarizer's truncated documents, a 2,870-token answer.
    serve(log, a, 93.412, Req("/api/chat", 742, 389, slot=0, cached=698, messages=3))
    serve(log, a, 107.030, Req("/api/chat", 318, 152, slot=1))
    serve(log, a, 125.118, Req("/api/generate", 2050, 412, slot=0, truncated_from=6112))
    serve(log, a, 139.604, Req("/api/generate", 2050, 377, slot=1, truncated_from=9840))
    serve(log, a, 151.227, Req("/v1/chat/completions", 905, 2870, slot=0))

    # 14:03:05 the IDE agent wants gemma3:27b: qwen3:8b is evicted; the agent's 10 s timeout ends the load.
    t = 185.100
    t_load = evict(log, t + 0.004, a, GEMMA3)
    _, t_gone = load(log, t_load, GEMMA3, 2407, 35917, 12.41, abort_at=t + 10.002)
    log.gin(t_gone + 0.002, 499, t_gone + 0.002 - t, "POST", "/api/chat")

    # 14:03:18 the chat UI sends it again: gemma3:27b loads in 12.4 s and answers.
    t = 198.412
    b, ready = load(log, t + 0.004, GEMMA3, 2433, 43589, 12.41)
    assert b is not None
    serve(log, b, ready, Req("/api/chat", 1850, 640, slot=0), arrived=t, warm=False)
    serve(log, b, 246.083, Req("/api/chat", 2575, 410, slot=0, cached=2490, messages=3))
    ollama_ps(log, 260.511, 0.000038512, 0.000402187)
    serve(log, b, 280.275, Req("/api/chat", 620, 920, slot=1))
    serve(log, b, 312.640, Req("/api/chat", 312, 180, slot=0))

    # 14:05:40 the summarizer needs qwen3:8b again: gemma3:27b is evicted, qwen3:8b reloads (thrash).
    t = 340.305
    t_load = evict(log, t + 0.004, b, QWEN3)
    a, ready = load(log, t_load, QWEN3, 2519, 39761, 2.86)
    assert a is not None
    serve(log, a, ready, Req("/api/generate", 2050, 395, slot=0, truncated_from=7321), arrived=t, warm=False)
    serve(log, a, 352.480, Req("/api/generate", 2050, 401, slot=1, truncated_from=5321))
    serve(log, a, 364.092, Req("/v1/chat/completions", 530, 214, slot=0))
    serve(log, a, 375.310, Req("/api/chat", 812, 298, slot=0, cached=744, messages=3))
    serve(log, a, 391.006, Req("/api/chat", 1020, 2702, slot=1))
    serve(log, a, 418.455, Req("/api/chat", 233, 96, slot=0))
    last = serve(log, a, 421.870, Req("/api/chat", 391, 164, slot=0, cached=329, messages=3))

    ollama_ps(log, 569.930, 0.000029751, 0.000351096)
    # 14:12 five minutes after the last request the keep-alive timer unloads qwen3:8b.
    keep_alive_expiry(log, last + 300.001, a)
    ollama_ps(log, 741.318, 0.000033384, 0.000118902)
    return log.render()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where to write (default {DEFAULT_OUT})")
    args = ap.parse_args(argv)
    out: Path = args.out
    out.write_text(build(), encoding="utf-8", newline="\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
