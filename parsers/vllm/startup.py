"""vLLM start-up messages → facts (reference/vllm-formats.md §2). Stateless: `parsers.vllm.log` turns the facts
into `StartupFact` events and the signals (load start, engine ready, listen address, a new server, era
evidence) into the events and state they imply.

Keys beyond those `events.StartupFact` lists, for numbers the logs print and nothing else carries:
``checkpoint_gib`` (the weights' size on disk, `Checkpoint size: X GiB`, 0.32 on every backend),
``profile_s`` (memory profiling), ``compile_s`` (torch.compile total), ``dynamo_s``, ``cudagraph_s`` and
``cudagraph_gib`` (graph capture), ``total_memory_gib`` / ``memory_utilization`` / ``usable_memory_gib``
(V0's memory budget line).
"""

from __future__ import annotations

import re

Fact = tuple[str, "float | str"]

# Signals: keys starting with "_" are for the parser, not StartupFact events.
LOAD_START = "_load_start"  # value: the model path or name
ENGINE_READY = "_engine_ready"  # value: the init engine seconds
LISTEN = "_listen"  # value: the URL
NEW_SERVER = "_new_server"  # the API server's first lines: a (re)start
ERA = "_era"  # value: 1 V0, 2 V1, 3 V1 0.32+

_NUM = r"(-?\d+(?:\.\d+)?)"
_CONFIG_RE = re.compile(r"Initializing an? (V1 )?LLM engine \(v?([^)\s]+)\) with config: ")
_CONFIG_MODEL_RE = re.compile(r"\bmodel='([^']*)'")
_CONFIG_SERVED_RE = re.compile(r"\bserved_model_name=(\[[^\]]*\]|[^,\s]+)")
_CONFIG_MAX_LEN_RE = re.compile(r"\bmax_seq_len=(\d+)")
_API_VERSION_RE = re.compile(r"vLLM API server version (\S+)")
_BANNER_VERSION_RE = re.compile(r"\bversion\s+(\d[\w.+-]*)")
_BANNER_GLYPHS = frozenset("█▄▀")
_MAX_LEN_RE = re.compile(r"Using max model len (\d+)")
_LOAD_START_RE = re.compile(r"Starting to load model (.+?)(?:\.\.\.)?\s*")
_WEIGHTS_RE = re.compile(rf"Loading weights took {_NUM} seconds")
_V0_WEIGHTS_RE = re.compile(rf"Loading model weights took {_NUM} GB")
_MODEL_LOADING_RE = re.compile(rf"Model loading took {_NUM} GiB(?: memory)? and {_NUM} seconds")
_PROFILE_TIME_RE = re.compile(rf"Memory profiling takes {_NUM} seconds")
_BUDGET_RE = re.compile(rf"total_gpu_memory \({_NUM} ?GiB\) x gpu_memory_utilization \({_NUM}\) = {_NUM} ?GiB")
_PROFILE_SPLIT_RE = re.compile(rf"model weights take {_NUM} ?GiB;.{{0,400}}?reserved for KV Cache is {_NUM} ?GiB")
_PROFILE_RESULTS_RE = re.compile(rf"Memory profiling results: .{{0,2000}}?\bkv_cache_size={_NUM} ?GiB")
_AVAILABLE_RE = re.compile(rf"Available KV cache memory: {_NUM} GiB")
_CHECKPOINT_RE = re.compile(rf"Checkpoint size: {_NUM} GiB")
_CPU_KV_RE = re.compile(rf"Explicitly set \({_NUM}/{_NUM}\) GiB for KV cache")
_BLOCKS_RE = re.compile(r"# (\w+) blocks: (\d+)(?:, # CPU blocks: (\d+))?")
_KV_SIZE_RE = re.compile(r"KV cache size: ([\d,]+) tokens")
_CONCURRENCY_RE = re.compile(rf"Maximum concurrency for ([\d,]+) tokens per request: {_NUM}x")
# Bounded: with `.*?` every "init engine (" scanned to the end of the line for a ") took N", so a line of a
# thousand glued records without a readable number took 73 s (bench/fuzz_campaign.py, a 1 MiB line).
_INIT_ENGINE_RE = re.compile(rf"init engine \([^()]{{0,200}}\) took {_NUM} ?(seconds|s)\b")
_NUM_BLOCKS_RE = re.compile(r"num_gpu_blocks is: (\d+)")
_OVERRIDE_RE = re.compile(r"Overriding num_gpu_blocks=\d+ with num_gpu_blocks_override=(\d+)")
_COMPILE_RE = re.compile(rf"torch\.compile takes {_NUM} s in total")
_DYNAMO_RE = re.compile(rf"Dynamo bytecode transform time: {_NUM} s")
_GRAPHS_RE = re.compile(rf"Graph capturing finished in {_NUM} secs?, took {_NUM} GiB")
_LISTEN_RE = re.compile(r"Starting vLLM (?:API )?server(?: \d+)? on (\S+)")


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _served(text: str) -> str:
    """`tinyllm` or `['a', 'b']` (several aliases: the first is the one metrics label) → the name."""
    if text.startswith("["):
        text = text[1:-1].split(",")[0].strip()
    return text.strip("'\"")


