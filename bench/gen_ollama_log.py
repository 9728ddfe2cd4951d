#!/usr/bin/env python3
"""Generate a SYNTHETIC Ollama server log for benchmarking ``ietop analyze``.

The output is not real Ollama output: it is assembled from the line shapes documented in
``ollama-formats.md`` (sections 2, 4-8) and seen in the real samples, so that a parser exercises
the same code paths as on a real log: every era (E2 llama server, E3 Go runner, E4 new memory
management, E5 upstream llama-server), GIN access lines with every latency unit, scheduler DEBUG
chains, evictions, truncations, llama-server slot lines, raw llama.cpp load output, errors,
health-check noise, journald / docker envelopes and ~1% junk.  The first line says it is synthetic.

Usage::

    python bench/gen_ollama_log.py OUT.log --size 1G --seed 1

Design constraints (why the code looks the way it does):

* Deterministic: one ``random.Random(seed)`` drives everything; no set/dict iteration order or
  wall-clock input reaches the output, so the same seed and size give byte-identical files.
* Streaming / constant memory: lines are buffered per ~16k lines and written as one encoded
  block; only a bounded amount of session state is kept.
* Fast (1 GB in well under a minute): timestamp strings are rebuilt only when the second
  changes, HTTP latencies for probe traffic come from pre-formatted pools, and random numbers
  are drawn per line or per request, never per character.
"""

from __future__ import annotations

import argparse
import bisect
import datetime as dt
import hashlib
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

# Go's log timestamps and the GIN logger write local time; the generator simulates a process
# whose clock starts here and only moves forward.
START_UTC = dt.datetime(2024, 5, 1, 6, 0, 0, tzinfo=dt.timezone.utc)
EPOCH_DAY0 = dt.date(1970, 1, 1)

MS3 = [f"{i:03d}" for i in range(1000)]
# every wall-clock second of a day, pre-formatted: a timestamp is then a list lookup plus one
# concatenation instead of two divmods and a format per line
HMS = [f"{h:02d}:{m:02d}:{s:02d}" for h in range(24) for m in range(60) for s in range(60)]
MON_EN = ["", "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
# journald prints the month with the host locale; it_IT and zh_CN both occur in real reports.
MON_IT = ["", "gen", "feb", "mar", "apr", "mag", "giu", "lug", "ago", "set", "ott", "nov", "dic"]

FLUSH_LINES = 16384  # lines per write(); ~2-3 MB, big enough that syscalls do not matter

# Eras in file order (a real machine upgrades over time) with the progress fraction at which
# each starts and the earliest date its releases existed.
ERAS = ("E2", "E3", "E4", "E5")
ERA_START_FRAC = (0.0, 0.2, 0.45, 0.75)
ERA_START_DATE = {
    "E2": dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc),
    "E3": dt.datetime(2024, 11, 15, tzinfo=dt.timezone.utc),
    "E4": dt.datetime(2025, 9, 1, tzinfo=dt.timezone.utc),
    "E5": dt.datetime(2026, 6, 20, tzinfo=dt.timezone.utc),
}
VERSIONS = {
    "E2": ((0, 1, 38), (0, 2, 8), (0, 3, 6), (0, 3, 12)),
    "E3": ((0, 4, 2), (0, 5, 7), (0, 6, 5), (0, 7, 0), (0, 9, 6)),
    "E4": ((0, 11, 10), (0, 12, 6), (0, 13, 3), (0, 20, 4)),
    "E5": ((0, 30, 2), (0, 31, 4), (0, 32, 7)),
}

INFERENCE_PATHS = {
    "E2": ("/api/chat", "/api/chat", "/api/generate", "/v1/chat/completions"),
    "E3": ("/api/chat", "/api/chat", "/api/generate", "/v1/chat/completions", "/v1/chat/completions"),
    "E4": ("/api/chat", "/api/chat", "/api/generate", "/v1/chat/completions", "/v1/responses"),
    "E5": ("/api/chat", "/api/chat", "/v1/chat/completions", "/v1/messages", "/api/generate"),
}
EMBED_PATHS = ("/api/embed", "/api/embeddings", "/v1/embeddings")
CLIENTS = ("127.0.0.1", "127.0.0.1", "127.0.0.1", "::1", "172.18.0.6", "192.168.1.23", "10.99.99.105")

# gin's method column is %-7s followed by two spaces (empty colour codes around a space).
METHOD_COL = {m: f"{m:<7}" for m in ("GET", "POST", "HEAD", "DELETE")}
ANSI_STATUS = {2: "\x1b[97;42m", 4: "\x1b[90;43m", 5: "\x1b[97;41m"}
ANSI_METHOD = {"GET": "\x1b[97;44m", "POST": "\x1b[97;46m", "HEAD": "\x1b[97;45m", "DELETE": "\x1b[97;41m"}
ANSI_RESET = "\x1b[0m"

# Junk observed in pasted/exported logs (formats §2.1): a tolerant parser has to skip these.
JUNK_LINES = (
    "",
    "goroutine 1 [running]:",
    "panic: runtime error: index out of range [3] with length 3",
    "\tgithub.com/ollama/ollama/llm/server.go:611 +0x1e5",
    "SIGSEGV: segmentation violation",
    "PC=0x7f3a9c2b1e4f m=4 sigcode=1 addr=0x0",
    "<br/>",
    "~~~ log truncated ~~~",
    "time=2025-0",
    "llama_model_loader: - kv  21:               general.quantization_version u32              = 2",
    "ggml_cuda_init: found 1 CUDA devices:",
    "  Device 0: NVIDIA GeForce RTX 4090, compute capability 8.9, VMM: yes",
    "cuda driver library failed to get device context 2time=2025-03-15T11:39:07.109+01:00 level=WARN "
    'source=gpu.go:434 msg="error looking up nvidia GPU memory"',
    '[GIN-debug] [WARNING] Running in "debug" mode. Switch to "release" mode in production.',
    "Couldn't find '/root/.ollama/id_ed25519'. Generating new private key.",
    "\x1b[31mERROR\x1b[0m something printed by a wrapper script",
    # surrogateescape turns these into raw 0xff 0xfe bytes: invalid UTF-8 does occur in real
    # logs (split multibyte model output in llama-server debug bodies).
    'slot log_server_r: response: {"content":"\udcff\udcfe"}',
)


# llama-server prints the sampler setup per task at --log-verbosity 4 (continuation lines are
# indented with 8 spaces) [S019]
SAMPLER_BLOCK = (
    "slot launch_slot_: id  0 | task -1 | sampler chain: logits -> penalties -> ?dry -> "
    "?top-n-sigma -> top-k -> ?typical -> top-p -> ?min-p -> ?xtc -> ?temp-ext -> dist ",
    "slot launch_slot_: id  0 | task -1 | sampler params: ",
    "        repeat_last_n = 64, repeat_penalty = 1.100, frequency_penalty = 0.000, presence_penalty = 0.000",
    "        top_k = 40, top_p = 0.900, min_p = 0.000, xtc_probability = 0.000, "
    "xtc_threshold = 0.100, typical_p = 1.000, top_n_sigma = -1.000, temp = 0.800",
)


@dataclass(frozen=True)
class Model:
    name: str
    arch: str
    layers: int  # repeating blocks; llama.cpp offloads layers + 1 (output layer)
    size_gib: float
    ctx_train: int
    params: str
    embed: bool = False


MODELS = (
    Model("llama3.1:8b", "llama", 32, 4.9, 131072, "8.03 B"),
    Model("qwen2.5:14b", "qwen2", 48, 9.0, 32768, "14.77 B"),
    Model("gemma3:12b", "gemma3", 48, 8.1, 131072, "12.19 B"),
    Model("mistral:7b", "llama", 32, 4.1, 32768, "7.25 B"),
    Model("deepseek-r1:32b", "qwen2", 64, 19.9, 131072, "32.76 B"),
    Model("qwen3:30b-a3b", "qwen3moe", 48, 18.6, 262144, "30.53 B"),
    Model("llama3.2:3b", "llama", 28, 2.0, 131072, "3.21 B"),
    Model("nomic-embed-text:latest", "nomic-bert", 12, 0.26, 2048, "136.73 M", embed=True),
    Model("embeddinggemma:latest", "gemma3", 24, 0.6, 2048, "307.58 M", embed=True),
)


