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

from ietop.demo.incident_parts import (
    BATCH,
    DEFAULT_OUT,
    GEMMA3,
    GPU_FREE_GIB,
    GPU_ID,
    GPU_MIN_GIB,
    GPU_TOTAL_GIB,
    LIB,
    N_KEEP,
    OLLAMA_HOME,
    QWEN3,
    VERSION,
    Log,
    Model,
    Runner,
    gib,
)


# -- startup -----------------------------------------------------------------------------------------
def _env() -> str:
    # Key set and value formats: ollama v0.32.13 envconfig/config.go:311-371 (fmt %v of each value);
    # the line's shape: 022:1 / 031:1 (there in the pre-v0.7 Go-log envelope, here in slog).
    origins = " ".join(f"{scheme}://{host}{port}" for host in ("localhost", "127.0.0.1", "0.0.0.0")
                       for port in ("", ":*") for scheme in ("http", "https"))
    env = {
        "CUDA_VISIBLE_DEVICES": "", "GGML_VK_VISIBLE_DEVICES": "", "GPU_DEVICE_ORDINAL": "",
        "HIP_VISIBLE_DEVICES": "", "HSA_OVERRIDE_GFX_VERSION": "", "HTTPS_PROXY": "", "HTTP_PROXY": "",
        "LLAMA_ARG_FIT": "", "LLAMA_ARG_FIT_TARGET": "", "NO_PROXY": "", "OLLAMA_CONTEXT_LENGTH": "8192",
        "OLLAMA_DEBUG": "DEBUG", "OLLAMA_DEBUG_LOG_REQUESTS": "false", "OLLAMA_EDITOR": "",
        "OLLAMA_FLASH_ATTENTION": "false", "OLLAMA_GO_TEMPLATE": "true", "OLLAMA_GPU_OVERHEAD": "0",
        "OLLAMA_HOST": "http://127.0.0.1:11434", "OLLAMA_IGPU_ENABLE": "", "OLLAMA_KEEP_ALIVE": "5m0s",
        "OLLAMA_KV_CACHE_TYPE": "", "OLLAMA_LLM_LIBRARY": "", "OLLAMA_LOAD_TIMEOUT": "5m0s",
        "OLLAMA_MAX_LOADED_MODELS": "2", "OLLAMA_MAX_QUEUE": "512", "OLLAMA_MAX_TRANSFER_STREAMS": "4",
        "OLLAMA_MODELS": f"{OLLAMA_HOME}/models", "OLLAMA_NOHISTORY": "false", "OLLAMA_NOPRUNE": "false",
        "OLLAMA_NO_CLOUD": "false", "OLLAMA_NUM_PARALLEL": "2",
        "OLLAMA_ORIGINS": f"[{origins} app://* file://* tauri://* vscode-webview://* vscode-file://*]",
        "OLLAMA_REMOTES": "[ollama.com]", "OLLAMA_SCHED_SPREAD": "false", "OLLAMA_VULKAN": "true",
        "ROCR_VISIBLE_DEVICES": "", "http_proxy": "", "https_proxy": "", "no_proxy": "",
    }
    return "map[" + " ".join(f"{k}:{env[k]}" for k in sorted(env)) + "]"


