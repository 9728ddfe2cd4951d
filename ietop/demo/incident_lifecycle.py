"""The server's and the runners' lines of the demo incident (``make_incident.py``): startup, a model's
load, its stop and an eviction. Each template group cites the real line its shape is copied from
(``NNN:line`` in ``fixtures/ollama/``) or the Ollama v0.32.13 source, as make_incident.py explains.
"""

from __future__ import annotations

from ietop.demo.incident_parts import (
    BATCH,
    GPU_FREE_GIB,
    GPU_ID,
    GPU_MIN_GIB,
    GPU_TOTAL_GIB,
    LIB,
    N_KEEP,
    OLLAMA_HOME,
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
def slot_prefix(func: str, slot: int, task: int) -> str:
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
            *(slot_prefix("load_model", s, -1) + f"new slot, n_ctx = {model.num_ctx}" for s in range(model.parallel)),
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