def go_duration(ns: int) -> str:
    """Format nanoseconds like Go's time.Duration.String() (trailing fraction zeros trimmed)."""
    if ns <= 0:
        return "0s"
    if ns < 1_000:
        return f"{ns}ns"
    if ns < 1_000_000:
        return _frac(ns, 1_000, 3) + "µs"
    if ns < 1_000_000_000:
        return _frac(ns, 1_000_000, 6) + "ms"
    whole, frac = divmod(ns, 1_000_000_000)
    hours, rem = divmod(whole, 3600)
    minutes, secs = divmod(rem, 60)
    sec = str(secs) if not frac else f"{secs}.{frac:09d}".rstrip("0")
    if hours:
        return f"{hours}h{minutes}m{sec}s"
    if minutes:
        return f"{minutes}m{sec}s"
    return f"{sec}s"


def _frac(ns: int, unit: int, digits: int) -> str:
    whole, frac = divmod(ns, unit)
    if not frac:
        return str(whole)
    return f"{whole}.{frac:0{digits}d}".rstrip("0")


def gin_latency(ns: int) -> str:
    """GIN's latency column: truncated to whole seconds above a minute, right-aligned in 13."""
    if ns > 60_000_000_000:
        ns -= ns % 1_000_000_000
    return f"{go_duration(ns):>13}"


def human_bytes(gib: float) -> str:
    """format.HumanBytes2-like string for a size in GiB."""
    if gib <= 0:
        return "0 B"
    if gib < 1.0:
        return f"{gib * 1024:.1f} MiB"
    return f"{gib:.1f} GiB"


def parse_size(text: str) -> int:
    """'1G', '200M', '512K', '1.5GiB', '1048576' -> bytes (binary multiples)."""
    s = text.strip().upper().removesuffix("IB").removesuffix("B")
    mult = 1
    if s and s[-1] in "KMGT":
        mult = 1024 ** ("KMGT".index(s[-1]) + 1)
        s = s[:-1]
    try:
        value = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad size {text!r} (use e.g. 1G, 200M, 512K)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"size must be positive: {text!r}")
    return int(value * mult)


def cut_to_fit(data: bytes, room: int) -> tuple[bytes, int]:
    """`data` cut at a line boundary to at most `room` bytes (the file ends with a whole line and stays within
    its size), and how many lines were dropped."""
    cut = data.rfind(b"\n", 0, room)
    return (data[: cut + 1] if cut >= 0 else b""), data.count(b"\n", cut + 1)


def version_str(v: tuple[int, int, int]) -> str:
    return ".".join(map(str, v))


@dataclass
class Runner:
    """A loaded model as the scheduler sees it (only what the log lines need)."""

    model: Model
    blob: str
    num_ctx: int  # per slot
    parallel: int
    pid: int
    port: int
    rid: str  # DEBUG runner identity attributes (format depends on version)
    last_used: float = 0.0
    task: int = 0  # llama-server task counter (E5 slot lines)
    timer: bool = False  # keep-alive timer exists (adding vs resetting)


@dataclass
class Stats:
    lines: int = 0
    bytes: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    events: dict[str, int] = field(default_factory=dict)


PROFILES = ("mixed", "busy")
"""`mixed`: every era, envelopes, DEBUG chains, a poller in half the sessions (the default). `busy`: one busy
E5 (llama-server) server, bare lines at INFO, always polled by several health checkers (a probe pair every
BUSY_POLL_S): ~90% GIN lines, most of them probes, llama-server slot lines per request, a few models, rare
loads and truncations -- the shape of a day of a shared server."""
BUSY_POLL_S = 2.0
BUSY_POLL_CAP = 400