def startup(log: Log, t: float) -> None:
    # server config, cloud, blobs, listen: ollama v0.32.13 routes.go:1933/1935/1990, images.go:912/919;
    # shapes of the blob/listen lines: 022:2-4, 031:2-4.
    log.slog(t, "INFO", "routes.go:1933", "server config", ("env", _env()))
    log.slog(t + 0.001, "INFO", "routes.go:1935", "Ollama cloud disabled: false")
    log.slog(t + 0.004, "INFO", "images.go:912", "total blobs: 14")
    log.slog(t + 0.004, "INFO", "images.go:919", "total unused blobs removed: 0")
    log.slog(t + 0.009, "INFO", "routes.go:1990", f"Listening on 127.0.0.1:11434 (version {VERSION})")
    # GPU discovery (DEBUG bootstrap lines, one `inference compute` per device, the VRAM tier): 001:1-8.
    log.slog(t + 0.010, "INFO", "runner.go:60", "discovering available GPUs...")
    log.slog(t + 0.061, "DEBUG", "runner.go:494", "bootstrap discovery took", ("duration", "50.812377ms"),
             ("OLLAMA_LIBRARY_PATH", f"[{LIB} {LIB}/cuda_v13]"), ("extra_envs", "map[]"))
    log.slog(t + 0.642, "DEBUG", "runner.go:131", "evaluating which, if any, devices to filter out",
             ("initial_count", 1))
    log.slog(t + 0.642, "DEBUG", "runner.go:42", "GPU bootstrap discovery took", ("duration", "632.409118ms"))
    log.slog(t + 0.643, "INFO", "types.go:32", "inference compute", ("id", GPU_ID), ("filter_id", ""),
             ("library", "CUDA"), ("compute", "8.9"), ("name", "CUDA0"), ("description", "NVIDIA GeForce RTX 4090"),
             ("libdirs", "ollama,cuda_v13"), ("driver", "13.0"), ("pci_id", "0000:01:00.0"), ("type", "discrete"),
             ("total", gib(GPU_TOTAL_GIB)), ("available", gib(GPU_FREE_GIB)))
    log.slog(t + 0.643, "INFO", "routes.go:2040", "vram-based default context", ("total_vram", gib(GPU_TOTAL_GIB)),
             ("default_num_ctx", 32768))
    log.slog(t + 2.518, "DEBUG", "model_recommendations.go:225", "model recommendations refreshed", ("count", 5))
    log.slog(t + 2.531, "DEBUG", "model_recommendations.go:302", "persisted model recommendations snapshot",
             ("path", f"{OLLAMA_HOME}/cache/model-recommendations.json"), ("count", 5))


# -- loads and unloads ------------------------------------------------------------------------------
def _slot_prefix(func: str, slot: int, task: int) -> str:
    # llama-server `slot <func>: id  S | task T | ` (func right-aligned in 12): 019:1-8.
    return f"slot {func:>12}: id {slot:2d} | task {task} | "