def _config(msg: str, m: re.Match[str]) -> list[Fact]:
    facts: list[Fact] = [(ERA, 2.0 if m.group(1) else 1.0), ("version", m.group(2))]
    rest = msg[m.end():]
    served = _CONFIG_SERVED_RE.search(rest)
    model = _CONFIG_MODEL_RE.search(rest)
    # The name clients and /metrics use; the model path only when no alias was set (then they are equal).
    if served is not None and _served(served.group(1)) not in ("", "None"):
        facts.append(("served_model", _served(served.group(1))))
    elif model is not None:
        facts.append(("served_model", model.group(1)))
    if (ml := _CONFIG_MAX_LEN_RE.search(rest)) is not None:
        facts.append(("max_model_len", int(ml.group(1))))
    return facts


def startup_facts(msg: str) -> list[Fact] | None:
    """The facts one start-up message states, or None when it is not a start-up message. Checked by a
    plain substring first: most messages are none of these, and a substring test is far cheaper."""
    if "LLM engine (" in msg and (m := _CONFIG_RE.match(msg)) is not None:
        return _config(msg, m)
    if "KV cache size: " in msg and (m := _KV_SIZE_RE.search(msg)) is not None:
        facts: list[Fact] = [(ERA, 2.0), ("kv_cache_tokens", _int(m.group(1)))]
        if (c := _CONCURRENCY_RE.search(msg, m.end())) is not None:
            # 0.32 merged the concurrency line into this one.
            facts += [(ERA, 3.0), ("max_concurrency", float(c.group(2))),
                      ("max_concurrency_tokens", _int(c.group(1)))]
        return facts
    if "Maximum concurrency for " in msg and (m := _CONCURRENCY_RE.search(msg)) is not None:
        return [("max_concurrency", float(m.group(2))), ("max_concurrency_tokens", _int(m.group(1)))]
    if "init engine (" in msg and (m := _INIT_ENGINE_RE.search(msg)) is not None:
        facts = [("init_engine_s", float(m.group(1))), (ENGINE_READY, float(m.group(1)))]
        return [*facts, (ERA, 3.0)] if m.group(2) == "s" else facts
    if "Starting to load model " in msg and (m := _LOAD_START_RE.fullmatch(msg)) is not None:
        return [(LOAD_START, m.group(1))]
    if "took" in msg:
        if (m := _WEIGHTS_RE.search(msg)) is not None:
            return [(ERA, 2.0), ("weights_load_s", float(m.group(1)))]
        if (m := _MODEL_LOADING_RE.search(msg)) is not None:
            return [(ERA, 2.0), ("model_memory_gib", float(m.group(1))), ("model_load_s", float(m.group(2)))]
        if (m := _V0_WEIGHTS_RE.search(msg)) is not None:
            # V0 printed "GB" for a value it had divided by 2**30.
            return [("model_memory_gib", float(m.group(1)))]
        if (m := _GRAPHS_RE.search(msg)) is not None:
            return [("cudagraph_s", float(m.group(1))), ("cudagraph_gib", float(m.group(2)))]
    if "Checkpoint size: " in msg and (m := _CHECKPOINT_RE.search(msg)) is not None:
        # The weights' safetensors on disk (0.32, every backend): the CPU backend prints no other weights size.
        return [("checkpoint_gib", float(m.group(1)))]
    if "KV cache memory: " in msg and (m := _AVAILABLE_RE.search(msg)) is not None:
        return [("kv_available_gib", float(m.group(1)))]
    if "for KV cache" in msg and (m := _CPU_KV_RE.search(msg)) is not None:
        return [("kv_available_gib", float(m.group(1)))]
    if "blocks: " in msg and (m := _BLOCKS_RE.search(msg)) is not None:
        facts = [(ERA, 1.0), ("gpu_blocks", int(m.group(2)))]
        return [*facts, ("cpu_blocks", int(m.group(3)))] if m.group(3) else facts
    if "num_gpu_blocks" in msg and ((m := _OVERRIDE_RE.search(msg)) is not None
                                    or (m := _NUM_BLOCKS_RE.search(msg)) is not None):
        return [("gpu_blocks", int(m.group(1)))]
    if "Memory profiling" in msg:
        if (m := _PROFILE_TIME_RE.search(msg)) is not None:
            return [("profile_s", float(m.group(1)))]
        if (m := _PROFILE_RESULTS_RE.search(msg)) is not None:
            return [("kv_available_gib", float(m.group(1)))]
    if "total_gpu_memory (" in msg and (m := _BUDGET_RE.search(msg)) is not None:
        return [("total_memory_gib", float(m.group(1))), ("memory_utilization", float(m.group(2))),
                ("usable_memory_gib", float(m.group(3)))]
    if "model weights take " in msg and (m := _PROFILE_SPLIT_RE.search(msg)) is not None:
        return [("model_memory_gib", float(m.group(1))), ("kv_available_gib", float(m.group(2)))]
    if "torch.compile takes" in msg and (m := _COMPILE_RE.search(msg)) is not None:
        return [("compile_s", float(m.group(1)))]
    if "Dynamo bytecode" in msg and (m := _DYNAMO_RE.search(msg)) is not None:
        return [("dynamo_s", float(m.group(1)))]
    if "Using max model len " in msg and (m := _MAX_LEN_RE.match(msg)) is not None:
        return [("max_model_len", int(m.group(1)))]
    if "vLLM " in msg:
        if (m := _LISTEN_RE.match(msg)) is not None:
            return [(LISTEN, m.group(1))]
        if (m := _API_VERSION_RE.match(msg)) is not None:
            return [(NEW_SERVER, ""), ("version", m.group(1))]
    if "version" in msg and not _BANNER_GLYPHS.isdisjoint(msg) and (m := _BANNER_VERSION_RE.search(msg)) is not None:
        return [(NEW_SERVER, ""), ("version", m.group(1))]
    return None