class Generator:
    def __init__(self, seed: int, size: int, out: BinaryIO, profile: str = "mixed") -> None:
        self.busy = profile == "busy"
        self.poll_every = BUSY_POLL_S if self.busy else 10.0
        self.poll_cap = BUSY_POLL_CAP if self.busy else 40
        self.seed = seed
        self.size = size
        self.out = out
        self.tail_cut_lines = 0
        self.rng = random.Random(seed)
        self.rand = self.rng.random
        self.t = START_UTC.timestamp()
        self.buf: list[str] = []
        self.written = 0
        self.done = False
        # per-kind line counters, kept as plain ints: attribute increments are the cheapest
        # bookkeeping available in the per-line path.
        self.n_slog = self.n_gin = self.n_raw = self.n_golog = self.n_cpp = self.n_junk = 0
        self.n_env = 0
        self.n_request = 0
        self.events: dict[str, int] = {}
        self._junk_in = self._junk_gap()
        self._sec = -1
        self._day = -1
        self._ns = 0
        self._dk = ""
        self.blob = {m.name: f"sha256-{self.rng.getrandbits(256):064x}" for m in MODELS}
        a, b, c, d, e = (self.rng.getrandbits(n) for n in (32, 16, 16, 16, 48))
        self.gpu_uuid = f"GPU-{a:08x}-{b:04x}-{c:04x}-{d:04x}-{e:012x}"
        # pre-formatted latency pools for probe traffic: formatting a Go duration per line would
        # dominate the cost of the most frequent line kind.
        self.lat_head = self._pool(lambda: int(self.rng.uniform(12_000, 60_000)), ns_share=0.03)
        self.lat_tags = self._pool(lambda: int(self.rng.lognormvariate(math.log(4e6), 1.0)))
        self.lat_show = self._pool(lambda: int(self.rng.lognormvariate(math.log(2e7), 1.2)))
        self.lat_ps = self._pool(lambda: int(self.rng.lognormvariate(math.log(9e4), 0.8)))
        self._dk_last = ""
        # per-request distributions as lookup tables: a table index costs one random() call,
        # lognormvariate costs several Python-level calls, and requests are the second most
        # frequent thing generated
        self.pool_prompt = [int(self.rng.lognormvariate(math.log(700), 1.1)) + 8 for _ in range(4096)]
        self.pool_gen = [int(self.rng.lognormvariate(math.log(250), 0.9)) + 1 for _ in range(4096)]
        self.client15 = [f"{c:>15}" for c in CLIENTS]
        self._probe_cache: dict[tuple[str, str, bool], list[str]] = {}
        self._session_defaults()

    # ------------------------------------------------------------------ pools / helpers
    def _pool(self, draw: Callable[[], int], ns_share: float = 0.0, n: int = 2048) -> list[str]:
        out = []
        for _ in range(n):
            r = self.rand()
            if r < ns_share * 0.3:
                out.append(gin_latency(0))  # Windows clocks often report "0s"
            elif r < ns_share:
                out.append(gin_latency(self.rng.randrange(300, 999)))
            else:
                out.append(gin_latency(max(1, int(draw()))))
        return out

    def _junk_gap(self) -> int:
        # geometric gap with mean 100 lines => ~1% junk, without a random() call per line
        return 1 + int(-math.log(1.0 - self.rand()) * 100)

    def _session_defaults(self) -> None:
        self.era = "E2"
        self.version: tuple[int, int, int] = (0, 3, 6)
        self.env = 0
        self.tz = "Z"
        self.off_s = 0
        self.host = "host"
        self.pid = 1
        self.months = MON_EN
        self.zh = False
        self.color = False
        self.debug = False
        self.poller = False
        self.keep_alive = 300.0
        self.keep_alive_str = "5m0s"
        self.max_loaded = 3
        self.ctx_default = 2048
        self.parallel_default = 1
        self.models_dir = "/usr/share/ollama/.ollama/models"
        self.bin = "/usr/local/bin/ollama"
        self.windows = False
        self.runners: list[Runner] = []
        self.next_poll = self.t
        self.split_timing = False
        self.client = self.client15[0]

    def ev(self, name: str, n: int = 1) -> None:
        self.events[name] = self.events.get(name, 0) + n

    # ------------------------------------------------------------------ clock / envelope
    def _set_sec(self, sec: int) -> None:
        """Rebuild the cached timestamp prefixes; called only when the second changes."""
        self._sec = sec
        local = sec + self.off_s
        day = local // 86400
        if day != self._day:
            self._day = day
            d = EPOCH_DAY0 + dt.timedelta(days=day)
            self._ymd = f"{d.year:04d}-{d.month:02d}-{d.day:02d}T"
            self._ymd_slash = f"{d.year:04d}/{d.month:02d}/{d.day:02d}"
            self._gin_day = f"[GIN] {self._ymd_slash} - "
            mon_day = f"{d.month}月 {d.day:02d}" if self.zh else f"{self.months[d.month]} {d.day:02d}"
            self._jd_day = mon_day + " "
            self._jd_tail = f" {self.host} ollama[{self.pid}]: "
        hms = HMS[local - day * 86400]
        self._hms = hms
        self._iso = "time=" + self._ymd + hms + "."
        self._gin = self._gin_day + hms + " |"
        if self.env == 1:
            self._jd = self._jd_day + hms + self._jd_tail
        elif self.env == 2:
            # docker sessions run with TZ=UTC, so the local date/time *is* the UTC one
            self._dk = self._ymd + hms + "."

    def _prefix(self, ms: str) -> str:
        env = self.env
        if env == 1:
            return self._jd
        if env == 2:
            # docker's receive timestamps only go forward: within one millisecond the
            # sub-millisecond digits must increase too
            key = self._dk + ms
            if key == self._dk_last:
                self._ns = min(self._ns + 1 + int(self.rand() * 40_000), 999_999)
            else:
                self._dk_last = key
                self._ns = int(self.rand() * 400_000)
            return f"{key}{self._ns:06d}Z "
        return "ollama-1  | "

    def _put(self, line: str) -> None:
        self.buf.append(line)
        self._junk_in -= 1
        if self._junk_in <= 0:
            self._junk_in = self._junk_gap()
            self._junk()

    def _junk(self) -> None:
        self.n_junk += 1
        line = JUNK_LINES[int(self.rand() * len(JUNK_LINES))]
        if self.env and self.rand() < 0.5:
            line = self._prefix(MS3[int((self.t - self._sec) * 1000)]) + line
        self.buf.append(line)

    # ------------------------------------------------------------------ line emitters
    def slog(self, level: str, src: str, rest: str) -> None:
        t = self.t
        sec = int(t)
        if sec != self._sec:
            self._set_sec(sec)
        ms = MS3[int((t - sec) * 1000)]
        line = f"{self._iso}{ms}{self.tz} level={level} source={src} {rest}"
        if self.env:
            line = self._prefix(ms) + line
            self.n_env += 1
        self.n_slog += 1
        self.buf.append(line)
        self._junk_in -= 1  # inlined _put(): this is the hottest path
        if self._junk_in <= 0:
            self._junk_in = self._junk_gap()
            self._junk()

    def info(self, src: str, rest: str) -> None:
        self.slog("INFO", src, rest)

    def dbg(self, src: str, rest: str) -> None:
        if self.debug:
            self.slog("DEBUG", src, rest)

    def golog(self, src: str, rest: str) -> None:
        sec = int(self.t)
        if sec != self._sec:
            self._set_sec(sec)
        line = f"{self._ymd_slash} {self._hms} {src}: {rest}"
        if self.env:
            line = self._prefix(MS3[int((self.t - sec) * 1000)]) + line
            self.n_env += 1
        self.n_golog += 1
        self._put(line)

    def raw(self, text: str) -> None:
        if self.env:
            t = self.t
            sec = int(t)
            if sec != self._sec:
                self._set_sec(sec)
            text = self._prefix(MS3[int((t - sec) * 1000)]) + text
            self.n_env += 1
        self.n_raw += 1
        self.buf.append(text)
        self._junk_in -= 1
        if self._junk_in <= 0:
            self._junk_in = self._junk_gap()
            self._junk()

    def raw_block(self, lines: list[str]) -> None:
        """Several raw lines at the same instant, appended as one buffer entry."""
        n = len(lines)
        if self.env:
            t = self.t
            sec = int(t)
            if sec != self._sec:
                self._set_sec(sec)
            ms = MS3[int((t - sec) * 1000)]
            if self.env == 2:
                lines = [self._prefix(ms) + ln for ln in lines]  # docker: each stamp must advance
            else:
                pfx = self._prefix(ms)
                lines = [pfx + ln for ln in lines]
            self.n_env += n
        self.n_raw += n
        self.buf.append("\n".join(lines))
        self._junk_in -= n
        if self._junk_in <= 0:
            self._junk_in = self._junk_gap()
            self._junk()

    def cpp(self, text: str) -> None:
        """llama.cpp server text line of E2 (`INFO [func] msg | k=v`)."""
        self.n_cpp += 1
        self.n_raw -= 1  # counted as its own kind, not as raw
        self.raw(text)

    def gin_suffix(self, status: int, lat13: str, method: str, path: str) -> str:
        """Everything after `[GIN] date - time |`, per gin's LoggerWithFormatter default layout."""
        if self.color:
            return (
                f"{ANSI_STATUS[status // 100]} {status} {ANSI_RESET}| {lat13} | {self.client} |"
                f'{ANSI_METHOD[method]} {METHOD_COL[method]} {ANSI_RESET} "{path}"'
            )
        return f' {status} | {lat13} | {self.client} | {METHOD_COL[method]}  "{path}"'

    def gin(self, status: int, lat13: str, method: str, path: str) -> None:
        self.gin_sfx(self.gin_suffix(status, lat13, method, path))

    def gin_sfx(self, sfx: str) -> None:
        t = self.t
        sec = int(t)
        if sec != self._sec:
            self._set_sec(sec)
        line = self._gin + sfx
        if self.env:
            line = self._prefix(MS3[int((t - sec) * 1000)]) + line
            self.n_env += 1
        self.n_gin += 1
        self.buf.append(line)
        self._junk_in -= 1  # inlined _put(): this is the hottest path
        if self._junk_in <= 0:
            self._junk_in = self._junk_gap()
            self._junk()

    def probe_pool(self, name: str, method: str, path: str, lats: list[str]) -> list[str]:
        """Whole pre-formatted GIN suffixes for probe traffic (the most frequent lines)."""
        key = (name, self.client, self.color)
        pool = self._probe_cache.get(key)
        if pool is None:
            pool = [self.gin_suffix(200, lat, method, path) for lat in lats]
            self._probe_cache[key] = pool
        return pool

    def adv(self, lo: float, hi: float) -> None:
        self.t += lo + (hi - lo) * self.rand()

    # ------------------------------------------------------------------ output
    def flush(self) -> None:
        if not self.buf or self.done:
            return
        data = ("\n".join(self.buf) + "\n").encode("utf-8", "surrogateescape")
        self.buf.clear()
        room = self.size - self.written
        if len(data) >= room:
            # the counters then over-count by the dropped lines, which we report
            data, self.tail_cut_lines = cut_to_fit(data, room)
            self.done = True
        self.out.write(data)
        self.written += len(data)

    # ------------------------------------------------------------------ sessions
    def label(self) -> None:
        sec = int(self.t)
        self._set_sec(sec)
        self.buf.append(
            f'{self._iso}000Z level=INFO source=bench msg="SYNTHETIC benchmark log generated by '
            f'bench/gen_ollama_log.py seed={self.seed} size={self.size}; not real Ollama output"'
        )

    def v(self, *at_least: int) -> bool:
        return self.version >= at_least

    def session(self) -> None:
        """One `ollama serve` lifetime: startup, then model episodes, then a restart gap."""
        rng = self.rng
        frac = self.written / self.size
        ei = len(ERAS) - 1 if self.busy else bisect.bisect_right(ERA_START_FRAC, frac) - 1
        era = ERAS[ei]
        lo = ERA_START_FRAC[ei]
        hi = ERA_START_FRAC[ei + 1] if ei + 1 < len(ERAS) else 1.0
        versions = VERSIONS[era]
        vi = min(len(versions) - 1, int((frac - lo) / (hi - lo) * len(versions)))
        if self.busy:
            vi = len(versions) - 1
        self._session_defaults()
        self.era = era
        self.version = versions[vi]
        self.t = max(self.t, ERA_START_DATE[era].timestamp() + rng.uniform(0, 3600))
        self._sec = self._day = -1  # the zone/locale below change the cached strings

        profile = "busy" if self.busy else rng.choices(("linux", "docker", "mac", "windows"), (45, 30, 12, 13))[0]
        if profile == "busy":
            self.env = 0  # `ollama serve > ollama.log`: bare lines, the shape a big saved log has
            self.tz, self.off_s = rng.choice((("Z", 0), ("-04:00", -4 * 3600)))
        elif profile == "linux":
            self.env = 1 if rng.random() < 0.7 else 0
            self.tz, self.off_s = rng.choice((("Z", 0), ("+08:00", 8 * 3600), ("-04:00", -4 * 3600)))
            self.host = rng.choice(("gpu-box", "lena", "ollama", "pop-os"))
            self.pid = rng.randrange(400, 2_000_000)
            loc = rng.random()
            self.months = MON_IT if loc < 0.08 else MON_EN
            self.zh = 0.08 <= loc < 0.15
            self.bin = rng.choice(("/usr/local/bin/ollama", "/usr/bin/ollama"))
        elif profile == "docker":
            self.env = rng.choice((0, 2, 2, 3))
            self.models_dir = "/root/.ollama/models"
            self.bin = "/usr/bin/ollama"
            self.client = self.client15[4]
        elif profile == "mac":
            self.tz, self.off_s = ("-08:00", -8 * 3600)
            self.models_dir = "/Users/dev/.ollama/models"
            self.bin = "/Applications/Ollama.app/Contents/Resources/ollama"
        else:
            self.windows = True
            self.tz, self.off_s = ("+08:00", 8 * 3600)
            if era == "E2" and rng.random() < 0.3:
                self.tz = ""  # some Windows builds printed no offset at all [S013]
            self.models_dir = "C:\\Users\\dev\\.ollama\\models"
            self.bin = "C:\\Users\\dev\\AppData\\Local\\Programs\\Ollama\\ollama.exe"
        if self.env == 0 and rng.random() < 0.12 and not self.busy:
            self.color = True  # foreground `ollama serve` on a TTY: ANSI-coloured GIN
        self.debug = rng.random() < 0.3 and not self.busy
        self.poller = rng.random() < 0.5 or self.busy
        self._p_head = self.probe_pool("head", "HEAD", "/", self.lat_head)
        self._p_ps = self.probe_pool("ps", "GET", "/api/ps", self.lat_ps)
        self._p_root = self.probe_pool("root", "GET", "/", self.lat_head)
        self._p_tags = self.probe_pool("tags", "GET", "/api/tags", self.lat_tags)
        self.next_poll = self.t + rng.uniform(0, 10)
        ka = rng.choices(("5m0s", "10m0s", "30m0s", "2562047h47m16.854775807s"), (70, 15, 10, 5))[0]
        self.keep_alive_str = ka
        self.keep_alive = {"5m0s": 300.0, "10m0s": 600.0, "30m0s": 1800.0}.get(ka, math.inf)
        self.max_loaded = rng.choice((1, 2, 3, 3))
        self.split_timing = rng.random() < 0.5
        if era == "E2":
            self.ctx_default, self.parallel_default = 2048, rng.choice((1, 4, 4))
        elif era == "E3":
            self.ctx_default = 4096 if self.v(0, 6, 7) else 2048
            self.parallel_default = rng.choice((1, 2, 4))
        elif era == "E4":
            self.ctx_default, self.parallel_default = rng.choice((4096, 4096, 8192, 32768)), 1
        else:
            self.ctx_default, self.parallel_default = rng.choice((4096, 32768, 131072, 262144)), 1
        self.ev("server_start")
        self.ev(f"era_{era}")
        self.startup()

        for _ in range(rng.randint(3, 25)):
            self.episode()
            if self.done:
                return
        self.t += rng.uniform(60, 2 * 86400)  # restart / reboot gap

    def startup(self) -> None:
        rng = self.rng
        self.adv(0.0, 0.5)
        cfg = self.config_map()
        if self.v(0, 7, 0):
            self.info("routes.go:1259", f'msg="server config" env="map[{cfg}]"')
        else:
            self.golog("routes.go:1125", f'INFO server config env="map[{cfg}]"')
        self.adv(0.001, 0.02)
        self.info("images.go:753", f'msg="total blobs: {rng.randrange(3, 60)}"')
        self.info("images.go:760", 'msg="total unused blobs removed: 0"')
        addr = "[::]:11434" if self.models_dir.startswith("/root") else "127.0.0.1:11434"
        self.info("routes.go:1310", f'msg="Listening on {addr} (version {version_str(self.version)})"')
        if not self.v(0, 6, 0):
            self.info(
                "common.go:49",
                'msg="Dynamic LLM libraries" runners="[cpu cpu_avx cpu_avx2 cuda_v11 cuda_v12 rocm_v60102]"',
            )
        self.adv(0.01, 0.3)
        if self.v(0, 12, 4):
            self.info("runner.go:80", 'msg="discovering available GPUs..."')
            self.adv(0.2, 1.5)
            self.info(
                "types.go:42",
                f'msg="inference compute" id={self.gpu_uuid} filter_id="" library=CUDA compute=8.9 '
                'name=CUDA0 description="NVIDIA GeForce RTX 4090" libdirs=ollama,cuda_v12 driver=12.8 '
                'pci_id=0000:01:00.0 type=discrete total="24.0 GiB" available="23.1 GiB"',
            )
        else:
            self.info("gpu.go:217", 'msg="looking for compatible GPUs"')
            self.adv(0.2, 1.5)
            self.info(
                "types.go:107",
                f'msg="inference compute" id={self.gpu_uuid} library=cuda variant=v12 compute=8.9 '
                'driver=12.4 name="NVIDIA GeForce RTX 4090" total="23.6 GiB" available="23.2 GiB"',
            )
        if self.v(0, 15, 5):
            self.info(
                "routes.go:1402",
                'msg="vram-based default context" total_vram="24.0 GiB" default_num_ctx=32768',
            )

    def config_map(self) -> str:
        v = self.v
        debug = ("DEBUG" if self.debug else "INFO") if v(0, 7, 0) else ("true" if self.debug else "false")
        env = {
            "CUDA_VISIBLE_DEVICES": "",
            "GPU_DEVICE_ORDINAL": "",
            "HIP_VISIBLE_DEVICES": "",
            "HSA_OVERRIDE_GFX_VERSION": "",
            "HTTPS_PROXY": "",
            "HTTP_PROXY": "",
            "NO_PROXY": "",
            "OLLAMA_DEBUG": debug,
            "OLLAMA_FLASH_ATTENTION": "false",
            "OLLAMA_HOST": "http://0.0.0.0:11434",
            "OLLAMA_KEEP_ALIVE": self.keep_alive_str,
            "OLLAMA_LLM_LIBRARY": "",
            "OLLAMA_MAX_LOADED_MODELS": str(self.max_loaded),
            "OLLAMA_MAX_QUEUE": "512",
            "OLLAMA_MODELS": self.models_dir.replace("\\", "\\\\"),
            "OLLAMA_NOHISTORY": "false",
            "OLLAMA_NOPRUNE": "false",
            "OLLAMA_NUM_PARALLEL": str(self.parallel_default),
            "OLLAMA_ORIGINS": "[http://localhost https://localhost http://localhost:* https://localhost:* "
            "http://127.0.0.1 https://127.0.0.1 http://127.0.0.1:* https://127.0.0.1:* http://0.0.0.0 "
            "https://0.0.0.0 http://0.0.0.0:* https://0.0.0.0:* app://* file://* tauri://* vscode-webview://*]",
            "OLLAMA_SCHED_SPREAD": "false",
            "ROCR_VISIBLE_DEVICES": "",
        }
        if v(0, 3, 10):
            env["OLLAMA_GPU_OVERHEAD"] = "0"
            env["OLLAMA_LOAD_TIMEOUT"] = "5m0s"
        if v(0, 5, 0):
            env["OLLAMA_KV_CACHE_TYPE"] = ""
        if v(0, 5, 13):
            env["OLLAMA_CONTEXT_LENGTH"] = "0" if v(0, 15, 5) else str(self.ctx_default)
        if v(0, 6, 0) and not v(0, 30, 0):
            env["OLLAMA_NEW_ENGINE"] = "false"
        if v(0, 12, 11):
            env["OLLAMA_VULKAN"] = "false"
        if v(0, 30, 0):
            env["LLAMA_ARG_FIT"] = ""
        return " ".join(f"{k}:{env[k]}" for k in sorted(env))

    # ------------------------------------------------------------------ episodes
    def episode(self) -> None:
        """A burst of requests against one model (loading it first if needed)."""
        rng = self.rng
        model = MODELS[int(self.rand() * len(MODELS))]
        self.idle(rng.expovariate(1 / 600))
        runner = next((r for r in self.runners if r.model is model), None)
        load_s = 0.0
        if runner is None:
            loaded = self.load(model)
            if loaded is None:
                return
            runner, load_s = loaded
        n_req = 1 + int(rng.expovariate(1 / 40))
        for i in range(n_req):
            self.request(runner, load_s if i == 0 else 0.0)
            if len(self.buf) >= FLUSH_LINES:
                self.flush()
                if self.done:
                    return
            # think time between requests: mostly seconds, sometimes a coffee break
            r = self.rand()
            self.idle(-math.log(1.0 - self.rand()) * (25.0 if r < 0.9 else 900.0))

    def idle(self, gap: float) -> None:
        """Advance time by `gap`, emitting health-check polls and keep-alive expiries in order."""
        end = self.t + gap
        ka = self.keep_alive
        doomed: list[Runner] = []
        for r in self.runners:
            if r.last_used and r.last_used + ka <= end:
                doomed.append(r)
        if len(doomed) > 1:
            doomed.sort(key=lambda r: r.last_used)
        times = [r.last_used + ka for r in doomed]
        nxt = self.next_poll if self.poller else math.inf
        if not times and nxt > end:
            self.t = end  # nothing happens in this gap (the common case without a poller)
            return
        polls = 0
        while True:
            te = times[0] if times else math.inf
            limit = te if te < end else end
            if polls < self.poll_cap and nxt <= limit:
                nxt, n = self.poll_run(nxt, limit, self.poll_cap - polls)
                polls += n
            elif te <= end:
                self.t = max(self.t, te)
                times.pop(0)
                self.expire(doomed.pop(0))
            else:
                break
        self.t = max(self.t, end)
        self.next_poll = nxt if nxt > end else end + self.rand() * self.poll_every

    def poll_run(self, nxt: float, limit: float, room: int) -> tuple[float, int]:
        """Open WebUI-style health checks, HEAD / then GET /api/tags every 10 s [S057], from
        `nxt` up to `limit` (at most `room`); returns the next poll time and the count.

        The most frequent lines in the file, so the loop keeps everything in locals and, without
        an envelope, writes both lines of a pair as one buffer entry."""
        rand = self.rand
        buf = self.buf
        head, ps, root, tags = self._p_head, self._p_ps, self._p_root, self._p_tags
        env = self.env
        off = self.off_s
        n = 0
        while nxt <= limit and n < room:
            t = nxt if nxt > self.t else self.t
            r = rand()
            i = int(r * 2048)
            j = (i * 977 + 131) & 2047  # a different latency for the second request of the pair
            if r < 0.08:
                second = ps[j]  # `ollama ps` = HEAD / + GET /api/ps [S007]
            elif r < 0.1:
                second = root[j]  # docker healthcheck [S014]
            else:
                second = tags[j]
            t2 = t + 0.01 + 0.02 * r
            sec = int(t)
            if env or int(t2) != sec:
                # envelopes need per-line sub-second stamps; a pair may straddle a second
                self.t = t
                self.gin_sfx(head[i])
                self.t = t2
                self.gin_sfx(second)
            else:
                local = sec + off
                day = local // 86400
                if day != self._day:
                    self._set_sec(sec)
                g = self._gin_day + HMS[local - day * 86400] + " |"
                buf.append(g + head[i] + "\n" + g + second)
                self.n_gin += 2
                self._junk_in -= 2
                if self._junk_in <= 0:
                    self._junk_in = self._junk_gap()
                    self._junk()
            self.t = t2
            n += 1
            nxt += self.poll_every + rand() * 0.05
        return nxt, n

    # ------------------------------------------------------------------ loading
    def blob_path(self, model: Model) -> str:
        sep = "\\" if self.windows else "/"
        return f"{self.models_dir}{sep}blobs{sep}{self.blob[model.name]}"

    def quoted(self, s: str) -> str:
        # slog escapes backslashes inside quoted values (Windows paths)
        return s.replace("\\", "\\\\")

    def runner_id(self, model: Model, blob: str, num_ctx: int, parallel: int, pid: int) -> str:
        if not self.v(0, 6, 8):
            return f"modelPath={blob}"
        size = human_bytes(model.size_gib * 1.15)
        inference = (
            'runner.inference="[{ID:' + self.gpu_uuid + ' Library:CUDA}]"'
            if self.v(0, 12, 4)
            else "runner.inference=cuda runner.devices=1"
        )
        return (
            f'runner.name=registry.ollama.ai/library/{model.name} {inference} runner.size="{size}" '
            f'runner.vram="{size}" runner.parallel={parallel} runner.pid={pid} runner.model={blob} '
            f"runner.num_ctx={num_ctx}"
        )

    def evict(self, newcomer: Model) -> None:
        victim = min(self.runners, key=lambda r: r.last_used)
        era = self.era
        need = human_bytes(newcomer.size_gib * 1.3)
        if era == "E5":
            self.info(
                "sched.go:551",
                f'msg="llama-server model predicted to exceed available memory, evicting" predicted="{need}" '
                f'predicted_num_ctx={self.ctx_default} num_batch=512 available="14.8 GiB" '
                'gpu_free="21.7 GiB" system_free="14.8 GiB" system_limited=false',
            )
        elif era == "E4" and self.v(0, 13, 1):
            self.info(
                "sched.go:489",
                'msg="model requires more gpu memory than is currently available, '
                f'evicting a model to make space" "loaded layers"={victim.model.layers + 1}',
            )
        elif era == "E4":
            self.info(
                "sched.go:470",
                'msg="model requires more memory than is currently available, '
                f'evicting a model to make space" "loaded layers"={victim.model.layers + 1}',
            )
        else:
            self.dbg(
                "sched.go:183",
                f'msg="max runners achieved, unloading one to make room" runner_count={len(self.runners)}',
            )
        self.dbg("sched.go:786", f'msg="found an idle runner to unload" {victim.rid}')
        self.dbg(
            "sched.go:339",
            f'msg="resetting model to expire immediately to make room" {victim.rid} refCount=0',
        )
        self.ev("evict")
        self.expire(victim, evicted=True)

    def expire(self, runner: Runner, evicted: bool = False) -> None:
        """Unload: at INFO this is invisible (formats §5), so the chain is DEBUG only."""
        if runner not in self.runners:
            return
        self.runners.remove(runner)
        rid = runner.rid
        if not evicted:
            self.ev("keepalive_expire")
            self.dbg("sched.go:341", f'msg="timer expired, expiring to unload" {rid}')
        self.dbg("sched.go:360", f'msg="runner expired event received" {rid}')
        self.dbg(
            "sched.go:375",
            f'msg="got lock to unload expired event" {rid}' if self.v(0, 7, 0) else f'msg="got lock to unload" {rid}',
        )
        server = "llama-server" if self.era == "E5" else "llama server"
        src = "llama_server.go:1120" if self.era == "E5" else "server.go:1061"
        self.dbg(src, f'msg="stopping {server}" pid={runner.pid}')
        self.t += 0.05 + 0.3 * self.rand()
        self.dbg(src, f'msg="{server} stopped" pid={runner.pid}')
        self.dbg("sched.go:864", f'msg="sending an unloaded event" {rid}')
        if evicted:
            self.dbg("sched.go:285", 'msg="unload completed"')
        if not self.v(0, 12, 6) and self.rand() < 0.1:
            self.t += 5.0
            self.slog(
                "WARN",
                "sched.go:646",
                f'msg="gpu VRAM usage didn\'t recover within timeout" '
                f"seconds=5.0{self.rng.randrange(10_000_000, 99_999_999)} {rid}",
            )
            self.ev("vram_warn")

    def load(self, model: Model) -> tuple[Runner, float] | None:
        """Emit an era-specific load sequence; returns the runner and the load seconds."""
        rng = self.rng
        if len(self.runners) >= self.max_loaded:
            self.evict(model)
        blob = self.blob_path(model)
        num_ctx = min(self.ctx_default, model.ctx_train)
        if rng.random() < 0.15:
            num_ctx = rng.choice((8192, 16384, 32768))  # request-level options.num_ctx => reload
        parallel = 1 if model.embed else self.parallel_default
        pid = rng.randrange(1000, 4_000_000)
        port = rng.randrange(32768, 61000)
        load_s = rng.lognormvariate(math.log(4.0), 0.8)
        self.ev("load_start")
        self.dbg(
            "sched.go:219",
            f'msg="loading first model" model={blob}'
            if not self.runners
            else f'msg="new model fits with existing models, loading" model={blob}',
        )
        for r in self.runners:
            self.info(
                "sched.go:1332",
                f'msg="updated VRAM based on existing loaded models" gpu={self.gpu_uuid} '
                f'library=cuda total="23.6 GiB" available="{human_bytes(23.2 - r.model.size_gib)}"',
            )
        fail = rng.random()
        era = self.era
        if era == "E5":
            self.load_e5(model, blob, num_ctx, port, load_s)
        elif era == "E4":
            self.load_e4(model, blob, num_ctx, parallel, port, load_s)
        else:
            self.load_e2e3(model, blob, num_ctx, parallel, port, load_s)
        if fail < 0.02:
            self.load_failure(model)
            return None
        if fail < 0.03:
            # client gave up while the model was loading [S051]
            self.t += 2 + 5 * self.rand()
            src = "llama_server.go:540" if era == "E5" else "server.go:562"
            who = "llama-server" if era == "E5" else "server"
            self.slog("WARN", src, f'msg="client connection closed before {who} finished loading, aborting load"')
            self.slog(
                "ERROR",
                "sched.go:455",
                'msg="error loading llama server" '
                'error="timed out waiting for llama runner to start: context canceled"',
            )
            self.gin(499, gin_latency(int((load_s + 3) * 1e9)), "POST", INFERENCE_PATHS[era][0])
            self.ev("load_abort")
            return None
        rid = self.runner_id(model, blob, num_ctx, parallel, pid)
        runner = Runner(model, blob, num_ctx, parallel, pid, port, rid)
        self.runners.append(runner)
        if era == "E5":
            self.info("llama_server.go:1402", f'msg="llama-server started in {load_s:.2f} seconds"')
            self.info("sched.go:520", f'msg="loaded runners" count={len(self.runners)}')
        else:
            self.info("server.go:1288", f'msg="llama runner started in {load_s:.2f} seconds"')
        self.dbg(
            "sched.go:462",
            f'msg="finished setting up runner" model={blob}'
            if not self.v(0, 7, 0)
            else f'msg="finished setting up" {rid}',
        )
        self.ev("load_done")
        return runner, load_s

    def _raw_progress(self, lines: list[str], load_s: float) -> None:
        step = load_s / (len(lines) + 1)
        for line in lines:
            self.t += step * (0.5 + self.rand())
            self.raw(line)

    def _llama_meta(self, model: Model, legacy: bool) -> list[str]:
        p = "llm_load_print_meta" if legacy else "print_info"
        return [
            "llama_model_loader: loaded meta data with 29 key-value pairs and "
            f"{model.layers * 9 + 3} tensors from {self.blob_path(model)} (version GGUF V3 (latest))",
            f"{p}: file format = GGUF V3 (latest)",
            f"{p}: arch                  = {model.arch}",
            f"{p}: vocab type            = BPE",
            f"{p}: n_vocab               = 128256",
            f"{p}: n_ctx_train           = {model.ctx_train}",
            f"{p}: n_embd                = 4096",
            f"{p}: n_layer               = {model.layers}",
            f"{p}: n_head                = 32",
            f"{p}: n_head_kv             = 8",
            f"{p}: model type            = {model.params.split()[0]}{model.params.split()[1]}",
            f"{p}: model params          = {model.params}",
            f"{p}: general.name          = {model.name}",
        ]

    def _tensors(self, model: Model, legacy: bool, num_ctx_total: int) -> list[str]:
        lt = "llm_load_tensors" if legacy else "load_tensors"
        ctxp = "llama_new_context_with_model" if legacy else "llama_context"
        n = model.layers + 1
        return [
            f"{lt}: offloading {model.layers} repeating layers to GPU",
            f"{lt}: offloading output layer to GPU",
            f"{lt}: offloaded {n}/{n} layers to GPU",
            f"{lt}:        CUDA0 model buffer size = {model.size_gib * 1024 * 0.93:10.2f} MiB",
            f"{lt}:   CPU_Mapped model buffer size =   281.81 MiB",
            f"{ctxp}: n_ctx         = {num_ctx_total}",
            f"{ctxp}: n_batch       = 512",
            f"{ctxp}: flash_attn    = 0",
            f"{ctxp}:      CUDA0 compute buffer size =   258.50 MiB",
        ]

    def load_e2e3(self, model: Model, blob: str, num_ctx: int, parallel: int, port: int, load_s: float) -> None:
        total_ctx = num_ctx * parallel
        gpu = "single GPU, " if self.rand() < 0.7 else ""
        self.info(
            "sched.go:714",
            f'msg="new model will fit in available VRAM in {gpu}loading" model={blob} '
            f"gpu={self.gpu_uuid} parallel={parallel} available=24911167488 "
            f'required="{human_bytes(model.size_gib * 1.2)}"',
        )
        self.adv(0.01, 0.1)
        self.info("server.go:103", 'msg="system memory" total="62.7 GiB" free="55.3 GiB" free_swap="8.0 GiB"')
        n = model.layers + 1
        offload = "msg=offload library=cuda" if self.v(0, 5, 12) else 'msg="offload to cuda"'
        self.info(
            "memory.go:326",
            f'{offload} layers.requested=-1 layers.model={n} layers.offload={n} layers.split="" '
            f'memory.available="[23.2 GiB]" memory.gpu_overhead="0 B" '
            f'memory.required.full="{human_bytes(model.size_gib * 1.2)}" '
            f'memory.required.partial="{human_bytes(model.size_gib * 1.2)}" '
            f'memory.required.kv="{human_bytes(total_ctx / 8192)}" memory.required.allocations="[5.8 GiB]" '
            f'memory.weights.total="{human_bytes(model.size_gib)}" memory.weights.repeating="3.9 GiB" '
            'memory.weights.nonrepeating="411.0 MiB" memory.graph.full="560.0 MiB" '
            'memory.graph.partial="677.5 MiB"',
        )
        if self.era == "E2":
            exe = f"/tmp/ollama{self.pid}/runners/cuda_v12/ollama_llama_server"
        else:
            exe = f"{self.bin} runner" + (" --ollama-engine" if self.v(0, 6, 0) and self.rand() < 0.4 else "")
        embed = " --embedding" if model.embed or self.era == "E2" else ""
        cmd = (
            f"{exe} --model {blob} --ctx-size {total_ctx} --batch-size 512{embed} "
            f"--n-gpu-layers {n} --threads 8 --parallel {parallel} --port {port}"
        )
        self.info("server.go:391", f'msg="starting llama server" cmd="{self.quoted(cmd)}"')
        self.info("sched.go:450", f'msg="loaded runners" count={len(self.runners) + 1}')
        self.info("server.go:591", 'msg="waiting for llama runner to start responding"')
        if self.era == "E3":
            go = "starting ollama engine" if "--ollama-engine" in cmd else "starting go runner"
            self.adv(0.01, 0.05)
            self.info("runner.go:935", f'msg="{go}"')
            self.info("runner.go:993", f'msg="Server listening on 127.0.0.1:{port}"')
        self.info("server.go:625", 'msg="waiting for server to become available" status="llm server loading model"')
        legacy = not self.v(0, 6, 0)
        lines = [*self._llama_meta(model, legacy), *self._tensors(model, legacy, total_ctx)]
        self._raw_progress(lines, load_s * 0.9)
        if self.era == "E2":
            self.cpp(f'INFO [main] model loaded | tid="{130623106379776 + port}" timestamp={int(self.t)}')
        if self.debug:
            for p in (0.25, 0.62, 1.0):
                self.dbg("server.go:636", f'msg="model load progress {p:.2f}"')
                self.t += 0.25

    def load_e4(self, model: Model, blob: str, num_ctx: int, parallel: int, port: int, load_s: float) -> None:
        engine = " --ollama-engine" if self.rand() < 0.6 else ""
        self.info(
            "server.go:398",
            f'msg="starting runner" cmd="{self.quoted(self.bin)} runner{engine} '
            f'--model {self.quoted(blob)} --port {port}"',
        )
        self.adv(0.005, 0.02)
        self.info("runner.go:1251", 'msg="starting ollama engine"' if engine else 'msg="starting go runner"')
        self.info("runner.go:1286", f'msg="Server listening on 127.0.0.1:{port}"')
        self.info("server.go:503", 'msg="system memory" total="62.7 GiB" free="55.3 GiB" free_swap="8.0 GiB"')
        self.info(
            "server.go:510",
            f'msg="gpu memory" id={self.gpu_uuid} library=CUDA available="22.6 GiB" '
            'free="23.1 GiB" minimum="457.0 MiB" overhead="0 B"',
        )
        n = model.layers + 1
        self.info("server.go:757", f'msg="loading model" "model layers"={n} requested=-1')
        fa = "Enabled" if self.v(0, 13, 0) else "true"
        for op in ("fit", "alloc", "commit"):
            self.adv(0.01, 0.3)
            self.info(
                "runner.go:1284",
                f'msg=load request="{{Operation:{op} LoraPath:[] Parallel:{parallel} BatchSize:512 '
                f"FlashAttention:{fa} KvSize:{num_ctx * parallel} KvCacheType: NumThreads:8 "
                f"GPULayers:{n}[ID:{self.gpu_uuid} Layers:{n}(0..{n - 1})] MultiUserCache:false "
                'ProjectorPath: MainGPU:0 UseMmap:false}"',
            )
        if engine:
            self.info("ggml.go:487", f'msg="offloading {model.layers} repeating layers to GPU"')
            self.info("ggml.go:493", 'msg="offloading output layer to GPU"')
            self.info("ggml.go:498", f'msg="offloaded {n}/{n} layers to GPU"')
        else:
            self._raw_progress([*self._llama_meta(model, False), *self._tensors(model, False, num_ctx)], load_s * 0.5)
        self.info("device.go:245", f'msg="model weights" device=CUDA0 size="{human_bytes(model.size_gib)}"')
        self.info("device.go:256", f'msg="kv cache" device=CUDA0 size="{human_bytes(num_ctx * parallel / 8192)}"')
        self.info("device.go:267", 'msg="compute graph" device=CUDA0 size="258.5 MiB"')
        self.info("device.go:277", f'msg="total memory" size="{human_bytes(model.size_gib * 1.2)}"')
        self.info("sched.go:500", f'msg="loaded runners" count={len(self.runners) + 1}')
        self.info("server.go:1250", 'msg="waiting for llama runner to start responding"')
        self.info("server.go:1284", 'msg="waiting for server to become available" status="llm server loading model"')
        self.t += load_s * 0.5

    def load_e5(self, model: Model, blob: str, num_ctx: int, port: int, load_s: float) -> None:
        if self.runners:
            self.info(
                "sched.go:560",
                f'msg="llama-server model fits alongside existing models" '
                f'predicted="{human_bytes(model.size_gib * 1.3)}" predicted_num_ctx={num_ctx} num_batch=512 '
                'available="20.1 GiB" gpu_free="21.7 GiB" system_free="48.0 GiB" system_limited=false',
            )
        self.info(
            "sched.go:1143",
            'msg="selecting GPU backend for llama-server model" library=CUDA gpu_count=1 available_gpu_count=1',
        )
        self.info("server.go:109", f'msg="using llama-server for model" model={blob}')
        if self.windows:
            exe = self.bin.rsplit("\\", 1)[0] + "\\lib\\ollama\\llama-server.exe"
        else:
            exe = self.bin.rsplit("/", 2)[0] + "/lib/ollama/llama-server"
        cmd = (
            f"{exe} --model {blob} --port {port} --host 127.0.0.1 --no-webui --offline -c {num_ctx} -np 1 "
            "--log-verbosity 4 --no-log-prefix --no-log-timestamps --flash-attn auto -b 512 -ub 512 "
            "--context-shift --keep 4"
        )
        self.info("llama_server.go:433", f'msg="starting llama-server" cmd="{self.quoted(cmd)}"')
        self.info("sched.go:463", 'msg="system memory" total="62.7 GiB" free="55.3 GiB" free_swap="8.0 GiB"')
        self.info(
            "sched.go:470",
            f'msg="gpu memory" id={self.gpu_uuid} library=CUDA available="22.6 GiB" '
            'free="23.1 GiB" minimum="457.0 MiB" overhead="0 B"',
        )
        self.info("llama_server.go:512", f'msg="loading model via llama-server" model={blob}')
        self.info("llama_server.go:1380", 'msg="waiting for llama-server to start responding"')
        lines = [
            "ggml_cuda_init: found 1 CUDA devices:",
            "  Device 0: NVIDIA GeForce RTX 4090, compute capability 8.9, VMM: yes",
            "load_backend: loaded CUDA backend from /usr/lib/ollama/libggml-cuda.so",
            "build: 9452 (3f2a7c1e) with cc (GCC) 11.2.0 for x86_64-linux-gnu",
            "llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 4090) (0000:01:00.0) - "
            "23592 MiB free",
            *self._llama_meta(model, False),
            *self._tensors(model, False, num_ctx),
            f"llama_context: n_ctx_seq     = {num_ctx}",
            f"llama_kv_cache:      CUDA0 KV buffer size = {num_ctx / 8:10.2f} MiB",
            "srv    load_model: initializing slots, n_slots = 1",
            f"slot   load_model: id  0 | task -1 | new slot, n_ctx = {num_ctx}",
            "main: model loaded",
            f"main: server is listening on http://127.0.0.1:{port}",
            "srv  update_slots: all slots are idle",
        ]
        self._raw_progress(lines, load_s)

    def load_failure(self, model: Model) -> None:
        """Runner crashed while loading: raw CUDA OOM, terminated, error loading, GIN 500 [S052]."""
        mib = model.size_gib * 1024 * 0.4
        self.raw(
            f"ggml_backend_cuda_buffer_type_alloc_buffer: allocating {mib:.2f} MiB on device 0: "
            "cudaMalloc failed: out of memory"
        )
        self.raw(f"alloc_tensor_range: failed to allocate CUDA0 buffer of size {int(mib * 1048576)}")
        self.t += 0.2 + self.rand()
        if self.era == "E5":
            self.slog("ERROR", "llama_server.go:1011", 'msg="llama-server terminated" error="exit status 1" exit=1')
            err = "llama-server process has terminated: cudaMalloc failed: out of memory"
        else:
            if self.v(0, 2, 8):
                self.slog("ERROR", "server.go:460", 'msg="llama runner terminated" error="exit status 2"')
            err = "llama runner process has terminated: cudaMalloc failed: out of memory"
        self.slog("ERROR", "sched.go:455", f'msg="error loading llama server" error="{err}"')
        self.dbg("sched.go:457", 'msg="triggering expiration for failed load"')
        self.gin(500, gin_latency(int(self.rng.uniform(1.5, 9.0) * 1e9)), "POST", INFERENCE_PATHS[self.era][0])
        self.ev("load_fail")

    # ------------------------------------------------------------------ requests
    def request(self, runner: Runner, load_s: float) -> None:
        rand = self.rand
        era = self.era
        model = runner.model
        rid = runner.rid
        t0 = self.t
        debug = self.debug
        if debug:
            self.slog("DEBUG", "sched.go:810", f'msg="evaluating already loaded model" model={runner.blob}')
        n_prompt = self.pool_prompt[int(rand() * 4096)]
        slot_ctx = runner.num_ctx
        truncated = n_prompt > slot_ctx
        keep = 4 if era == "E5" or rand() < 0.5 else 5
        self.t += 0.001 + rand() * 0.01
        if truncated:
            self.ev("truncation")
            if era == "E2":
                erase = n_prompt - slot_ctx + (slot_ctx - keep) // 2
                self.cpp(
                    f"INFO [update_slots] input truncated | n_ctx={slot_ctx} n_erase={erase} n_keep={keep} "
                    f'n_left={slot_ctx - keep} n_shift={(slot_ctx - keep) // 2} tid="130623106379776" '
                    f"timestamp={int(self.t)}"
                )
            elif era == "E5":
                limit = slot_ctx - max((slot_ctx - keep) // 2, 1)
                self.slog(
                    "WARN",
                    "llama_server.go:866",
                    f'msg="truncating input prompt" limit={limit} prompt={n_prompt} keep={keep} new={limit}',
                )
            else:
                self.slog(
                    "WARN",
                    "runner.go:131",
                    f'msg="truncating input prompt" limit={slot_ctx} prompt={n_prompt} keep={keep} new={slot_ctx}',
                )
        n_eff = min(n_prompt, slot_ctx)
        cached = int(n_eff * rand() * 0.9) if rand() < 0.6 else 0
        if debug and era in ("E3", "E4") and self.v(0, 7, 0):
            self.slog(
                "DEBUG",
                "server.go:1366",
                f'msg="completion request" images=0 prompt={n_prompt * 4} format=""',
            )
            self.slog(
                "DEBUG",
                "cache.go:104",
                f'msg="loading cache slot" id=0 cache={cached} prompt={n_eff} used={cached} remaining={n_eff - cached}',
            )
        if model.embed:
            n_gen = 0
            pp_tps = 4000 + 8000 * rand()
        else:
            n_gen = self.pool_gen[int(rand() * 4096)]
            pp_tps = 800 + 4200 * rand()
        tg_tps = 15 + 125 * rand()
        pp_ms = (n_eff - cached) / pp_tps * 1000
        tg_ms = n_gen / tg_tps * 1000
        status = 200
        r = rand()
        if r < 0.015:
            status = 499  # client closed the connection mid-generation
            tg_ms *= rand()
        elif r < 0.02:
            status = 500
        if era == "E5" and not model.embed:
            self.slot_lines(runner, n_prompt, n_eff, cached, n_gen, pp_ms, tg_ms, keep, status)
        else:
            self.t += (pp_ms + tg_ms) / 1000
        if status == 499:
            src = "llama_server.go:980" if era == "E5" else "runner.go:690"
            if era != "E2":
                self.info(src, 'msg="aborting completion request due to client closing the connection"')
        elif status == 500 and era in ("E3", "E4"):
            self.slog(
                "ERROR",
                "server.go:1497",
                f'msg="post predict" error="Post \\"http://127.0.0.1:{runner.port}/completion\\": EOF"',
            )
        elif status == 500 and era == "E5":
            self.slog("ERROR", "llama_server.go:1160", 'msg="llama-server chat error" error="EOF"')
        self.t += 0.0005 + rand() * 0.003
        latency_ns = int((self.t - t0 + load_s) * 1e9) + int(rand() * 1000)
        if model.embed:
            path = EMBED_PATHS[int(rand() * len(EMBED_PATHS))]
        else:
            paths = INFERENCE_PATHS[era]
            path = paths[int(rand() * len(paths))]
        if rand() < 0.01:
            path += "?stream=false"  # the logged path includes the query string
        if debug:
            self.dbg("sched.go:466", 'msg="context for request finished"' + (f" {rid}" if self.v(0, 6, 8) else ""))
            if self.keep_alive == math.inf or not runner.timer:
                self.dbg(
                    "sched.go:339",
                    f'msg="runner with non-zero duration has gone idle, adding timer" '
                    f"{rid} duration={self.keep_alive_str}",
                )
            else:
                self.dbg(
                    "sched.go:344",
                    f'msg="runner with non-zero duration has gone idle, resetting timer" '
                    f"{rid} duration={self.keep_alive_str}",
                )
            self.dbg("sched.go:357", f'msg="after processing request finished event" {rid} refCount=0')
        runner.timer = True
        self.gin(status, gin_latency(latency_ns), "POST", path)
        runner.last_used = self.t
        self.n_request += 1
        if status != 200:
            self.ev(f"status_{status}")
        if rand() < 0.05:
            self.t += 0.05
            self.gin(200, self.lat_show[int(rand() * 2048)], "POST", "/api/show")

    def slot_lines(
        self,
        runner: Runner,
        n_prompt: int,
        n_eff: int,
        cached: int,
        n_gen: int,
        pp_ms: float,
        tg_ms: float,
        keep: int,
        status: int,
    ) -> None:
        """llama-server's own per-request lines, untimestamped (E5) [S019, S048]."""
        runner.task += 1 + int(self.rand() * 3)
        head = f"id  0 | task {runner.task} | "
        if cached:
            first = (
                "slot get_availabl: id  0 | task -1 | selected slot by LCP similarity, sim_best = "
                f"{cached / n_eff:.3f} (> 0.100 thold), f_keep = {min(1.0, cached / n_eff + 0.02):.3f}"
            )
        else:
            first = f"slot get_availabl: id  0 | task -1 | selected slot by LRU, t_last = {int(self.t * 1e6)}"
        block = [first]
        if self.rand() < 0.5:
            block += SAMPLER_BLOCK
        block.append(f"slot launch_slot_: {head}processing task, is_child = 0")
        block.append(
            f"slot update_slots: {head}new prompt, n_ctx_slot = {runner.num_ctx}, n_keep = {keep}, "
            f"task.n_tokens = {n_eff}"
        )
        block.append(f"slot update_slots: {head}n_tokens = {cached}, memory_seq_rm [{cached}, end)")
        self.raw_block(block)
        t_start = self.t
        chunks = min((n_eff - cached) // 2048, 6)
        for i in range(1, chunks + 1):
            done = cached + i * 2048
            self.t = t_start + pp_ms * i * 2048 / max(1, n_eff - cached) / 1000
            el = self.t - t_start
            self.raw_block(
                [
                    f"slot print_timing: {head}prompt processing, n_tokens = {done:6d}, progress = "
                    f"{done / n_eff:.2f}, t = {el:6.2f} s / {(done - cached) / max(el, 1e-3):.2f} "
                    "tokens per second",
                    f"slot update_slots: {head}cached n_tokens = {done}, memory_seq_rm [{done}, end)",
                ]
            )
        self.t = t_start + (pp_ms + tg_ms) / 1000
        n_pp = max(1, n_eff - cached)
        pe = (
            f"prompt eval time = {pp_ms:10.2f} ms / {n_pp:5d} tokens ({pp_ms / n_pp:8.2f} ms per token, "
            f"{n_pp / max(pp_ms, 1e-3) * 1000:8.2f} tokens per second)"
        )
        ng = max(1, n_gen)
        ee = (
            f"       eval time = {tg_ms:10.2f} ms / {ng:5d} tokens ({tg_ms / ng:8.2f} ms per token, "
            f"{ng / max(tg_ms, 1e-3) * 1000:8.2f} tokens per second)"
        )
        tt = f"      total time = {pp_ms + tg_ms:10.2f} ms / {n_pp + ng:5d} tokens"
        if self.split_timing:
            # some llama.cpp builds print the header, then three unprefixed lines (formats §6.3)
            block = [f"slot print_timing: {head}", pe, ee, tt]
        else:
            block = [
                f"slot print_timing: {head}{pe}",
                f"slot print_timing: {head}{ee.lstrip()}",
                f"slot print_timing: {head}{tt.lstrip()}",
            ]
        block.append(
            f"slot      release: {head}stop processing: n_tokens = {n_eff + ng}, truncated = {int(n_prompt > n_eff)}"
        )
        block.append("srv  update_slots: all slots are idle")
        self.raw_block(block)

    # ------------------------------------------------------------------ driver
    def stats(self) -> Stats:
        kinds = {
            "label": 1,
            "slog": self.n_slog,
            "gin": self.n_gin,
            "golog": self.n_golog,
            "raw": self.n_raw,
            "llamacpp_text": self.n_cpp,
            "junk": self.n_junk,
        }
        events = dict(self.events, request=self.n_request, lines_with_envelope=self.n_env)
        return Stats(lines=sum(kinds.values()), bytes=self.written, kinds=kinds, events=events)


def generate(path: str, size: int, seed: int, profile: str = "mixed") -> tuple[Stats, int]:
    """Write the synthetic log; returns generated-line counts and how many were cut at the end."""
    with open(path, "wb") as f:
        gen = Generator(seed, size, f, profile)
        gen.label()
        while not gen.done:
            gen.session()
            if len(gen.buf) >= FLUSH_LINES:
                gen.flush()
    return gen.stats(), gen.tail_cut_lines


def source_digest() -> str:
    """Hash of this file: lets the benchmark notice that a reused log came from older code."""
    with open(__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="output path")
    ap.add_argument("--size", type=parse_size, default=parse_size("1G"), help="target size, e.g. 1G, 200M")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", choices=PROFILES, default="mixed", help="mixed (default) or busy (see PROFILES)")
    ap.add_argument("--meta", help="write counts as JSON here (default: OUT.meta.json; '-' to skip)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    st, cut = generate(args.out, args.size, args.seed, args.profile)
    elapsed = time.perf_counter() - t0
    meta = {
        "synthetic": True,
        "generator": "bench/gen_ollama_log.py",
        "generator_sha256": source_digest(),
        "seed": args.seed,
        "profile": args.profile,
        "requested_size": args.size,
        "bytes": os.path.getsize(args.out),
        "seconds": round(elapsed, 3),
        "mb_per_s": round(os.path.getsize(args.out) / 1e6 / elapsed, 1),
        # counted while generating; the last `tail_cut_lines` generated lines were dropped to
        # respect --size, so these are upper bounds (exact except for that tail)
        "generated_line_kinds": st.kinds,
        "generated_events": st.events,
        "tail_cut_lines": cut,
    }
    if args.meta != "-":
        with open(args.meta or args.out + ".meta.json", "w") as f:
            json.dump(meta, f, indent=2, sort_keys=True)
            f.write("\n")
    print(
        f"wrote {meta['bytes']:,} bytes to {args.out} in {elapsed:.1f}s ({meta['mb_per_s']} MB/s), seed={args.seed}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