def load(log: Log, t: float, model: Model, pid: int, port: int, seconds: float,
         abort_at: float | None = None) -> tuple[Runner | None, float]:
    """From the scheduler picking the model up (the first model on the GPU) to `llama-server started`.
    Returns the runner and when it is ready. With `abort_at`, the client goes away at that time and the
    load is aborted (no runner)."""
    # `loading first model`: 013:2 (DEBUG, model=<blob>), ollama v0.32.13 sched.go:299.
    log.slog(t, "DEBUG", "sched.go:299", "loading first model", ("model", model.blob))
    t += 0.128
    # `using llama-server for model` and the launch command: 018:4-5 (same flags, this model's -c/-np).
    log.slog(t, "INFO", "server.go:109", "using llama-server for model", ("model", model.blob))
    cmd = (f"{LIB}/llama-server --model {model.blob} --port {port} --host 127.0.0.1 --no-webui --offline "
           f"-c {model.num_ctx * model.parallel} -np {model.parallel} --log-verbosity 4 --no-log-prefix "
           f"--no-log-timestamps --flash-attn auto -b {BATCH} -ub {BATCH} --context-shift --keep {N_KEEP}")
    t += 0.001
    log.slog(t, "INFO", "llama_server.go:431", "starting llama-server", ("cmd", cmd))
    t0 = t
    # `system memory` / `gpu memory`: 006:1-2 (ollama v0.32.13 sched.go:613/620).
    log.slog(t0 + 0.002, "INFO", "sched.go:613", "system memory", ("total", "62.7 GiB"), ("free", "55.1 GiB"),
             ("free_swap", "8.0 GiB"))
    log.slog(t0 + 0.002, "INFO", "sched.go:620", "gpu memory", ("id", GPU_ID), ("library", "CUDA"),
             ("available", gib(GPU_FREE_GIB - GPU_MIN_GIB)), ("free", gib(GPU_FREE_GIB)), ("minimum", gib(GPU_MIN_GIB)),
             ("overhead", "0 B"))
    # Waiting for the runner: 016:1-2 (there the `llama runner` wording of v0.2x; v0.32.13
    # llama_server.go:1046/1293/1348 say `llama-server`).
    log.slog(t0 + 0.003, "INFO", "llama_server.go:1046", "loading model via llama-server", ("model", model.blob))
    log.slog(t0 + 0.003, "INFO", "llama_server.go:1293", "waiting for llama-server to start responding")
    log.slog(t0 + 0.005, "INFO", "llama_server.go:1348", "waiting for llama-server to become available",
             ("status", "llm server not responding"))
    # Raw llama-server load output, no prefix or timestamp: device and vocabulary 003:1-12, print_info
    # 003:13-29.
    log.raw(t0 + 0.21, "llama_prepare_model_devices: using device CUDA0 (NVIDIA GeForce RTX 4090) "
                       f"(0000:01:00.0) - {round(GPU_FREE_GIB * 1024)} MiB free")
    log.raw(t0 + 0.29, "load: 0 unused tokens", "load: printing all EOG tokens:",
            *(f"load:   - {tok}" for tok in model.eog), f"load: special tokens cache size = {model.vocab[0]}",
            f"load: token to piece cache size = {model.vocab[1]} MB", *(f"print_info: {kv}" for kv in model.meta))
    log.slog(t0 + 0.41, "INFO", "llama_server.go:1348", "waiting for llama-server to become available",
             ("status", "llm server loading model"))
    # Tensor placement (the `offloaded X/Y layers to GPU` line: 030:13, llm_load_tensors there; reference
    # §4.2 for the load_tensors prefix and the buffer-size lines Ollama itself parses).
    log.raw(t0 + 0.43, "load_tensors: loading model tensors, this can take a while... (mmap = true, direct_io = false)",
            "load_tensors: offloading output layer to GPU",
            f"load_tensors: offloading {model.layers - 2} repeating layers to GPU",
            f"load_tensors: offloaded {model.layers}/{model.layers} layers to GPU", *model.buffers)
    if abort_at is not None:
        # The client gave up during the load: 051:1-3 (v0.5: `server finished loading`, then ERROR);
        # v0.32.13 llama_server.go:1299 says `llama-server finished loading`, and since Load() waits in
        # the scheduler the failure is reported by sched.go:641 `Load failed`, then the process is killed
        # (llama_server.go:2550-2558).
        log.slog(abort_at, "WARN", "llama_server.go:1299",
                 "client connection closed before llama-server finished loading, aborting load")
        log.slog(abort_at, "INFO", "sched.go:641", "Load failed", ("model", model.blob),
                 ("error", "timed out waiting for llama-server to start: context canceled"))
        log.slog(abort_at + 0.001, "DEBUG", "llama_server.go:2550", "stopping llama-server", ("pid", pid))
        log.slog(abort_at + 0.001, "DEBUG", "llama_server.go:2555", "waiting for llama-server to exit", ("pid", pid))
        log.slog(abort_at + 0.187, "DEBUG", "llama_server.go:2558", "llama-server stopped", ("pid", pid))
        return None, abort_at + 0.187
    # Context and slots: 055:2-4 (`llama_context: n_ctx`, `n_ctx_seq`, the n_ctx_train warning).
    ctx = model.num_ctx * model.parallel
    train = next(int(kv.split("=")[1]) for kv in model.meta if kv.startswith("n_ctx_train"))
    log.raw(t0 + seconds - 0.31, "llama_context: constructing llama_context",
            f"llama_context: n_seq_max     = {model.parallel}", f"llama_context: n_ctx         = {ctx}",
            f"llama_context: n_ctx_seq     = {model.num_ctx}", f"llama_context: n_batch       = {BATCH}",
            f"llama_context: n_ubatch      = {BATCH}", "llama_context: flash_attn    = auto",
            f"llama_context: n_ctx_seq ({model.num_ctx}) < n_ctx_train ({train}) -- the full capacity of the "
            "model will not be utilized",
            "llama_context:  CUDA_Host  output buffer size =     1.19 MiB",
            f"llama_kv_cache:      CUDA0 KV buffer size = {model.kv_mib:8.2f} MiB",
            "llama_context:      CUDA0 compute buffer size =   304.75 MiB")
    # Slot set-up and readiness: the `slot <func>: id  S | task -1 |` shape of 019:1; `srv  update_slots: all
    # slots are idle` and the `main:` lines as in reference §2.5/§6.3 (no fixture shows them).
    log.raw(t0 + seconds - 0.05, f"srv    load_model: initializing slots, n_slots = {model.parallel}",
            *(_slot_prefix("load_model", s, -1) + f"new slot, n_ctx = {model.num_ctx}" for s in range(model.parallel)),
            "main: model loaded", f"main: server is listening on http://127.0.0.1:{port}",
            "srv  update_slots: all slots are idle")
    # Completion: 015:1-3 / 016:3 (`llama runner started in`, E4) as `llama-server started in` (ollama
    # v0.32.13 llama_server.go:1360), then `loaded runners` (sched.go:728) and DEBUG `finished setting up`
    # with the runner group (sched.go:740; 049:2 is its older `finished setting up runner` form).
    log.slog(t0 + seconds, "INFO", "llama_server.go:1360", f"llama-server started in {seconds:.2f} seconds")
    runner = Runner(model, pid, port)
    log.slog(t0 + seconds + 0.001, "INFO", "sched.go:728", "loaded runners", ("count", 1))
    log.slog(t0 + seconds + 0.001, "DEBUG", "sched.go:740", "finished setting up", *runner.group())
    return runner, t0 + seconds + 0.002


