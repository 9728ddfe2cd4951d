#!/usr/bin/env python3
"""Generate a SYNTHETIC vLLM server log for benchmarking ``ietop analyze``.

Not real vLLM output: one busy OpenAI-compatible server (vLLM 0.10.2, V1 engine, one GPU, ``--enable-log-requests``)
over days, built from the line shapes of ``reference/vllm-formats.md``, the real logs in ``fixtures/vllm/`` and
0.10.x logs pasted in public issues (0.10.x is the last release line whose INFO request logging carries the
prompt, so per-request lines are long). In time order: start-ups; uvicorn access lines (health checks every
1-2 s, Prometheus every 5-15 s, ``/v1/models``, the inference POSTs); ``Received``/``Added`` per request; the
10 s engine stats line (DEBUG, so absent, while idle); rare ignored-field warnings, prompt-too-long 400s with
their traceback, unknown-model 404s, client aborts; now and then an engine crash (CUDA OOM, 500s) or a plain
restart. The first line says it is synthetic. Usage: ``python bench/gen_vllm_log.py OUT.log --size 300M --seed 1``.

Design, as in ``gen_ollama_log.py``: deterministic (one ``random.Random(seed)``, no wall clock or hash order in
the output: same seed and size, same bytes); streaming in constant memory (a heap holds the lines decided for
the next minutes of log time, text is written in blocks); fast (a prompt is a slice of a corpus escaped once, a
token id list a slice of one pre-joined string, a timestamp a table lookup).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import heapq
import json
import math
import sys
import time
from array import array
from collections import Counter
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from random import Random
from typing import BinaryIO

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
from gen_ollama_log import HMS, cut_to_fit, parse_size

VERSION = "0.10.2"
# vLLM prints the local wall clock with no zone: the generator's clock is that wall time, read as UTC.
START = dt.datetime(2025, 9, 15, 7, 40, tzinfo=dt.timezone.utc).timestamp()
DAY0 = dt.date(1970, 1, 1)
FLUSH_LINES = 4096  # request lines are long: 4k lines are already a few MB per write()
KINDS = ("label", "startup", "shutdown", "access_health", "access_metrics", "access_models", "access_inference",
         "request_log", "stats", "warning", "error")
LABEL, STARTUP, SHUTDOWN, A_HEALTH, A_METRICS, A_MODELS, A_INFER, REQLOG, STATS, WARN, ERROR = range(len(KINDS))
E_LINE, E_METRICS, E_MODELS, E_STATS, E_SESSION, E_REQ, E_RESTART = range(7)  # heap event kinds
# Sessions (a chat, an agent loop, a batch job) start at this rate per second, shaped by the hour of day:
# ~13 requests a session make ~6k requests a day, and ~80 % of the lines access lines (mostly probes).
SESSION_RATE = 0.0064
HOUR_SHAPE = [0.25 + 1.5 * max(0.0, math.sin(math.pi * (h - 7) / 14)) if 7 <= h <= 21 else 0.25 for h in range(24)]
APP_CLIENTS = ("10.0.3.17", "10.0.3.18", "172.18.0.5", "127.0.0.1")
REASON = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}
SITE = "/usr/local/lib/python3.12/dist-packages/vllm/"
ROUTES = ["/openapi.json GET, HEAD", "/docs GET, HEAD", "/docs/oauth2-redirect GET, HEAD", "/redoc GET, HEAD",
          "/health GET", "/load GET", "/ping POST", "/ping GET", "/tokenize POST", "/detokenize POST", "/v1/models GET",
          "/version GET", "/v1/responses POST", "/v1/responses/{response_id} GET", "/v1/chat/completions POST",
          "/v1/completions POST", "/v1/embeddings POST", "/pooling POST", "/score POST", "/v1/score POST",
          "/rerank POST", "/v1/rerank POST", "/invocations POST", "/metrics GET"]
COMPILATION = ('{"level":3,"use_inductor":true,"cudagraph_mode":1,"use_cudagraph":true,"cudagraph_capture_sizes":['
               + ",".join(map(str, [*range(512, 8, -8), 8, 4, 2, 1])) + '],"max_capture_size":512}')
# Traceback frames `file:line:function:source`: a prompt over the context, and an engine crash.
TOO_LONG_TB = ("entrypoints/openai/serving_chat.py:206:create_chat_completion:) = await self._preprocess_chat(",
               "entrypoints/openai/serving_engine.py:916:_preprocess_chat:prompt_inputs = await self._tokenize_"
               "prompt_input_async(", "entrypoints/openai/serving_engine.py:695:_validate_input:raise ValueError(")
CRASH_TB = ("v1/engine/core.py:711:run_engine_core:engine_core.run_busy_loop()",
            "v1/engine/core.py:764:_process_engine_step:outputs, model_executed = self.step_fn()")
# Prompt words, 256 of them (a random byte picks one); both quote kinds, a backslash, some non-ASCII.
WORDS = ("please summarize explain function request server latency "
         "model token cache memory error report customer invoice ticket deploy cluster python return value list table "
         "query database user account policy document section answer question following context below step result "
         "example output input json field order status date price team meeting notes draft email reply code review "
         "test bug fix log line file path config setting option because however should would must not only also "
         "first then finally we you this be are can on as")
VOCAB = (["the", "a", "to", "of", "and", "in", "is", "for", "that", "with", "it's", "don't", '"status"', '"id"',
          '{"key":1}', "C:\\temp\\out.txt", "café", "数据"] + WORDS.split() * 3)[:256]
SYSTEM = ("You are a helpful assistant.", "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
          "You are a support agent for an internal IT helpdesk. Answer briefly and cite the knowledge base article "
          "when one applies. If you are not sure, say so and suggest who to contact.")
# repo, served name, architecture, max_model_len, weights GiB, KV GiB, KV bytes a token (layers x KV heads x
# head dim x 2 x 2), shards, ChatML template (else Llama 3's), decode tok/s of one stream, prefill tok/s,
# generation-config defaults (repetition_penalty, temperature, top_p, top_k)
MODELS = (("Qwen/Qwen2.5-14B-Instruct", "qwen2.5-14b", "Qwen2ForCausalLM", 32768, 27.52, 41.3, 196608, 8, True, 62.0,
           9000.0, (1.05, 0.7, 0.8, 20)),
          ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b", "LlamaForCausalLM", 65536, 14.99, 53.6, 131072, 4, False,
           98.0, 14000.0, (1.0, 0.6, 0.9, 0)))


@dataclass
class Session:
    ip: str
    port: int
    chat: bool
    left: int
    batch: bool


HeapItem = tuple[float, int, int, str, int, int, "Session | None"]
Active = tuple[float, float, float, float, int, str, bool, str]  # arrival, decode start, end, tok/s, prompt, id, …


class Generator:
    def __init__(self, seed: int, size: int, out: BinaryIO) -> None:
        self.seed, self.size, self.out = seed, size, out
        self.rng = rng = Random(seed)
        self.rand = rng.random
        self.t = START
        self.buf: list[str] = []
        self.written = self.tail_cut_lines = self.seq = self.runs = 0
        self.done = False
        self.count = [0] * len(KINDS)
        self.events: Counter[str] = Counter()
        self.heap: list[HeapItem] = []
        self._md: dict[int, str] = {}
        # Prompt text, escaped once as repr() escapes it (the corpus has both quote kinds, so repr picks '…'
        # and escapes '): a slice between two spaces is then the repr of the slice, no escape being cut.
        words = [VOCAB[b] for b in rng.randbytes(96_000)]
        self.esc = repr("".join(" ".join(words[i:i + 12]).capitalize() + (".\n\n" if b < 26 else ". ")
                                for i, b in zip(range(0, len(words), 12), rng.randbytes(8000), strict=False)))[1:-1]
        # Token ids joined once; `pos[i]` is where id i starts, so n ids are one slice.
        ids = [str(200 + i % 150_000) for i in array("I", rng.randbytes(4 * 70_000))]
        self.ids = ", ".join(ids)
        self.pos = array("l", accumulate((len(i) + 2 for i in ids), initial=0))
        self.pool_prompt = [min(60_000, 16 + int(rng.lognormvariate(math.log(450), 1.1))) for _ in range(4096)]
        self.pool_gen = [1 + int(rng.lognormvariate(math.log(180), 0.9)) for _ in range(4096)]
        self.model = MODELS[0]
        self.hport = 40_000 + rng.randrange(20_000)

    # ------------------------------------------------------------------ output
    def st(self, t: float) -> str:
        """`MM-DD hh:mm:ss` of a log time (vLLM prints no year and no sub-second part)."""
        sec = int(t)
        day = sec // 86400
        md = self._md.get(day)
        if md is None:
            d = DAY0 + dt.timedelta(days=day)
            md = self._md[day] = f"{d.month:02d}-{d.day:02d} "
        return md + HMS[sec - day * 86400]

    def emit(self, text: str, kind: int, n: int = 1) -> None:
        self.buf.append(text)
        self.count[kind] += n

    def rec(self, pfx: str, level: str, src: str, msg: str, kind: int = STARTUP) -> None:
        self.emit(f"{pfx}{level} {self.st(self.t)} [{src}] {msg}", kind)

    def at(self, t: float, ev: int, text: str = "", kind: int = 0, n: int = 1, sess: Session | None = None) -> None:
        self.seq += 1  # tie-breaker: lines at one time keep the order they were decided in
        heapq.heappush(self.heap, (t, self.seq, ev, text, kind, n, sess))

    def line_at(self, t: float, level: str, src: str, msg: str, kind: int = REQLOG) -> None:
        self.at(t, E_LINE, f"{self.api}{level} {self.st(t)} [{src}] {msg}", kind)

    def access(self, ip: str, port: int, method: str, path: str, status: int) -> str:
        return f'{self.api}INFO:     {ip}:{port} - "{method} {path} HTTP/1.1" {status} {REASON[status]}'

    def traceback(self, hdr: str, first: str, frames: tuple[str, ...], exc: str) -> list[str]:
        """A logger.exception record: the prefix repeated on every line, as vLLM's formatter writes it."""
        out = [hdr + first, hdr + "Traceback (most recent call last):"]
        for frame in frames:
            path, no, func, src = frame.split(":", 3)
            out += [f'{hdr}  File "{SITE}{path}", line {no}, in {func}', f"{hdr}    {src}"]
        return [*out, hdr + exc]

    def flush(self) -> None:
        if not self.buf or self.done:
            return
        # per line: an ASCII line encodes as a copy, and a joined block would be widened by its one non-ASCII line
        data = b"\n".join([s.encode() for s in self.buf]) + b"\n"
        self.buf.clear()
        room = self.size - self.written
        if len(data) >= room:
            data, self.tail_cut_lines = cut_to_fit(data, room)
            self.done = True
        self.out.write(data)
        self.written += len(data)

    # ------------------------------------------------------------------ server runs
    def startup(self) -> None:
        """One `vllm serve` start (stdout and stderr of all its processes in one file), then its traffic."""
        rng, r = self.rng, self.rand
        if self.runs and r() < 0.25:  # a restart now and then brings another model
            self.model = MODELS[MODELS.index(self.model) ^ 1]
        repo, served, arch, max_len, weights, kv_gib, kv_bytes, shards, self.chatml, _, _, gen = self.model
        self.runs += 1
        self.events["server_start"] += 1
        pid = rng.randrange(7, 4_000_000)
        self.api, self.eng = f"(APIServer pid={pid}) ", f"(EngineCore_DP0 pid={rng.randrange(7, 4_000_000)}) "
        self.health = (f"{self.api}INFO:     127.0.0.1:", ' - "GET /health HTTP/1.1" 200 OK')
        self.max_seqs = rng.choice((32, 48, 64))
        self.health_every, self.metrics_every = rng.choice((1.0, 2.0)), rng.choice((5.0, 10.0, 15.0))
        rep, temp, top_p, top_k = gen
        # SamplingParams reprs up to `max_tokens=`: the model's defaults, or a temperature the client set.
        self.params = [f"SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty={rep}, "
                       f"temperature={tt}, top_p={top_p}, top_k={top_k}, min_p=0.0, seed=None, stop=[], stop_token_ids"
                       "=[], bad_words=[], include_stop_str_in_output=False, ignore_eos=False, max_tokens="
                       for tt in (temp, temp, temp, 0.0, 0.2, 0.7, 1.0)]
        self.chat_seen = False
        load_s, dyn, graphs = shards * (0.6 + 1.2 * r()), 6.0 + 4.0 * r(), 4 + int(3 * r())
        if self.runs > 1 and r() < 0.8:  # later starts find the torch.compile cache
            comp = 3.0 + 3.0 * r()
            compiled = f"Directly load the compiled graph(s) for dynamic shape from the cache, took {comp:.3f} s"
        else:
            comp = 20.0 + 10.0 * r()
            compiled = f"Compiling a graph for dynamic shape takes {comp:.2f} s"
        kv = self.kv_tokens = int(kv_gib * 2**30 / kv_bytes) // 16 * 16
        gen_cfg = "{" + (f"'repetition_penalty': {rep}, " if rep != 1.0 else "") + f"'temperature': {temp}, " + (
            f"'top_k': {top_k}, " if top_k else "") + f"'top_p': {top_p}" + "}"
        config = (f"model='{repo}', speculative_config=None, tokenizer='{repo}', skip_tokenizer_init=False, tokenizer_"
                  "mode=auto, revision=None, tokenizer_revision=None, trust_remote_code=False, dtype=torch.bfloat16, "
                  f"max_seq_len={max_len}, download_dir=None, load_format=auto, tensor_parallel_size=1, pipeline_"
                  "parallel_size=1, data_parallel_size=1, disable_custom_all_reduce=False, quantization=None, enforce_"
                  f"eager=False, kv_cache_dtype=auto, device_config=cuda, seed=0, served_model_name={served}, "
                  f"enable_prefix_caching=True, chunked_prefill_enabled=True, compilation_config={COMPILATION}")
        # `who|level|file:line|delay|message`. who: A API server, E engine core, - no prefix, e the engine's bare
        # prefix (its stdout wrapper's, before a tqdm redraw), T raw text, U uvicorn. delay: seconds before the
        # line, about (or `=` exactly).
        rows = f"""\
-|INFO|__init__.py:216|0|Automatically detected platform cuda.
A|INFO|api_server.py:1896|2.5|vLLM API server version {VERSION}
A|INFO|utils.py:328|0|non-default args: {{'model_tag': '{repo}', 'host': '0.0.0.0', 'model': '{repo}', \
'max_model_len': {max_len}, 'served_model_name': ['{served}'], 'gpu_memory_utilization': 0.9, 'max_num_seqs': \
{self.max_seqs}, 'enable_prefix_caching': True, 'enable_log_requests': True}}
A|INFO|__init__.py:742|7|Resolved architecture: {arch}
A|INFO|__init__.py:1815|0|Using max model len {max_len}
A|INFO|scheduler.py:222|0.3|Chunked prefill is enabled with max_num_batched_tokens=8192.
-|INFO|__init__.py:216|4|Automatically detected platform cuda.
E|INFO|core.py:654|1.5|Waiting for init message from front-end.
E|INFO|core.py:76|0|Initializing a V1 LLM engine (v{VERSION}) with config: {config}
E|INFO|gpu_model_runner.py:2338|3|Starting to load model {repo}...
E|INFO|cuda.py:362|0.2|Using Flash Attention backend on V1 engine.
e|||0.5|
T|||={load_s}|Loading safetensors checkpoint shards: 100% Completed | {shards}/{shards} \
[00:{int(load_s):02d}<00:00, {load_s / shards:.2f}s/it]
e|||0|
E|INFO|default_loader.py:268|0|Loading weights took {load_s:.2f} seconds
E|INFO|gpu_model_runner.py:2392|0.6|Model loading took {weights:.4f} GiB and {load_s + 0.4 + r():.6f} seconds
E|INFO|backends.py:550|={7 + dyn}|Dynamo bytecode transform time: {dyn:.2f} s
E|INFO|backends.py:215|={comp}|{compiled}
E|INFO|monitor.py:34|3.5|torch.compile takes {dyn + comp + 3 * r():.2f} s in total
E|INFO|gpu_worker.py:298|0.5|Available KV cache memory: {kv_gib:.2f} GiB
E|INFO|kv_cache_utils.py:864|0.3|GPU KV cache size: {kv:,} tokens
E|INFO|kv_cache_utils.py:868|0|Maximum concurrency for {max_len:,} tokens per request: {kv / max_len:.2f}x
e|||0|
T|||=0.5|Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 67/67 \
[00:{graphs:02d}<00:00, {67 / graphs:.2f}it/s]
E|INFO|gpu_model_runner.py:3118|={graphs}|Graph capturing finished in {graphs + 1} secs, took {0.4 + 0.3 * r():.2f} GiB
E|INFO|core.py:218|0.1|init engine (profile, create kv cache, warmup model) took {dyn + comp + graphs + 12 * r():.2f} \
seconds
A|INFO|loggers.py:142|0.8|Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: {kv // 16}
A|INFO|api_server.py:1692|0.1|Supported_tasks: ['generate']
A|INFO|serving_chat.py:137|0|Using default chat sampling params from model: {gen_cfg}
A|INFO|serving_completion.py:76|0|Using default completion sampling params from model: {gen_cfg}
A|INFO|api_server.py:1971|0|Starting vLLM API server 0 on http://0.0.0.0:8000
A|INFO|launcher.py:36|0|Available routes are:
""" + "".join(f"A|INFO|launcher.py:44|0|Route: {p}, Methods: {m}\n" for p, m in (x.split(" ", 1) for x in ROUTES))
        rows += f"""\
U|||0.1|Started server process [{pid}]
U|||0|Waiting for application startup.
U|||0|Application startup complete."""
        pfx = {"A": self.api, "E": self.eng, "-": ""}
        for who, level, src, delay, text in (row.split("|", 4) for row in rows.splitlines()):
            self.t += float(delay[1:]) if delay[:1] == "=" else float(delay) * (0.5 + r())
            if who in pfx:
                self.rec(pfx[who], level, src, text)
            else:
                self.emit(self.eng.rstrip() if who == "e" else self.api + "INFO:     " + text if who == "U" else text,
                          STARTUP)
        t = self.t
        self.heap = []  # whatever the last run still had to say died with it
        self.active: list[Active] = []
        self.iv_prompt, self.last_zero, self.hit_q, self.hit_h = 0.0, True, 1.0, 0.0
        self.mport = 30_000 + rng.randrange(30_000)
        self.next_health = t + self.health_every * r()
        for ev, first in ((E_METRICS, self.metrics_every), (E_MODELS, 300.0), (E_SESSION, 60.0), (E_STATS, 10.0)):
            self.at(t + first * (r() if ev != E_STATS else 1.0), ev)
        self.at(t + 2 * 3600 + rng.lognormvariate(math.log(14 * 3600), 0.7), E_RESTART)

    def restart(self) -> None:
        """End this run: now and then an engine crash (CUDA OOM, in-flight requests fail), else a SIGTERM."""
        api, t = self.api, self.t
        if self.rand() < 0.3:
            self.events["engine_crash"] += 1
            lines = self.traceback(
                f"{self.eng}ERROR {self.st(t)} [core.py:720] ", "EngineCore encountered a fatal error.", CRASH_TB,
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacity "
                "of 79.19 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.16 GiB "
                "memory in use.") + self.traceback(
                f"{api}ERROR {self.st(t)} [async_llm.py:416] ", "AsyncLLM output_handler failed.",
                ("v1/engine/async_llm.py:389:output_handler:outputs = await engine_core.get_output_async()",),
                "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace "
                "(above) for the root cause.")
            self.emit("\n".join(lines), ERROR, len(lines))
            for a in self.active:
                if a[2] > t:
                    self.rec(api, "INFO", "async_llm.py:342", f"Request {a[5]} failed (engine dead).", REQLOG)
                    if not a[6]:  # a stream's 200 went out with its headers
                        self.emit(f"{api}INFO:     {a[7]} 500 {REASON[500]}", A_INFER)
        self.events["server_stop"] += 1
        self.rec(api, "INFO", "launcher.py:101", "Shutting down FastAPI HTTP server.", SHUTDOWN)
        for text in ("Shutting down", "Waiting for application shutdown.", "Application shutdown complete."):
            self.emit(f"{api}INFO:     {text}", SHUTDOWN)
        self.t += 20 + self.rng.lognormvariate(math.log(90), 1.0)  # the restart (or an upgrade) takes a while
        self.startup()

    # ------------------------------------------------------------------ traffic
    def session(self, t: float) -> None:
        r = self.rand
        batch = r() < 0.07
        ip = APP_CLIENTS[int(r() * len(APP_CLIENTS))]
        n = 20 + int(r() * 180) if batch else 1 + int(-math.log(1.0 - r()) * 5)
        s = Session(ip, 32_768 + int(r() * 28_000), r() < (0.5 if batch else 0.85), n, batch)
        self.events["session"] += 1
        if not batch and r() < 0.4:  # a chat UI lists the models first
            self.at(t, E_LINE, self.access(ip, s.port, "GET", "/v1/models", 200), A_MODELS)
        self.at(t + 0.01 + r() * 0.05, E_REQ, sess=s)
        self.at(t - math.log(1.0 - r()) / (SESSION_RATE * HOUR_SHAPE[int(t) // 3600 % 24]), E_SESSION)

    def request(self, t: float, s: Session) -> float:
        """One inference request's lines, decided now and queued at their times; returns when it ends."""
        r, api, max_len, prefill_tps, decode_tps = self.rand, self.api, self.model[3], self.model[10], self.model[9]
        self.events["request"] += 1
        port = s.port + (int(r() * 6) if s.batch else 0)  # a batch job runs several connections
        path = "/v1/chat/completions" if s.chat else "/v1/completions"
        if r() < 0.003:  # unknown model name: rejected before any request logging
            self.events["status_404"] += 1
            self.at(t + 0.002, E_LINE, self.access(s.ip, port, "POST", path, 404), A_INFER)
            return t + 0.002
        n_p = self.pool_prompt[int(r() * 4096)]
        max_tokens = (256, 512, 1024, 2048, 4096)[int(r() * 5)] if r() < 0.6 else 0  # 0: the client set none
        if s.chat and r() < 0.003:
            n_p = max_len - max_tokens + 1 + int(r() * 9000)
        if n_p + max_tokens > max_len:
            if s.chat:
                self.too_long(t, s.ip, port, n_p, max_tokens)
                return t + 0.02
            n_p = max_len - max_tokens - 100  # completions stay within the context: one error path is enough
        if r() < 0.03:
            self.line_at(t, "WARNING", "protocol.py:81",
                         "The following fields were present in the request but ignored: {'store'}", WARN)
        if s.chat and not self.chat_seen:
            self.chat_seen = True
            self.line_at(t, "INFO", "chat_utils.py:538", "Detected the chat template content format to be 'string'. "
                         "You can set `--chat-template-content-format` to override this.")
        stream = r() < (0.7 if s.chat else 0.3)
        max_tokens = max_tokens or max_len - n_p  # 0.10 fills in what the context leaves
        rid = f"chatcmpl-{self.rng.getrandbits(128):032x}" if s.chat else f"cmpl-{self.rng.getrandbits(128):032x}-0"
        prompt, ids = self.prompt(n_p, s.chat)
        t_recv = t + 0.003 + n_p * 2e-6  # tokenization
        self.line_at(t_recv, "INFO", "logger.py:40", f"Received request {rid}: prompt: {prompt}, params: "
                     f"{self.params[int(r() * len(self.params))]}{max_tokens}, min_tokens=0, logprobs=None, "
                     "prompt_logprobs=None, skip_special_tokens=True, spaces_between_special_tokens=True, "
                     "truncate_prompt_tokens=None, guided_decoding=None, extra_args=None), prompt_token_ids: "
                     f"{ids}, prompt_embeds shape: None, lora_request: None.")
        tail = f'{s.ip}:{port} - "POST {path} HTTP/1.1"'
        t_add = t_recv + 0.0003 + r() * 0.001
        if stream:  # a stream's headers go out before its generator adds the request
            self.at(t_add, E_LINE, f"{api}INFO:     {tail} 200 OK", A_INFER)
            t_add += 0.0002 + r() * 0.001
        self.line_at(t_add, "INFO", "async_llm.py:300", f"Added request {rid}.")
        # The engine: prefix cache, queueing behind max_num_seqs, prefill, then decode slowed by the batch.
        cached = int(n_p * r() * 0.9) // 16 * 16 if r() < 0.6 and self.hit_q > 1.0 else 0  # empty at start
        self.hit_q, self.hit_h = self.hit_q + n_p, self.hit_h + cached
        if self.hit_q > 2e6:  # the hit rate is over recent queries, not since the start
            self.hit_q, self.hit_h = self.hit_q / 2, self.hit_h / 2
        self.iv_prompt += n_p - cached
        ends = [a[2] for a in self.active if a[2] > t]
        t_dec = t_add + (n_p - cached) / prefill_tps
        if len(ends) >= self.max_seqs:
            ends.sort()
            t_dec = max(t_dec, ends[len(ends) - self.max_seqs] + 0.05)
        rate = decode_tps / (1.0 + min(len(ends), self.max_seqs) / 24) * (0.85 + 0.3 * r())
        t_end = t_dec + min(max_tokens, self.pool_gen[int(r() * 4096)]) / rate
        if stream and r() < 0.015:  # the client went away mid-stream
            self.events["client_abort"] += 1
            t_end = t_dec + (t_end - t_dec) * r()
            self.line_at(t_end, "INFO", "async_llm.py:402", f"Aborted request {rid}.")
            self.line_at(t_end, "INFO", "async_llm.py:312", f"Request {rid} aborted.")
        elif not stream:
            self.at(t_end + 0.001, E_LINE, f"{api}INFO:     {tail} 200 OK", A_INFER)
        self.active.append((t, t_dec, t_end, rate, n_p, rid, stream, tail))
        return t_end

    def prompt(self, n_p: int, chat: bool) -> tuple[str, str]:
        """The prompt as repr() prints it (chat: rendered by the model's template), and `prompt_token_ids`."""
        r, esc, llama = self.rand, self.esc, not self.chatml
        start = esc.find(" ", int(r() * (len(esc) - n_p * 4 - 64))) + 1
        body = esc[start:esc.find(" ", start + max(8, n_p * 4 - (160 if chat else 0)))]
        if not chat:
            i = int(r() * (len(self.pos) - n_p - 1))
            ids = ("[128000, " if llama else "[") + self.ids[self.pos[i]:self.pos[i + n_p - llama] - 2] + "]"
        else:
            ids, system = "None", SYSTEM[int(r() * len(SYSTEM))]
            if llama:
                body = (r"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
                        rf"December 2023\nToday Date: 26 Jul 2024\n\n{system}<|eot_id|><|start_header_id|>user"
                        rf"<|end_header_id|>\n\n{body}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
            else:
                cut = body.find(" ", len(body) // 2)
                if cut > 0 and r() < 0.4:  # an earlier turn of the conversation; cut at spaces, never in an escape
                    answer = body[cut:body.rfind(" ", cut, cut + 400)]
                    body = (body[:cut] + r"<|im_end|>\n<|im_start|>assistant\n" + answer
                            + r"<|im_end|>\n<|im_start|>user\n" + body[cut:])
                body = (rf"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{body}<|im_end|>\n"
                        r"<|im_start|>assistant\n")
        if "\\'" in body and '"' not in body:  # repr() quotes with " a text that has ' but no "
            return '"' + body.replace("\\'", "'") + '"', ids
        return "'" + body + "'", ids

    def too_long(self, t: float, ip: str, port: int, n_p: int, max_tokens: int) -> None:
        """A prompt over the context: `logger.exception` in the chat handler, then 400 (formats §6)."""
        self.events["status_400"] += 1
        t += 0.003 + n_p * 2e-6
        msg = (f"However, you requested {n_p + max_tokens} tokens ({n_p} in the messages, {max_tokens} in the "
               "completion). Please reduce the length of the messages or completion." if max_tokens else
               f"However, your request has {n_p} input tokens. Please reduce the length of the input messages.")
        lines = self.traceback(f"{self.api}ERROR {self.st(t)} [serving_chat.py:223] ",
                               "Error in preprocessing prompt inputs", TOO_LONG_TB,
                               f"ValueError: This model's maximum context length is {self.model[3]} tokens. {msg}")
        self.at(t, E_LINE, "\n".join(lines), ERROR, len(lines))
        self.at(t + 0.001, E_LINE, self.access(ip, port, "POST", "/v1/chat/completions", 400), A_INFER)

    def stats(self, t: float) -> None:
        """vLLM V1's 10 s line: throughputs over the interval, the batch and KV use now; DEBUG when idle."""
        gen = kv = 0.0
        run = wait = 0
        keep: list[Active] = []
        for a in self.active:
            t_arr, t_dec, t_end, rate, n_p = a[:5]
            gen += max(0.0, min(t, t_end) - max(t - 10.0, t_dec)) * rate
            if t_end > t:
                keep.append(a)
                if t_dec <= t:
                    run, kv = run + 1, kv + n_p + (t - t_dec) * rate
                else:
                    wait += t_arr <= t
        self.active = keep
        p_tps, g_tps = self.iv_prompt / 10.0, gen / 10.0
        self.iv_prompt = 0.0
        zero = p_tps < 0.05 and g_tps < 0.05
        if not (zero and self.last_zero):  # idle after idle is logged at DEBUG
            self.rec(self.api, "INFO", "loggers.py:123", f"Engine 000: Avg prompt throughput: {p_tps:.1f} tokens/s, "
                     f"Avg generation throughput: {g_tps:.1f} tokens/s, Running: {run} reqs, Waiting: {wait} reqs, "
                     f"GPU KV cache usage: {min(100.0, 100 * kv / self.kv_tokens):.1f}%, Prefix cache hit rate: "
                     f"{100 * self.hit_h / self.hit_q:.1f}%", STATS)
        self.last_zero = zero

    # ------------------------------------------------------------------ driver
    def run(self) -> None:
        self.emit(f"INFO {self.st(self.t)} [gen_vllm_log.py:1] SYNTHETIC benchmark log generated by "
                  f"bench/gen_vllm_log.py seed={self.seed} size={self.size}; not real vLLM output", LABEL)
        self.startup()
        r, buf, count = self.rand, self.buf, self.count
        while not self.done:
            if len(buf) >= FLUSH_LINES:
                self.flush()
            if self.next_health <= self.heap[0][0]:  # the most frequent line is kept out of the heap
                t = self.t = self.next_health
                self.hport = self.hport + 1 + int(r() * 3) if self.hport < 60_990 else 32_768  # a new connection
                buf.append(f"{self.health[0]}{self.hport}{self.health[1]}")
                count[A_HEALTH] += 1
                self.next_health = t + self.health_every + r() * 0.01
                continue
            t, _, ev, text, kind, n, sess = heapq.heappop(self.heap)
            self.t = t
            if ev == E_LINE:
                buf.append(text)
                count[kind] += n
            elif ev == E_REQ and sess is not None:
                t_end = self.request(t, sess)
                sess.left -= 1
                if sess.left > 0:  # a batch job fires the next at once, a person reads the answer first
                    nxt = t + 0.05 + 0.4 * r() if sess.batch else t_end + self.rng.lognormvariate(math.log(15), 1.0)
                    self.at(nxt, E_REQ, sess=sess)
            elif ev == E_METRICS:  # Prometheus keeps its connection open
                self.mport = 30_000 + int(r() * 30_000) if r() < 0.01 else self.mport
                self.emit(self.access("10.0.3.5", self.mport, "GET", "/metrics", 200), A_METRICS)
                self.at(t + self.metrics_every + r() * 0.01, E_METRICS)
            elif ev == E_STATS:
                self.stats(t)
                self.at(t + 10.0, E_STATS)
            elif ev == E_SESSION:
                self.session(t)
            elif ev == E_MODELS:
                self.emit(self.access("172.18.0.9", 40_000 + int(r() * 20_000), "GET", "/v1/models", 200), A_MODELS)
                self.at(t + 300.0, E_MODELS)
            elif ev == E_RESTART:
                self.restart()
        self.flush()


def generate(path: str, size: int, seed: int) -> tuple[dict[str, int], dict[str, int], int, int]:
    """Write the synthetic log; returns line kind counts, event counts, bytes written, lines cut at the end."""
    with open(path, "wb") as f:
        gen = Generator(seed, size, f)
        gen.run()
    return dict(zip(KINDS, gen.count, strict=True)), dict(sorted(gen.events.items())), gen.written, gen.tail_cut_lines


def source_digest() -> str:
    """Hash of this file: lets a benchmark notice that a reused log came from older code."""
    with open(__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("out", help="output path")
    ap.add_argument("--size", type=parse_size, default=parse_size("300M"), help="target size, e.g. 300M, 1G")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--meta", help="write counts as JSON here (default: OUT.meta.json; '-' to skip)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    kinds, events, written, cut = generate(args.out, args.size, args.seed)
    elapsed = time.perf_counter() - t0
    meta = {
        "synthetic": True, "generator": "bench/gen_vllm_log.py", "generator_sha256": source_digest(),
        "vllm_version": VERSION, "seed": args.seed, "requested_size": args.size, "bytes": written,
        "seconds": round(elapsed, 3), "mb_per_s": round(written / 1e6 / elapsed, 1),
        # counted while generating: the last `tail_cut_lines` lines were dropped to respect --size, so these are
        # upper bounds (exact but for that tail)
        "generated_line_kinds": kinds, "generated_events": events, "tail_cut_lines": cut,
    }
    if args.meta != "-":
        with open(args.meta or args.out + ".meta.json", "w") as f:
            json.dump(meta, f, indent=2, sort_keys=True)
            f.write("\n")
    print(f"wrote {written:,} bytes to {args.out} in {elapsed:.1f}s ({meta['mb_per_s']} MB/s), seed={args.seed}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