def stop(log: Log, t: float, runner: Runner, *, converged: float) -> float:
    """The expired-runner chain of ollama v0.32.13 sched.go:415-465 (012:3-4 for the runner group):
    the lines after unload() no longer carry the model's name."""
    log.slog(t, "DEBUG", "sched.go:415", "runner expired event received", *runner.group())
    log.slog(t, "DEBUG", "sched.go:430", "got lock to unload expired event", *runner.group())
    log.slog(t, "DEBUG", "sched.go:453", "starting background wait for VRAM recovery", *runner.group())
    log.slog(t + 0.012, "DEBUG", "llama_server.go:2550", "stopping llama-server", ("pid", runner.pid))
    log.slog(t + 0.012, "DEBUG", "llama_server.go:2555", "waiting for llama-server to exit", ("pid", runner.pid))
    log.slog(t + 0.236, "DEBUG", "llama_server.go:2558", "llama-server stopped", ("pid", runner.pid))
    log.slog(t + 0.237, "DEBUG", "sched.go:462", "runner terminated and removed from list, blocking for VRAM recovery",
             *runner.group(unloaded=True))
    t += converged
    free_before = GPU_FREE_GIB - runner.model.size_gib
    log.slog(t, "DEBUG", "sched.go:1487", f"gpu VRAM free memory converged after {converged:.2f} seconds",
             ("free_before", gib(free_before)), ("free_now", gib(GPU_FREE_GIB)), *runner.group(unloaded=True))
    log.slog(t, "DEBUG", "sched.go:465", "sending an unloaded event", *runner.group(unloaded=True))
    return t


def evict(log: Log, t: float, victim: Runner, incoming: Model) -> float:
    """A request for `incoming` while `victim` is resident and idle: predicted not to fit, evict."""
    free = GPU_FREE_GIB - victim.model.size_gib
    # `updated VRAM based on existing loaded models`: 015:5 (ollama v0.32.13 sched.go:1321/1332).
    log.slog(t, "DEBUG", "sched.go:1321", "gpu reported", ("gpu", GPU_ID), ("library", "CUDA"),
             ("available", gib(free)))
    log.slog(t, "INFO", "sched.go:1332", "updated VRAM based on existing loaded models", ("gpu", GPU_ID),
             ("library", "CUDA"), ("total", gib(GPU_TOTAL_GIB)), ("available", gib(free)))
    # The INFO eviction decision and the DEBUG victim lines: 012:2-4.
    t += 0.093
    log.slog(t, "INFO", "sched.go:551", "llama-server model predicted to exceed available memory, evicting",
             ("predicted", gib(incoming.size_gib)), ("predicted_num_ctx", incoming.num_ctx * incoming.parallel),
             ("num_batch", BATCH), ("available", gib(free - GPU_MIN_GIB)), ("gpu_free", gib(free)),
             ("system_free", "55.1 GiB"), ("system_limited", False))
    log.slog(t, "DEBUG", "sched.go:1686", "found an idle runner to unload", *victim.group())
    log.slog(t, "DEBUG", "sched.go:339", "resetting model to expire immediately to make room", *victim.group(),
             ("refCount", 0))
    log.slog(t, "DEBUG", "sched.go:350", "waiting for pending requests to complete and unload to occur",
             *victim.group())
    t = stop(log, t + 0.001, victim, converged=0.74)
    log.slog(t, "DEBUG", "sched.go:356", "unload completed", *victim.group(unloaded=True))
    return t + 0.001


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
        lines.append(_slot_prefix("get_availabl", s, -1)
                     + f"selected slot by LCP similarity, sim_best = {sim:.3f} (> 0.100 thold), f_keep = 1.000")
    # Per-request sampler block and task lines: 019:1-10.
    lines += [
        _slot_prefix("launch_slot_", s, -1) + "sampler chain: logits -> penalties -> ?dry -> ?top-n-sigma -> top-k "
        "-> ?typical -> top-p -> ?min-p -> ?xtc -> ?temp-ext -> dist ",
        _slot_prefix("launch_slot_", s, -1) + "sampler params: ",
        "        repeat_last_n = 64, repeat_penalty = 1.000, frequency_penalty = 0.000, presence_penalty = 0.000",
        "        dry_multiplier = 0.000, dry_base = 1.750, dry_allowed_length = 2, dry_penalty_last_n = 64",
        f"        {m.sampler}",
        "        mirostat = 0, mirostat_lr = 0.100, mirostat_ent = 5.000, adaptive_target = -1.000, "
        "adaptive_decay = 0.900",
        _slot_prefix("launch_slot_", s, task) + "processing task, is_child = 0",
        _slot_prefix("operator()", s, task) + f"new prompt, n_ctx_slot = {m.num_ctx}, n_keep = {N_KEEP}, "
        f"task.n_tokens = {q.prompt}",
    ]
    # Prompt processing in batches of -b: 019:9-13.
    for done in range(q.cached, q.prompt, BATCH):
        lines.append(_slot_prefix("operator()", s, task) + f"cached n_tokens = {done}, memory_seq_rm [{done}, end)")
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
        _slot_prefix("print_timing", s, task) + f"prompt eval time = {prompt_ms:10.2f} ms / {evaluated:5d} tokens "
        f"({prompt_ms / evaluated:8.2f} ms per token, {evaluated / prompt_ms * 1000:8.2f} tokens per second)",
        _slot_prefix("print_timing", s, task) + f"       eval time = {eval_ms:10.2f} ms / {q.output:5d} tokens "
        f"({eval_ms / q.output:8.2f} ms per token, {q.output / eval_ms * 1000:8.2f} tokens per second)",
        _slot_prefix("print_timing", s, task) + f"      total time = {prompt_ms + eval_ms:10.2f} ms / "
        f"{evaluated + q.output:5d} tokens",
        _slot_prefix("release", s, task) + f"stop processing: n_tokens = {q.prompt + q.output}, truncated = 0",
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
