"""Structure-aware fuzzing of ietop's parsers and `ietop analyze`: the engine shared by the bounded tests
(tests/robustness/test_fuzz_*.py, in CI) and the long campaign (bench/fuzz_campaign.py, on demand).

What is fuzzed
--------------
Four targets, each a `Target` that draws a case, materializes it to bytes (`Input`) and checks it:

* ``analyze``: `ietop analyze` end to end, in-process through `ietop.cli.main` (a subprocess costs ~0.5 s of
  interpreter start; in-process a case costs ~50-150 ms for its three runs: the plain report, `--json` by the
  columnar reader, `--json --all-requests` by the per-line reader; `--csv` on every CSV_EVERY-th case).
* ``parsers``: the engine parsers themselves (Ollama, vLLM, MLX, the proxy JSONL), line by line as the
  pipeline feeds them (framing, `strip_inner`, `parse`, `flush`), plus `detect_engine`.
* ``text``: framing (`split_lines` under any chunking, the columnar `window_lines` it must equal), envelopes,
  journald/vLLM JSON records, run starts.
* ``api``: engine API answers (`/api/ps`, `/api/version`, `/v1/models`, `/health`), the proxy's `StreamMeter`,
  proxy JSONL records, Prometheus scrapes.

Every case starts from a real fixture (fixtures/: Ollama, vLLM, MLX logs, scrapes, API answers, recorded
streams) plus a few SYNTHETIC seeds (bench/gen_*_log.py output and proxy JSONL written by the proxy's own
`to_json`: the fixtures hold no llama-server timing line nor any proxy log). A window of its lines is then
mutated by operations that keep the line structure (`OPS`): hostile numbers (400 and 5,001 digits, negative,
NaN/inf spellings, non-ASCII digits), cut/duplicated/reordered/deleted lines, swapped and impossible
timestamps, C0/C1/DEL/bidi controls and escape sequences, invalid UTF-8, NUL padding (logrotate's
copytruncate), very long lines, and engine fields (model names, token counts, durations, status codes)
replaced by hostile values.

Why hypothesis, and no coverage-guided (atheris) target
--------------------------------------------------------
`pip install atheris` works here: 3.0.0 comes as a manylinux cp311 wheel (nothing to compile), and it runs. It
was tried and not adopted:

1. Measured: 60 s of atheris on the four engine parsers plus `detect_engine` (all instrumented, seeded with 666
   20-line slices of the fixtures) ran 36,884 inputs, reached ~1,600 edges and found nothing; in the same minute
   the structured mutator finds the proxy JSONL OverflowError (KNOWN N1) and more.
2. The defects that matter here are semantic: an `Infinity` in `--json`, a C1 control in the report, a line
   count that does not add up, the columnar reader disagreeing with the per-line one. They need a well-formed
   multi-line log around one hostile field and an oracle over the whole report; byte mutations guided by edge
   coverage spend their time on prefixes the first regex rejects.
3. Coverage sees little of the hot path: its branches are taken inside `re` (C) and polars (Rust).
4. It is a native dependency with no macOS arm64 wheel for 3.0.0 (pip finds only 2.2.2 there): MLX users and
   their machines are on macOS. hypothesis is already a test dependency, so pyproject.toml is unchanged.

Hypothesis drives the bounded tests: it shrinks a failing `Recipe` (fewer operations, a shorter window, the
first seed) so a failure reads as a small input. The campaign draws the same recipes from a seeded
`random.Random` (a case is reproducible from `(seed, target, index)`), runs each case in a worker process
under a hard per-case timeout (hangs), and minimizes each new failure itself (line- then byte-level ddmin).

Invariants (`Violation.kind`)
-----------------------------
crash (an exception escapes `main`), exit (a code other than 0/1/2, or 2 for a readable file), stderr (a
failure not reported as one `ietop: error:` line, or a traceback on stderr), partial_stdout (output written
before a failure), modes_disagree (the text and JSON runs exit differently), json_invalid (not strict JSON:
`NaN`/`Infinity` rejected), json_nonfinite (a float literal that overflows to inf), json_int_beyond_2^53 (an
integer no JSON reader holds exactly; the bound `parsers.events.sane` uses), lines_not_conserved, bulk_differs
(the columnar reader's document differs from the per-line one's beyond the probe folding that
tests/pipeline/test_bulk_differential.py documents), control_char_text / control_char_json / control_char_csv
(C0 but \\n and \\t, DEL, C1, bidi U+202A-E and U+2066-9 raw in an output; JSON escapes C0 itself),
parser_exception, parser_type (a return value that is not of its annotated type), nul_padding_changes_events
(a run of NULs glued before a line changes what it says), framing (chunking or the columnar splitter changes
the lines), slow_line (one line over SLOW_LINE_S in a parser), glued_records_lost, hang (a case over HANG_S),
and in the campaign memory (a worker's peak RSS past its MEMORY_MB).

Line conservation: the JSON gives, per source, `lines` (read) and `unparsed_lines`; the parsed ones are the
rest, so "parsed + unparsed = lines read" holds when `lines` is the file's physical line count (every "\\n",
plus a last line without one) and 0 <= `unparsed_lines` <= `lines`: both are checked.

Known defects (`KNOWN`: K* were expected, N* found by this harness) are matched by kind and key. While one is
`open`, the bounded tests tolerate it (counted with `hypothesis.event`: `--hypothesis-show-statistics` lists
them) and test_fuzz_known_defects.py runs its one-line reproducer as a strict xfail; a fix turns that into an
XPASS, which asks for `open=False`: the reproducer is then a regression test, and the fuzz fails on it again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import io
import json
import math
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import hypothesis

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
HANG_S = 10.0
"""A case that runs longer than this is a hang (the campaign kills its worker; the tests' alarm raises)."""
MAX_WINDOW = 80
"""Lines of a seed one case starts from: enough for a load to span its lines, small enough for ~20 cases/s."""
MAX_OPS = 6
SLOW_LINE_S = 2.0
"""One line that takes a parser this long is a defect: the framing caps a line at 1 MiB, and the parsers read
tens of MB/s, so 2 s is two orders of magnitude of slack (a loaded CI machine included)."""
CSV_EVERY = 8
"""`--csv` on every CSV_EVERY-th analyze case: polars' writer costs as much as the other three runs together."""

# ---------------------------------------------------------------------------------------------- seeds


@dataclass(frozen=True)
class Seed:
    """One seed file as physical lines (no "\\n"; a "\\r" before it is kept: CRLF is data for the framing)."""

    name: str
    engine: str
    """ollama, vllm, mlx, proxy, metrics (a Prometheus scrape) or text (anything else)."""
    lines: tuple[bytes, ...]


def _lines(data: bytes) -> tuple[bytes, ...]:
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    return tuple(parts)


def _engine_of(path: Path) -> str:
    rel = path.relative_to(ROOT).as_posix()
    if "/metrics/" in rel and "metrics" in path.name:
        return "metrics"
    for engine in ("ollama", "vllm", "mlx"):
        if f"/{engine}/" in rel:
            return engine
    return "ollama"  # fixtures/synthetic and the demo incident are Ollama-shaped


def fixture_logs() -> list[Path]:
    """Every log-like fixture: engine logs, pasted logs (.txt), stderr captures, scrapes; not the client
    transcripts (.jsonl: requests, not logs), the READMEs nor the expectations."""
    found = [
        p for p in FIXTURES.rglob("*")
        if p.is_file() and p.suffix in (".log", ".txt", ".stderr") and "README" not in p.name
        and "INDEX" not in p.name and "/streams/" not in p.as_posix()
    ]
    demo = ROOT / "ietop" / "demo" / "incident.log"
    return sorted(found) + ([demo] if demo.exists() else [])


def _load_module(path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"_fuzz_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there while the module runs
    spec.loader.exec_module(module)
    return module


def _synthetic_seeds() -> list[Seed]:
    """SYNTHETIC seeds from the benchmark generators (deterministic per seed): no real fixture has llama-server
    timing lines (`eval time = … ms / N tokens`), which feed the per-request facts the model divides by."""
    seeds: list[Seed] = []
    with tempfile.TemporaryDirectory(prefix="ietop-fuzz-gen-") as tmp:
        out = Path(tmp) / "gen.log"
        gen = _load_module(ROOT / "bench" / "gen_ollama_log.py")
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            gen.generate(str(out), 256 << 10, 7, "mixed")
        seeds.append(Seed("SYNTHETIC gen_ollama_log --profile mixed --size 256K --seed 7", "ollama",
                          _lines(out.read_bytes())))
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            gen.generate(str(out), 256 << 10, 7, "busy")
        # Its GET/HEAD access lines (nine in ten: health checks) dropped, so a window holds a few requests'
        # llama-server slot and timing lines rather than 80 probes.
        busy = tuple(line for line in _lines(out.read_bytes())
                     if not (line.startswith(b"[GIN]") and (b"| GET " in line or b"| HEAD " in line)))
        seeds.append(Seed("SYNTHETIC gen_ollama_log --profile busy --size 256K --seed 7, probes dropped",
                          "ollama", busy))
        gen_v = _load_module(ROOT / "bench" / "gen_vllm_log.py")
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            gen_v.generate(str(out), 48 << 10, 7)
        seeds.append(Seed("SYNTHETIC gen_vllm_log --size 48K --seed 7", "vllm", _lines(out.read_bytes())))
    seeds.append(Seed("SYNTHETIC proxy JSONL (parsers.api.proxy_log.to_json)", "proxy", proxy_seed_lines()))
    return seeds


def proxy_seed_lines() -> tuple[bytes, ...]:
    """`ietop proxy --jsonl` lines written by the proxy's own writer (SYNTHETIC values)."""
    from parsers.api.proxy_log import to_json
    from parsers.events import ProxyRequest

    t0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=timezone.utc)
    rows = [
        ProxyRequest(0, t0.replace(second=1), "POST", "/api/chat", 200, "llama3:8b", True, 0.1, 0.25, 0.02, 2.0,
                     80, 120, 80, 0, None, 300, 4000, None),
        ProxyRequest(0, t0.replace(second=5), "POST", "/api/chat", 200, "llama3:8b", True, 4.0, 9.5, 0.02, 11.0,
                     70, 130, 70, 10, 9.1, 310, 4100, None),
        ProxyRequest(0, t0.replace(second=20), "POST", "/v1/chat/completions", 200, "qwen3:4b", False, 0.2, 0.2,
                     None, 1.5, 1, 40, 60, None, None, 200, 900, None),
        ProxyRequest(0, t0.replace(second=30), "POST", "/v1/chat/completions", 200, "qwen3:4b", True, 0.05, 0.1,
                     0.02, 0.3, 2, 40, 2, 0, None, 200, 120, "client disconnected"),
        ProxyRequest(0, t0.replace(second=31), "GET", "/api/tags", 200, None, False, 0.001, None, None, 0.002, 0,
                     None, None, None, None, 0, 500, None),
        ProxyRequest(0, t0.replace(second=40), "POST", "/api/generate", 500, "llama3:8b", True, 0.5, None, None,
                     0.6, 0, None, None, None, None, 100, 80, "upstream 500"),
    ]
    return tuple(to_json(r).encode() for r in rows)


@functools.lru_cache(maxsize=1)
def log_seeds() -> tuple[Seed, ...]:
    """The seeds of the analyze, parsers and text targets: every fixture log, then the synthetic ones."""
    seeds = [Seed(p.relative_to(ROOT).as_posix(), _engine_of(p), _lines(p.read_bytes())) for p in fixture_logs()]
    seeds = [s for s in seeds if s.lines]
    return tuple(seeds + _synthetic_seeds())


SEED_WEIGHTS = {"ollama": 24, "vllm": 24, "mlx": 18, "metrics": 8, "proxy": 12, "synthetic": 14}
"""Shares of the cases per seed group (the engine, or "synthetic" for the generators' logs): 49 of the fixture
logs are Ollama's and one seed is a proxy log, so a uniform draw over seeds would almost never reach the proxy
reader, the scrape reader or the llama-server timing lines only the synthetic logs have."""


@functools.lru_cache(maxsize=1)
def seed_deck() -> tuple[int, ...]:
    """Indices into `log_seeds()`, each engine's seeds repeated to its SEED_WEIGHTS share of 1,000 entries:
    a case draws an entry, so each engine gets its share whatever its number of seeds."""
    seeds = log_seeds()
    deck: list[int] = []
    for engine, weight in SEED_WEIGHTS.items():
        group = [i for i, s in enumerate(seeds) if (s.engine == engine and not s.name.startswith("SYNTHETIC gen"))
                 or (engine == "synthetic" and s.name.startswith("SYNTHETIC gen"))]
        deck += [group[j % len(group)] for j in range(weight * 10)] if group else []
    return tuple(deck)


@dataclass(frozen=True)
class ApiSeed:
    """One body for one API entry point (`api` names it; `path`/`content_type` for the stream meter)."""

    name: str
    api: str
    body: tuple[bytes, ...]
    path: str = ""
    content_type: str | None = None
    request: bytes = b"{}"


@functools.lru_cache(maxsize=1)
def api_seeds() -> tuple[ApiSeed, ...]:
    seeds: list[ApiSeed] = []
    for p in sorted((FIXTURES / "ollama" / "api").glob("*.json")):
        api = "ollama_ps" if p.name.startswith("ps-") else "ollama_version"
        seeds.append(ApiSeed(p.relative_to(ROOT).as_posix(), api, _lines(p.read_bytes())))
    for p in sorted((FIXTURES / "mlx").glob("*transcript.jsonl")):
        for raw in p.read_bytes().splitlines():
            entry = json.loads(raw)
            body = entry.get("response")
            if not isinstance(body, str):
                continue
            if entry.get("path") == "/v1/models":
                seeds.append(ApiSeed(f"{p.relative_to(ROOT).as_posix()} /v1/models", "openai_models",
                                     _lines(body.encode())))
            elif entry.get("path") == "/health":
                seeds.append(ApiSeed(f"{p.relative_to(ROOT).as_posix()} /health", "mlx_health", _lines(body.encode())))
    for p in sorted((FIXTURES / "streams").glob("*.json")):
        fx = json.loads(p.read_text())
        body = "".join(text for _, text in fx["chunks"]).encode()
        ctype = dict(fx["headers"]).get("content-type")
        request = json.dumps(fx.get("request") or {}).encode()
        seeds.append(ApiSeed(p.relative_to(ROOT).as_posix(), "stream", _lines(body), fx["path"], ctype, request))
    for seed in log_seeds():
        if seed.engine == "metrics":
            seeds.append(ApiSeed(seed.name, "scrape", seed.lines))
    seeds.append(ApiSeed("SYNTHETIC proxy JSONL", "proxy_log", proxy_seed_lines()))
    return tuple(seeds)


# ------------------------------------------------------------------------------------------- mutation

DIGITS_400 = b"9" * 400
NUMBERS: tuple[bytes, ...] = (
    DIGITS_400, b"-" + DIGITS_400, DIGITS_400 + b".5", b"1" + b"0" * 5000,  # beyond int()'s 4,300-digit limit
    b"1e309", b"Infinity", b"NaN", "１２３".encode(), "²".encode(), b"9007199254740993",
    b"18446744073709551616", b"9223372036854775808", b"-9223372036854775809", b"4294967296", b"2147483648",
    b"-1", b"-0", b"0", b"0.0", b"-1e309", b"1e-400", b"nan", b"inf", b"-inf", b"1_000", b"0x10",
    "٣٤٥".encode(), b"1.2.3", b".", b"", b"00000000000000000000000001", b"1e3", b"-0.000001", b"3.4028235e38",
)
HOSTILE_FIRST = 10
"""Half the draws (`_number`) take one of the first HOSTILE_FIRST NUMBERS, the values that overflow or are not
numbers, and half of those one of the first five (400 digits and the float overflows)."""
"""Hostile numbers: overflow as a float, beyond int64 and 2**53, not numbers at all, or digits that `\\d` and
`int()` accept but ASCII does not (Arabic-Indic, fullwidth), or that `\\d` takes and `int()` refuses (²)."""

CONTROLS: tuple[bytes, ...] = (
    b"\x00", b"\x01", b"\x07", b"\x08", b"\x0b", b"\x0c", b"\r", b"\x1b", b"\x1b[2J", b"\x1b]0;pwned\x07",
    b"\x1b[31m", b"\x1c", b"\x1d", b"\x1e", b"\x7f", "\u0085".encode(), "\u009b".encode(), "\u008d".encode(),
    "\u009c".encode(), "\u202a".encode(), "\u202b".encode(), "\u202c".encode(), "\u202d".encode(),
    "\u202e".encode(), "\u2066".encode(), "\u2067".encode(), "\u2068".encode(), "\u2069".encode(),
    "\u200b".encode(), "\ufeff".encode(), "\u2028".encode(), "\u2029".encode(), b"\xff", b"\xfe", b"\xc0\x80",
    b"\xed\xa0\x80", b"\xe2\x80", b"\xf4\x90\x80\x80", b"\x80", b"\xc2", b"\x9b", b"\t", b'"', b"\\", b"%s%n",
    b"{", b"}", b"[", b"]", b"|",
)
"""C0 (ESC, SOH: the separator the columnar reader splits on), DEL, C1 (NEL splits `str.splitlines`), bidi
overrides and isolates, zero-width and line-separator characters, invalid UTF-8, and the quoting characters
of the formats the parsers read."""

NUL_RUNS = (1, 8, 511, 4096)
LONG_LINES = (300, 5000, 70_000, (1 << 20) + 3)
"""The last is over the framing's 1 MiB line limit, so the line is cut."""

MODEL_NAMES: tuple[bytes, ...] = (
    b"", b"m" * 5000, b"[bold red]m[/bold red]", b"\x1b[2Jm", "m\u202eevil".encode(), b"sha256-" + b"0" * 64,
    b"../../etc/passwd", "模型:7b".encode(), b'a"b', b"a\\", b"\xff\xfe", "\u0085m".encode(), b"null", b"0",
)
STATUSES: tuple[bytes, ...] = (b"0", b"999", b"1000", b"-1", b"99999999999", b"2OO", b"", b"200.5", DIGITS_400)

# (pattern with the value as group 2, values). Engine-specific fields: the values the model trusts.
FIELDS: tuple[tuple[re.Pattern[bytes], tuple[bytes, ...]], ...] = (
    (re.compile(rb"((?:\bmodel|\bmodel_name|served_model_name|\bname)[\"']?\s*[=:]\s*[\"']?)([^\"'\s,)}]+)"),
     MODEL_NAMES),
    (re.compile(rb"(\| +)(\d{3})( +\|)"), STATUSES),
    (re.compile(rb"(HTTP/\d\.\d\"? )(\d{3})"), STATUSES),
    (re.compile(rb"(\"status\"\s*:\s*)(\d+)"), STATUSES),
    (re.compile(rb"((?:tokens?|prompt|limit|keep|new|n_ctx(?:_slot|_train)?|task\.n_tokens|n_tokens|prompt_tokens|"
                rb"completion_tokens|total_tokens|num_ctx|n_past|count|n_decoded|size|size_vram|max_model_len)"
                rb"[\"']?\s*[=:]\s*)(\d+)"), NUMBERS),
    (re.compile(rb"((?:started in |load_duration[\"']?\s*[=:]\s*|time = +|duration=|took |elapsed[=: ]+))"
                rb"([0-9.]+)"), NUMBERS),
    (re.compile(rb"(/ +)(\d+)( (?:tokens|runs))"), NUMBERS),
    (re.compile(rb"(\| +)([0-9.]+(?:h|m|s|ms|\xc2\xb5s|us|ns)[0-9.hmsun\xc2\xb5]*)( +\|)"),
     (DIGITS_400 + b"h", b"2562047h47m16.854775808s", b"-1h", b"1.5.5s", b"NaNs", b"1e309s", b"5us",
      "5μs".encode(), b"0", b"")),
)

_NUMBER_RE = re.compile(rb"-?\d+(?:\.\d+)?")
_TS_RES: tuple[tuple[re.Pattern[bytes], tuple[bytes, ...]], ...] = (
    (re.compile(rb"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"),
     (b"0000-00-00T00:00:00Z", b"9999-12-31T23:59:59.999999999+14:00", b"2025-02-30T25:61:61Z",
      b"2025-13-01T00:00:00-99:99", b"0001-01-01T00:00:00Z", b"2025-06-10T21:22:18.31415926535897932384Z",
      b"1970-01-01T00:00:00Z", b"2038-01-19T03:14:08Z", b"9999-12-31T23:59:59-23:59", b"0001-01-01T00:00:00+14:00")),
    (re.compile(rb"\d{4}/\d{2}/\d{2} - \d{2}:\d{2}:\d{2}"),
     (b"0000/00/00 - 00:00:00", b"9999/12/31 - 23:59:60", b"2025/02/29 - 24:00:00", b"0001/01/01 - 00:00:00")),
    (re.compile(rb"\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}"), (b"0000/00/00 00:00:00", b"9999/12/31 23:59:60")),
    (re.compile(rb"\b\d{2}-\d{2} \d{2}:\d{2}:\d{2}"), (b"00-00 00:00:00", b"02-29 23:59:59", b"13-45 99:99:99")),
    (re.compile(rb"\b[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2}"), (b"Feb 30 25:61:61", b"Xyz 99 00:00:00")),
    (re.compile(rb"\b1\d{9}(?:\.\d+)?\b"), (b"0", b"-1", b"99999999999999999999", b"1e309")),
)

OPS = ("number", "number_all", "field", "cut", "delete", "dup", "swap", "move", "inject", "nul_pad", "nul_line",
       "long", "ts_swap", "ts_hostile", "splice", "crlf", "byte", "blank")
OP_DECK = (*OPS, "number", "number", "field", "field", "field", "inject", "nul_pad")
"""What a case draws operations from: the value rewrites (`field`, `number`), which find most defects, and the
control/padding injections weigh more than the line moves."""
Op = tuple[str, int, int]
"""(operation, line position, argument): plain ints, so hypothesis shrinks them and a campaign stores them."""


@dataclass(frozen=True)
class Recipe:
    """A window of one seed and the operations applied to it (positions are taken modulo the line count)."""

    seed: int
    start: int
    length: int
    ops: tuple[Op, ...] = ()
    newline: bool = True
    """Whether the file ends with a newline (a cut last line is how a live log is often saved)."""


def _number(arg: int) -> bytes:
    i = arg % (2 * len(NUMBERS))
    return NUMBERS[i] if i < len(NUMBERS) else NUMBERS[(i - len(NUMBERS)) % (HOSTILE_FIRST // 2 * (1 + i % 2))]


def _applies(name: str, line: bytes, arg: int) -> bool:
    """Whether an operation that rewrites a part of a line finds that part in `line` (for `field`, the field
    `arg` names first: each kind of field gets its share, not only the kinds most lines have)."""
    if name in ("number", "number_all"):
        return _NUMBER_RE.search(line) is not None
    if name == "field":
        return _field_pattern(arg).search(line) is not None
    if name in ("ts_hostile", "ts_swap"):
        return _timestamp(line) is not None
    return True


def _replace_nth(pattern: re.Pattern[bytes], line: bytes, n: int, value: bytes, group: int = 0) -> bytes:
    matches = list(pattern.finditer(line))
    if not matches:
        return line
    m = matches[n % len(matches)]
    return line[: m.start(group)] + value + line[m.end(group):]


def _field_pattern(arg: int) -> re.Pattern[bytes]:
    return FIELDS[arg % len(FIELDS)][0]


def _field(line: bytes, arg: int) -> bytes:
    for i in range(len(FIELDS)):
        pattern, values = FIELDS[(arg + i) % len(FIELDS)]
        m = pattern.search(line)
        if m is not None:
            value = _number(arg // len(FIELDS)) if values is NUMBERS else values[arg // len(FIELDS) % len(values)]
            return line[: m.start(2)] + value + line[m.end(2):]
    return _replace_nth(_NUMBER_RE, line, 0, _number(arg))


def _timestamp(line: bytes) -> tuple[int, re.Match[bytes]] | None:
    for i, (pattern, _) in enumerate(_TS_RES):
        m = pattern.search(line)
        if m is not None:
            return i, m
    return None


def apply_op(lines: list[bytes], op: Op, pool: Sequence[Seed]) -> None:
    """Apply one operation in place. Every operation keeps the file a sequence of lines (none inserts a "\\n"
    into a line except `nul_line`/`splice`/`dup`, which add whole lines)."""
    name, pos, arg = op
    if not lines:
        lines.append(b"")
    i = pos % len(lines)
    # An operation on a part of a line takes the first line from `pos` on that has that part: most lines of a
    # log have no token count, and a no-op case is a wasted case.
    i = next((j % len(lines) for j in range(i, i + len(lines)) if _applies(name, lines[j % len(lines)], arg)), i)
    line = lines[i]
    if name == "number":
        lines[i] = _replace_nth(_NUMBER_RE, line, arg // len(NUMBERS), _number(arg))
    elif name == "number_all":
        value = _number(arg)
        lines[i] = _NUMBER_RE.sub(lambda _m: value, line)
    elif name == "field":
        lines[i] = _field(line, arg)
    elif name == "cut":
        lines[i] = line[: arg % (len(line) + 1)]
    elif name == "delete":
        del lines[i]
    elif name == "dup":
        lines.insert(i, line)
    elif name == "swap":
        j = arg % len(lines)
        lines[i], lines[j] = lines[j], lines[i]
    elif name == "move":
        del lines[i]
        lines.insert(arg % (len(lines) + 1), line)
    elif name == "inject":
        ctrl = CONTROLS[arg % len(CONTROLS)]
        at = (arg // len(CONTROLS)) % (len(line) + 1)
        lines[i] = line[:at] + ctrl + line[at:]
    elif name == "nul_pad":
        lines[i] = b"\x00" * NUL_RUNS[arg % len(NUL_RUNS)] + line
    elif name == "nul_line":
        lines.insert(i, b"\x00" * NUL_RUNS[arg % len(NUL_RUNS)])
    elif name == "long":
        size = LONG_LINES[arg % len(LONG_LINES)]
        unit = line or b"x"
        lines[i] = (unit * (size // len(unit) + 1))[:size]
    elif name == "ts_swap":
        j = arg % len(lines)
        a, b = _timestamp(line), _timestamp(lines[j])
        if a is not None and b is not None and i != j:
            ma, mb = a[1], b[1]
            lines[i] = line[: ma.start()] + mb.group() + line[ma.end():]
            other = lines[j]
            lines[j] = other[: mb.start()] + ma.group() + other[mb.end():]
    elif name == "ts_hostile":
        found = _timestamp(line)
        if found is not None:
            values = _TS_RES[found[0]][1]
            m = found[1]
            lines[i] = line[: m.start()] + values[arg % len(values)] + line[m.end():]
    elif name == "splice":
        donor = pool[arg % len(pool)]
        if donor.lines:
            lines.insert(i, donor.lines[(arg // len(pool)) % len(donor.lines)])
    elif name == "crlf":
        lines[i] = line + b"\r"
    elif name == "byte":
        if line:
            at = (arg >> 8) % len(line)
            lines[i] = line[:at] + bytes([arg & 0xFF]) + line[at + 1:]
    elif name == "blank":
        lines.insert(i, (b"", b" ", b"\t", b"   \r")[arg % 4])


def materialize(recipe: Recipe, pool: Sequence[Seed], deck: Sequence[int] = ()) -> bytes:
    """The recipe's bytes: `recipe.seed` indexes `deck` (seed_deck) when given, else `pool`."""
    seed = pool[deck[recipe.seed % len(deck)] if deck else recipe.seed % len(pool)]
    start = recipe.start % max(1, len(seed.lines))
    lines = list(seed.lines[start: start + max(1, recipe.length)])
    for op in recipe.ops:
        apply_op(lines, op, pool)
    data = b"\n".join(lines)
    return data + b"\n" if recipe.newline and lines else data


def random_recipe(rng: random.Random, n_seeds: int, max_window: int = MAX_WINDOW, max_ops: int = MAX_OPS) -> Recipe:
    """The campaign's draw: the same shape hypothesis draws (`recipes`), from a seeded generator."""
    ops = tuple((rng.choice(OP_DECK), rng.randrange(1 << 16), rng.randrange(1 << 20)) for _ in range(rng.randint(1, max_ops)))
    length = rng.randint(1, max_window) if rng.random() < 0.9 else rng.randint(1, 4 * max_window)
    return Recipe(rng.randrange(n_seeds), rng.randrange(1 << 16), length, ops, rng.random() < 0.85)


# ------------------------------------------------------------------------------------------ violations

CONTROL_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("C0", re.compile(r"[\x00-\x08\x0b-\x1f]")),
    ("DEL", re.compile(r"\x7f")),
    ("C1", re.compile(r"[\x80-\x9f]")),
    ("bidi", re.compile(r"[\u202a-\u202e\u2066-\u2069]")),
)


def control_chars(text: str, allow_c0: bool = False) -> list[tuple[str, str, str]]:
    """(class, codepoint, context) for each class of terminal control character found in `text`."""
    found = []
    for name, pattern in CONTROL_CLASSES:
        if name == "C0" and allow_c0:
            continue
        m = pattern.search(text)
        if m is not None:
            found.append((name, f"U+{ord(m.group()):04X}", text[max(0, m.start() - 30): m.end() + 30]))
    return found


@dataclass(frozen=True)
class Violation:
    kind: str
    key: str
    """What makes two violations the same defect (exception and innermost frame, JSON path, char class...)."""
    detail: str
    mode: str = ""
    """The analyze run it came from (text, json, json_all, csv), "" elsewhere."""

    @property
    def signature(self) -> str:
        return f"{self.kind}[{self.key}]"


@dataclass(frozen=True)
class KnownDefect:
    """A defect already reported and being fixed: matched by kind and key, reproduced by one line."""

    id: str
    title: str
    kinds: tuple[str, ...]
    key: str
    """A regex searched in the violation's key."""
    target: str
    line: bytes
    """The one-line reproducer (a log file of this line, for `target`)."""
    option: str = ""
    arg: int = 0
    newline: bool = True
    """Whether the reproducer file ends with a newline."""
    open: bool = True
    """Still being fixed: the bounded fuzz tolerates it and its regression test is a strict xfail. A fix sets it
    to False: the fuzz then fails on it again, and the regression test must pass."""

    @property
    def input(self) -> Input:
        return Input(self.target, (self.line + (b"\n" if self.newline else b""),), self.option, self.arg)

    @property
    def shown(self) -> bytes:
        """The reproducer as a file holds it (the parsers target pads line `arg` itself)."""
        if "nul_padding" in self.kinds[0]:
            return b"\x00" * NUL_RUNS[(self.arg >> 8) % len(NUL_RUNS)] + self.line
        return self.line

    def matches(self, v: Violation) -> bool:
        return v.kind in self.kinds and re.search(self.key, v.key) is not None


_GIN_CHAT = b'[GIN] 2025/06/10 - 22:46:49 | 200 |      1h24m39s |    10.99.99.105 | POST     "/api/chat"'
_VLLM_STATS = (b"INFO 01-22 18:27:20 metrics.py:449] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
               b"41.7 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 2.0%, ")
# K*: the defects the fuzzing was expected to find (reported before it existed); N*: what it found besides.
KNOWN: tuple[KnownDefect, ...] = (
    KnownDefect(
        "K1-overflow-token-count", "a 400-digit token count: OverflowError escapes (ietop/model/facts.py)",
        ("crash",), r"^OverflowError@ietop/model/facts\.py", "analyze",
        b"slot print_timing: id  0 | task 0 |        eval time =      10.00 ms / " + DIGITS_400
        + b" tokens (    0.10 ms per token,  10000.00 tokens per second)", open=False),
    KnownDefect(
        "K2-infinite-load-time", "a 400-digit load time becomes Infinity in --json",
        ("json_invalid", "json_nonfinite"), r"^loads\[\]\.duration_s$", "analyze",
        b'time=2025-09-11T01:28:28.037Z level=INFO source=server.go:1288 msg="llama runner started in '
        + DIGITS_400 + b'.5 seconds"', open=False),
    KnownDefect(
        "K3-c1-bidi-raw", "C1 and bidi controls from a log line are printed raw (plain report and JSON)",
        ("control_char_text", "control_char_json"), r"^(C1|bidi)\b", "analyze",
        'time=2025-06-10T21:22:18.314Z level=ERROR source=x.go:1 msg="boom \u009b31m \u202eevil"'.encode(), open=False),
    KnownDefect(
        "K4-nul-padding-drops-line", "NUL padding glued before a line (logrotate copytruncate) loses the line",
        ("nul_padding_changes_events",), r".", "parsers", _GIN_CHAT, "ollama", arg=1 << 8, open=False),
    KnownDefect(
        "N1-proxy-log-overflow", "a proxy JSONL number that overflows (1e309): OverflowError escapes the parser",
        ("crash", "parser_exception"), r"OverflowError@parsers/api/proxy_log\.py", "analyze",
        b'{"method":"POST","path":"/api/chat","status":1e309,"ttft_s":0.2,"bytes_down":1}', open=False),
    KnownDefect(
        "N2-vllm-startup-unguarded", "vLLM start-up figures (StartupFact.value: float | str) pass the store's "
        "2**53 guard: 400 digits are Infinity (seconds, GiB) or a 400-digit int (GPU blocks) in --json config",
        ("json_invalid", "json_nonfinite", "json_int_beyond_2^53"), r"^config\.effective\.", "analyze",
        b"INFO 01-13 11:35:23 worker.py:241] Memory profiling takes " + DIGITS_400 + b" seconds", open=False),
    KnownDefect(
        "N3-vllm-stats-infinity", "a vLLM stats figure spelled Infinity (or 400 digits) is Infinity in --json",
        ("json_invalid", "json_nonfinite"), r"^engine_stats\[\]\.", "analyze",
        _VLLM_STATS + b"CPU KV cache usage: Infinity%.", open=False),
    KnownDefect(
        "N4-scrape-nan", "a /metrics gauge of NaN or +Inf (valid Prometheus values) or 1e309 is NaN/Infinity in "
        "--json (metrics windows)", ("json_invalid", "json_nonfinite"), r"^(metrics\[\]|latency)\.", "analyze",
        b'vllm:num_requests_waiting{engine="0",model_name="m"} NaN', open=False),
    KnownDefect(
        "N5-scrape-last-line-uncounted", "a saved /metrics scrape without a final newline counts one line less",
        ("lines_not_conserved",), r"Prometheus /metrics scrape", "analyze",
        b'vllm:num_requests_running{engine="0",model_name="m"} 1', newline=False, open=False),
    KnownDefect(
        "N6-uvicorn-empty-client", "uvicorn access line with no client (vLLM on --uds): the columnar reader folds "
        "it as a probe, the per-line parser drops it without counting it", ("bulk_differs",), r"^probes \(vllm\)$",
        "analyze", b'INFO:      - "GET /health HTTP/1.1" 200 OK', "vllm", open=False),
    KnownDefect(
        "N8-proxy-log-time-overflow", "a proxy JSONL time near year 9999 plus its e2e_s: OverflowError escapes "
        "(ietop/model/proxied.py)", ("crash",), r"^OverflowError@ietop/model/proxied\.py", "analyze",
        b'{"method":"POST","path":"/api/chat","ttft_s":0.1,"e2e_s":0.3,"bytes_down":0,"ts":"9999-12-31T23:59:59.9"}', open=False),
    KnownDefect(
        "N9-bulk-skips-number-guard", "the columnar reader folds a GIN probe whose latency (9999999999999h) the "
        "per-line path refuses as implausible: the two documents differ", ("bulk_differs",),
        r"^(probes|counts|sources) \(ollama\)$", "analyze",
        b'[GIN] 2026/06/19 - 20:32:30 | 200 | 9999999999999h |       127.0.0.1 | GET      "/"', open=False),
    KnownDefect(
        "N10-nul-last-line-uncounted", "a last line of NULs without a newline (a file cut mid-padding) is not "
        "counted: the framing drops the NULs, then the line", ("lines_not_conserved", "framing"),
        r"^lines != physical lines \((?!vllm, Prometheus)|^split_lines count$", "analyze",
        b'time=2025-06-10T21:22:18.314Z level=INFO source=x.go:1 msg="a"\n\x00', newline=False, open=False),
    KnownDefect(
        "N11-bulk-folds-no-answer", "a GIN line with status 0 (no answer: `status` null since 29280bc) is folded "
        "as a successful probe with status 0 by the columnar reader, listed with status null by the per-line one",
        ("bulk_differs",), r"^requests \(ollama\)$", "analyze",
        b'[GIN] 2025/06/10 - 22:46:49 |   0 |      1.2ms |       127.0.0.1 | HEAD     "/"', open=False),
    KnownDefect(
        "N12-probe-time-out-of-range", "the columnar reader dates a GIN probe of Go's zero time (0001/01/01) under a "
        "learned +03:00 offset: ValueError (year 0 is out of range) escapes (ietop/model/probes.py)",
        ("crash",), r"^ValueError@ietop/model/probes\.py", "analyze",
        b'time=2024-05-31T01:00:00.000+03:00 level=INFO source=x.go:1 msg="a"\n'
        b'[GIN] 0001/01/01 - 00:00:00 | 200 |      1.2ms |       127.0.0.1 | GET      "/"', open=False),
    KnownDefect(
        "N13-unparsed-over-lines", "a line with two implausible figures counts as two unparsed lines (unparsed_lines "
        "> lines: '1 lines, 2 unparsed')", ("lines_not_conserved",), r"^unparsed_lines outside", "analyze",
        b"INFO 01-13 11:35:23 worker.py:241] Maximum concurrency for 9999999999999999 tokens per request: "
        b"9999999999999999x", open=False),
    KnownDefect(
        "N14-bold-regex-quadratic", "the envelope's markdown-bold regex is quadratic in the `**` of a line: 25 kB of "
        "' **a)' takes 1.3 s, a 1 MiB line of `**kwargs` traceback text hangs analyze (> 5 min)",
        ("slow_line", "superlinear"), r"^strip_inner", "scaling", b" **a)", open=False),
    KnownDefect(
        "N7-vllm-glued-recursion", "vLLM records glued on one line: one recursion per record, O(n^2) memory "
        "(1.4 GB for a 1 MiB line), and past ~1,000 records RecursionError drops the whole line",
        ("glued_records_lost", "slow_line"), r"^vllm$", "glued",
        (_VLLM_STATS + b"CPU KV cache usage: 0.0%. ") * 1500, open=False),
)


def known(v: Violation, open_only: bool = False, inp: Input | None = None) -> KnownDefect | None:
    """The known defect `v` is an instance of. A hang or a memory peak is seen from outside the case and has
    no exception to key it: `outside_key` names the shape of input that caused a known one (`inp` unused,
    kept for callers that have it)."""
    found = next((k for k in KNOWN if k.matches(v) and (k.open or not open_only)), None)
    if found is None and v.kind in ("hang", "memory"):
        for label, defect in OUTSIDE_CAUSES.values():
            if v.key.endswith(f"({label})"):
                found = next((k for k in KNOWN if k.id == defect and (k.open or not open_only)), None)
    return found


def _glued_line(line: bytes) -> bool:
    return len(_RECORD_HEAD_B.findall(line)) >= 100


def _bold_spans_line(line: bytes) -> bool:
    return line.count(b" **") >= 1000


OUTSIDE_CAUSES: dict[Callable[[bytes], bool], tuple[str, str]] = {
    _glued_line: ("glued vLLM records", "N7-vllm-glued-recursion"),
    _bold_spans_line: ("a long line of ** spans", "N14-bold-regex-quadratic"),
}
"""Line shapes that cause a known hang or memory peak: (label in the key, defect)."""


def outside_key(target: str, inp: Input) -> str:
    """The key of a hang or a memory peak: its target, and the shape of its input when a line over 100 kB has
    one of OUTSIDE_CAUSES' (so a hang of another cause gets a signature of its own)."""
    for test, (label, _defect) in OUTSIDE_CAUSES.items():
        if any(len(line) > 100_000 and test(line) for data in inp.files for line in data.split(b"\n")):
            return f"{target} ({label})"
    return target


def _exc_key(exc: BaseException) -> str:
    """`ExcType@file:function` of the innermost frame in ietop/ or parsers/ (line numbers drift with edits)."""
    where = "?"
    for frame in traceback.extract_tb(exc.__traceback__):
        rel = os.path.relpath(frame.filename, ROOT)
        if rel.startswith(("ietop" + os.sep, "parsers" + os.sep)):
            where = f"{rel.replace(os.sep, '/')}:{frame.name}"
    return f"{type(exc).__name__}@{where}"


def _exc_detail(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    last = frames[-1] if frames else None
    at = f" (at {os.path.relpath(last.filename, ROOT)}:{last.lineno} in {last.name})" if last else ""
    return (traceback.format_exception_only(type(exc), exc)[-1].strip() + at)[:500]


# -------------------------------------------------------------------------------------------- watchdog


class CaseTimeout(BaseException):
    """Raised by the watchdog's alarm: a BaseException so no `except Exception` in the product swallows it."""


@contextlib.contextmanager
def watchdog(seconds: float = HANG_S) -> Iterator[None]:
    """SIGALRM after `seconds` (main thread, POSIX): a best effort in-process (C code such as a regex or
    polars only sees the signal when it returns); the campaign also runs cases in a killable worker."""
    if not hasattr(signal, "setitimer") or seconds <= 0:
        yield
        return

    def fire(_signum: int, _frame: types.FrameType | None) -> None:
        raise CaseTimeout(f"case ran over {seconds:.0f} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# ------------------------------------------------------------------------------------------- type checks


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # an annotation that does not resolve here: nothing to check it against
        return {}


def _conforms(value: object, ann: Any) -> bool:
    if ann is Any or ann is object:
        return True
    if ann is None or ann is type(None):
        return value is None
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Union or origin is types.UnionType:
        return any(_conforms(value, a) for a in args)
    if origin is typing.Literal:
        return value in args
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_conforms(v, args[0]) for v in value)
        return not args or (len(args) == len(value) and all(_conforms(v, a) for v, a in zip(value, args)))
    if origin in (list, set, frozenset):
        return isinstance(value, origin) and (not args or all(_conforms(v, args[0]) for v in value))
    if origin is dict:
        return isinstance(value, dict) and (not args or all(
            _conforms(k, args[0]) and _conforms(v, args[1]) for k, v in value.items()))
    if ann is float:  # PEP 484's numeric tower: an int is a float
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if ann is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(ann, type):
        return isinstance(value, ann)
    return True  # Callable, TypeVar, a string that did not resolve: not checked


def type_errors(obj: object, where: str = "", depth: int = 0) -> list[str]:
    """Fields of a dataclass (recursively, and through tuples of them) whose value is not of its annotation."""
    if depth > 4:
        return []
    if isinstance(obj, (tuple, list)):
        return [e for i, item in enumerate(obj) for e in type_errors(item, f"{where}[{i}]", depth + 1)][:5]
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return []
    errors: list[str] = []
    hints = _hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        ann = hints.get(f.name)
        if ann is not None and not _conforms(value, ann):
            errors.append(f"{where}{type(obj).__name__}.{f.name}={value!r:.80} is not {ann}")
        errors.extend(type_errors(value, f"{where}{type(obj).__name__}.{f.name}", depth + 1))
    return errors


# ---------------------------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Input:
    """A materialized case: file contents and what to run them through."""

    target: str
    files: tuple[bytes, ...]
    option: str = ""
    """analyze: `--engine` value or ""; parsers: the engine; api: the entry point (and stream seed)."""
    arg: int = 0
    """The case's free parameter: the line NUL-padded (parsers), the chunking (text, api streams)."""
    csv: bool = False
    """analyze: also run with `--csv`."""


# ------------------------------------------------------------------------------------- analyze in-process


class _Capture(io.StringIO):
    """stdout/stderr for an in-process run: `main` closes stderr on a broken pipe; keep the text readable."""

    def close(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


@dataclass
class CliRun:
    code: int | None
    out: str
    err: str
    exc: BaseException | None
    seconds: float


def run_cli(argv: Sequence[str]) -> CliRun:
    """`ietop.cli.main(argv)` in this process, its output captured; SystemExit is an exit (argparse exits
    that way), any other exception escaping it is what a user sees as a traceback."""
    from ietop.cli import main

    out, err = _Capture(), _Capture()
    exc: BaseException | None = None
    code: int | None = None
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            if isinstance(stop.code, str):
                err.write(stop.code + "\n")
        except CaseTimeout:
            raise
        except Exception as e:  # what would print a traceback
            exc = e
    return CliRun(code, out.getvalue(), err.getvalue(), exc, time.perf_counter() - t0)


class Workdir:
    """A private directory for the files of the cases of one process, reused case after case."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="ietop-fuzz-"))

    def write(self, files: Sequence[bytes]) -> list[str]:
        paths = []
        for i, data in enumerate(files):
            p = self.path / f"case{i}.log"
            p.write_bytes(data)
            paths.append(str(p))
        return paths

    def csv_dir(self) -> Path:
        d = self.path / "csv"
        shutil.rmtree(d, ignore_errors=True)
        return d

    def cleanup(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


@functools.lru_cache(maxsize=1)
def _workdir() -> Workdir:
    return Workdir()


def physical_lines(data: bytes) -> int:
    """Lines as a reader of the file counts them: every "\\n", plus a last line without one, unless that last
    piece is only NULs: padding a writer has not yet written over (copytruncate), not a line
    (parsers/text/framing.py)."""
    tail = data[data.rfind(b"\n") + 1:]
    return data.count(b"\n") + (1 if tail.strip(b"\x00") else 0)


def _path_of(prefix: str, key: object) -> str:
    return f"{prefix}[]" if isinstance(key, int) else (f"{prefix}.{key}" if prefix else str(key))


def _walk(value: object, path: str = "") -> Iterator[tuple[str, object]]:
    """(path with list indices collapsed to [], leaf) for each leaf of a JSON document."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, _path_of(path, k))
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, _path_of(path, 0))
    else:
        yield path, value


def _reject_constant(name: str) -> float:
    raise ValueError(f"non-JSON constant {name}")


def _lenient(text: str) -> Any:
    return json.loads(text, parse_constant=float)


def check_json_text(text: str, mode: str) -> tuple[Any, list[Violation]]:
    """Strict JSON (no NaN/Infinity), finite floats, integers within ±2**53, no raw C1/DEL/bidi in it.
    Returns the document (parsed leniently when it is not strict JSON; None when not JSON at all)."""
    out: list[Violation] = []
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        try:
            doc = _lenient(text)
        except ValueError:
            return None, [Violation("json_invalid", "not JSON", str(exc)[:300], mode)]
        bad = sorted({p for p, v in _walk(doc) if isinstance(v, float) and not math.isfinite(v)})
        for p in bad or ["?"]:
            out.append(Violation("json_invalid", p, f"{exc}"[:200], mode))
        return doc, out
    seen: set[str] = set()
    # Escaped (\\u009b) is fine: only a control character written raw in the text reaches a terminal that
    # shows the document; which field held it is found in the decoded strings.
    raw = {cls for cls, _cp, _ctx in control_chars(text, allow_c0=True)}
    for p, v in _walk(doc):
        if isinstance(v, float) and not math.isfinite(v) and ("f" + p) not in seen:
            seen.add("f" + p)
            out.append(Violation("json_nonfinite", p, f"{v!r} (a float literal that overflows)", mode))
        elif isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**53 and ("i" + p) not in seen:
            seen.add("i" + p)
            out.append(Violation("json_int_beyond_2^53", p, f"{str(v)[:40]}… ({len(str(v))} digits)", mode))
        elif isinstance(v, str) and raw:
            for cls, cp, ctx in control_chars(v, allow_c0=True):
                if cls in raw and (cls + p) not in seen:
                    seen.add(cls + p)
                    out.append(Violation("control_char_json", f"{cls} in {p}", f"{cp} in {ctx!r}", mode))
    return doc, out


def _check_exit(mode: str, run: CliRun) -> list[Violation]:
    out: list[Violation] = []
    if run.exc is not None:
        return [Violation("crash", _exc_key(run.exc), _exc_detail(run.exc), mode)]
    if "Traceback (most recent call last)" in run.err:
        out.append(Violation("stderr", "traceback on stderr", run.err[-300:], mode))
    if run.code not in (0, 1, 2):
        out.append(Violation("exit", f"code {run.code}", run.err[-200:], mode))
    elif run.code == 2:
        out.append(Violation("exit", "usage error for readable files", run.err[-200:], mode))
    if run.code != 0:
        lines = run.err.splitlines()
        errors = [ln for ln in lines if not ln.startswith("ietop: note:")]
        if len(errors) != 1 or not errors[0].startswith("ietop: error:") or not run.err.endswith("\n"):
            out.append(Violation("stderr", "failure not one 'ietop: error:' line", repr(run.err[-300:]), mode))
        if run.out:
            out.append(Violation("partial_stdout", f"exit {run.code}", repr(run.out[:200]), mode))
    if run.seconds > HANG_S:
        out.append(Violation("hang", f"analyze {mode}", f"{run.seconds:.1f} s", mode))
    return out


def _same_facts(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """tests/pipeline/test_bulk_differential.py's contract: the first key where the columnar reader's document
    differs from the per-line one's (apart from the folding of probes), or None."""
    from collections import Counter

    from ietop.model.probes import is_probe

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return (r["source"]["path"], r["method"], r["path"], r["status"])

    try:
        # A request without a status (a GIN line with `|0|`) is never a probe.
        probe = [r["status"] is not None and is_probe(r["method"], r["status"], r["inference"])
                 for r in old["requests"]]
        listed = [r for r, p in zip(old["requests"], probe) if not p]
        folded = Counter(key(r) for r, p in zip(old["requests"], probe) if p)
        if json.dumps(new["requests"], sort_keys=True) != json.dumps(listed, sort_keys=True):
            return "requests"
        if {(p["source"], p["method"], p["path"], p["status"]): p["count"] for p in new["probes"]} != dict(folded):
            return "probes"
    except (KeyError, TypeError) as exc:
        return f"shape ({exc!r})"
    for k in old:
        if k not in ("requests", "probes") and json.dumps(new.get(k), sort_keys=True) != json.dumps(old[k], sort_keys=True):
            return k
    return None


def check_analyze(inp: Input, modes: Sequence[str] | None = None, workdir: Workdir | None = None) -> list[Violation]:
    """Run `ietop analyze` on the case's files (text, json, json_all, and csv when `inp.csv`) and check every
    invariant. `modes` restricts the runs (the minimizer reruns only the one that failed)."""
    wd = workdir or _workdir()
    paths = wd.write(inp.files)
    base = ["analyze", *paths] + (["--engine", inp.option] if inp.option else [])
    wanted = list(modes) if modes is not None else ["text", "json", "json_all"] + (["csv"] if inp.csv else [])
    if "json_all" in wanted and "json" not in wanted:
        wanted.insert(0, "json")  # the differential needs both
    argv = {"text": base, "json": [*base, "--json"], "json_all": [*base, "--json", "--all-requests"]}
    csv_dir = wd.csv_dir() if "csv" in wanted else None
    if csv_dir is not None:
        argv["csv"] = [*base, "--csv", str(csv_dir)]
    runs = {mode: run_cli(argv[mode]) for mode in wanted}
    out: list[Violation] = []
    for mode, run in runs.items():
        out.extend(_check_exit(mode, run))
    codes = {m: r.code for m, r in runs.items() if r.exc is None}
    if len(set(codes.values())) > 1:
        out.append(Violation("modes_disagree", " ".join(f"{m}={c}" for m, c in sorted(codes.items())),
                             "; ".join(f"{m}: {r.err.strip()[:120]}" for m, r in runs.items()), ""))
    text_run = runs.get("text")
    if text_run is not None and text_run.exc is None and text_run.code == 0:
        for cls, cp, ctx in control_chars(text_run.out):
            out.append(Violation("control_char_text", cls, f"{cp} in {ctx!r}", "text"))
    docs: dict[str, Any] = {}
    for mode in ("json", "json_all"):
        json_run = runs.get(mode)
        if json_run is None or json_run.exc is not None or json_run.code != 0:
            continue
        doc, found = check_json_text(json_run.out, mode)
        out.extend(found)
        if isinstance(doc, dict):
            docs[mode] = doc
            out.extend(_check_lines(doc, inp.files, mode))
    if "json" in docs and "json_all" in docs:
        differs = _same_facts(docs["json_all"], docs["json"])
        if differs is not None:
            engines = "+".join(sorted({str(s.get("engine")) for s in docs["json"].get("sources", [])}))
            out.append(Violation("bulk_differs", f"{differs} ({engines})", "the columnar reader's document "
                                 "differs from the per-line one's", "json"))
    if csv_dir is not None and runs["csv"].exc is None and runs["csv"].code == 0:
        for table in sorted(csv_dir.glob("*.csv")):
            body = table.read_text(encoding="utf-8", errors="replace")
            for cls, cp, ctx in control_chars(body):
                out.append(Violation("control_char_csv", f"{cls} in {table.stem}", f"{cp} in {ctx!r}", "csv"))
    # One violation per signature and run: a hostile value copied into ten records is one finding.
    unique: dict[tuple[str, str], Violation] = {}
    for v in out:
        unique.setdefault((v.signature, v.mode), v)
    return list(unique.values())


def _check_lines(doc: dict[str, Any], files: Sequence[bytes], mode: str) -> list[Violation]:
    out: list[Violation] = []
    sources = doc.get("sources")
    if not isinstance(sources, list) or len(sources) != len(files):
        return [Violation("lines_not_conserved", "sources", f"{len(files)} files, sources={sources!r:.200}", mode)]
    for src, data in zip(sources, files):
        lines, unparsed = src.get("lines"), src.get("unparsed_lines")
        want = physical_lines(data)
        engine = src.get("engine")
        if lines != want:
            out.append(Violation("lines_not_conserved", f"lines != physical lines ({engine}, {src.get('format')})",
                                 f"lines={lines} physical={want}", mode))
        if not isinstance(unparsed, int) or not isinstance(lines, int) or not 0 <= unparsed <= lines:
            out.append(Violation("lines_not_conserved", f"unparsed_lines outside [0, lines] ({engine})",
                                 f"unparsed_lines={unparsed} lines={lines}", mode))
    return out


# --------------------------------------------------------------------------------------- parsers target

PARSER_ENGINES = ("ollama", "vllm", "mlx", "proxy")


def make_parser(engine: str) -> Any:
    from parsers.api.proxy_log import ProxyLogParser
    from parsers.mlx.log import MlxParser
    from parsers.ollama.log import OllamaParser
    from parsers.vllm.log import VllmParser

    if engine == "vllm":
        return VllmParser(year=2025)
    if engine == "mlx":
        return MlxParser()
    if engine == "proxy":
        return ProxyLogParser()
    return OllamaParser()


def _parse_all(engine: str, texts: Sequence[str]) -> tuple[list[list[Any]], list[Violation]]:
    """Every line through a fresh parser as the pipeline feeds it; the events per line (the flush last)."""
    from parsers.events import Event
    from parsers.text.envelope import strip_inner

    parser = make_parser(engine)
    per_line: list[list[Any]] = []
    out: list[Violation] = []
    n = 0
    try:
        for n, raw in enumerate(texts, 1):
            t0 = time.perf_counter()
            text, kind, env_ts = strip_inner(raw)
            took = time.perf_counter() - t0
            if took > SLOW_LINE_S:
                out.append(Violation("slow_line", "strip_inner", f"line {n} ({len(raw)} chars) took {took:.1f} s"))
            if not isinstance(text, str) or not isinstance(kind, str) or not (env_ts is None or isinstance(env_ts, datetime)):
                out.append(Violation("parser_type", "strip_inner", f"line {n}: {(text, kind, env_ts)!r:.200}"))
            if not text:
                per_line.append([])
                continue
            t0 = time.perf_counter()
            events = parser.parse(n, text, env_ts)
            took = time.perf_counter() - t0
            if took > SLOW_LINE_S:
                out.append(Violation("slow_line", engine, f"line {n} ({len(raw)} chars) took {took:.1f} s"))
            per_line.append(events)
        flush = getattr(parser, "flush", None)
        per_line.append(flush() if flush is not None else [])
    except CaseTimeout:
        raise
    except Exception as exc:
        return per_line, [Violation("parser_exception", f"{engine}:{_exc_key(exc)}", f"line {n}: {_exc_detail(exc)}")]
    for i, events in enumerate(per_line, 1):
        if not isinstance(events, list):
            out.append(Violation("parser_type", f"{engine}: parse() not a list", f"line {i}: {events!r:.200}"))
            continue
        for e in events:
            if not isinstance(e, Event):
                out.append(Violation("parser_type", f"{engine}: not an Event", f"line {i}: {e!r:.200}"))
                continue
            if not isinstance(e.line, int) or isinstance(e.line, bool) or not 0 <= e.line <= i:
                out.append(Violation("parser_type", f"{engine}: {type(e).__name__}.line outside [0, n]",
                                     f"line {i}: {e!r:.200}"))
            for err in type_errors(e)[:1]:
                out.append(Violation("parser_type", f"{engine}: {err.split('=')[0]}", f"line {i}: {err}"))
    return per_line, out


def check_parsers(inp: Input) -> list[Violation]:
    """One engine's parser over the case's lines; `detect_engine` over them; and the NUL-padding metamorphic
    relation on line `arg`: glued NULs (what copytruncate leaves) must not change what that line says."""
    from parsers.detect import detect_engine
    from parsers.events import Unparsed
    from parsers.text.framing import split_texts

    engine = inp.option or "ollama"
    data = inp.files[0]
    texts = [t for chunk in split_texts([data]) for t in chunk]
    per_line, out = _parse_all(engine, texts)
    try:
        found = detect_engine(texts[:200])
        if found not in (None, "ollama", "vllm", "mlx"):
            out.append(Violation("parser_type", "detect_engine", repr(found)))
    except CaseTimeout:
        raise
    except Exception as exc:
        out.append(Violation("parser_exception", f"detect:{_exc_key(exc)}", _exc_detail(exc)))
    if texts and not out:
        k = inp.arg % len(texts)
        said = per_line[k] if k < len(per_line) else []
        if said and not any(isinstance(e, Unparsed) for e in said):
            # Padded in the bytes, before the framing: where a fix strips the padding is its own choice.
            raw_lines = data.split(b"\n")
            raw_lines[k] = b"\x00" * NUL_RUNS[(inp.arg >> 8) % len(NUL_RUNS)] + raw_lines[k]
            padded = [t for chunk in split_texts([b"\n".join(raw_lines)]) for t in chunk]
            again, _ = _parse_all(engine, padded)
            if k < len(again) and repr(again[k]) != repr(said):
                out.append(Violation("nul_padding_changes_events", engine,
                                     f"line {k + 1}: {[type(e).__name__ for e in said]} -> "
                                     f"{[type(e).__name__ for e in again[k]]}"))
    return out


# ------------------------------------------------------------------------------------------ text target


def _chunks(data: bytes, arg: int) -> list[bytes]:
    rng = random.Random(arg)
    out, i = [], 0
    while i < len(data):
        n = rng.choice((1, 2, 3, 7, 64, 4096, 1 << 16))
        out.append(data[i: i + n])
        i += n
    return out


def check_text(inp: Input) -> list[Violation]:
    """Framing under any chunking and its columnar twin; envelopes; JSON records; detection; run starts."""
    from ietop.pipeline.bulk.lines import window_lines, windows
    from parsers.detect import detect_engine
    from parsers.text.envelope import strip_envelope
    from parsers.text.framing import split_lines, split_texts
    from parsers.text.journal_json import journal_record
    from parsers.text.runs import last_run_start
    from parsers.vllm.jsonlog import json_record

    data = inp.files[0]
    out: list[Violation] = []
    step = "split_lines"
    try:
        whole = list(split_lines([data]))
        chunked = list(split_lines(_chunks(data, inp.arg)))
        if whole != chunked:
            i = next((i for i, (a, b) in enumerate(zip(whole, chunked)) if a != b), min(len(whole), len(chunked)))
            out.append(Violation("framing", "split_lines depends on chunking",
                                 f"line {i + 1}: {whole[i:i + 1]!r:.150} vs {chunked[i:i + 1]!r:.150}"))
        if len(whole) != physical_lines(data):
            out.append(Violation("framing", "split_lines count", f"{len(whole)} vs {physical_lines(data)}"))
        texts = [t for chunk in split_texts(_chunks(data, inp.arg + 1)) for t in chunk]
        if texts != [ln.text for ln in whole]:
            out.append(Violation("framing", "split_texts differs from split_lines", ""))
        step = "window_lines"
        columnar = [t for w in windows(_chunks(data, inp.arg), 1 << 12) for t in window_lines(w).to_list()]
        if columnar != [ln.text for ln in whole]:
            i = next((i for i, (a, b) in enumerate(zip(columnar, whole)) if a != b.text),
                     min(len(columnar), len(whole)))
            out.append(Violation("framing", "window_lines differs from LineSplitter",
                                 f"line {i + 1}: {columnar[i:i + 1]!r:.150} vs "
                                 f"{[ln.text for ln in whole[i:i + 1]]!r:.150}"))
        step = "strip_envelope"
        stripped = []
        for ln in whole:
            t0 = time.perf_counter()
            st = strip_envelope(ln.text)
            took = time.perf_counter() - t0
            if took > SLOW_LINE_S:
                out.append(Violation("slow_line", "strip_inner", f"{len(ln.text)} chars took {took:.1f} s"))
            stripped.append(st.text)
            if not isinstance(st.text, str) or "\n" in st.text or not (st.ts is None or isinstance(st.ts, datetime)):
                out.append(Violation("parser_type", "strip_envelope", repr(st)[:200]))
                break
        step = "journal_record"
        for ln in whole:
            rec = journal_record(ln.text)
            if rec is not None and not (isinstance(rec, tuple) and len(rec) == 2 and isinstance(rec[1], str)
                                        and (rec[0] is None or isinstance(rec[0], datetime))):
                out.append(Violation("parser_type", "journal_record", repr(rec)[:200]))
                break
        step = "json_record"
        for ln in whole:
            jr = json_record(ln.text)
            if jr is not None and not (isinstance(jr, tuple) and isinstance(jr[0], list)
                                       and all(isinstance(s, str) for s in jr[0])
                                       and (jr[1] is None or isinstance(jr[1], datetime))):
                out.append(Violation("parser_type", "json_record", repr(jr)[:200]))
                break
        step = "detect_engine"
        if detect_engine(stripped[:200]) not in (None, "ollama", "vllm", "mlx"):
            out.append(Violation("parser_type", "detect_engine", ""))
        step = "last_run_start"
        for engine in ("ollama", "vllm", "mlx"):
            at = last_run_start(engine, data)
            if at is not None and not (0 <= at <= len(data) and (at == 0 or data[at - 1:at] == b"\n")):
                out.append(Violation("parser_type", "last_run_start", f"{engine}: {at}"))
    except CaseTimeout:
        raise
    except Exception as exc:
        out.append(Violation("parser_exception", f"{step}:{_exc_key(exc)}", _exc_detail(exc)))
    return out


# ------------------------------------------------------------------------------------------- api target


def check_api(inp: Input) -> list[Violation]:
    """One API entry point on a mutated body; `inp.option` is `api` or `stream:<seed index>`."""
    from parsers.api import engine_api
    from parsers.api.events import OllamaResidency
    from parsers.api.proxy_log import ProxyLogParser
    from parsers.api.stream import StreamMeter
    from parsers.events import EngineStatus, ModelList, ProxyRequest, Scrape
    from parsers.vllm.prometheus import ScrapeError, parse_scrape, parse_scrape_counted

    body = inp.files[0]
    api, _, index = inp.option.partition(":")
    ts = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
    status = (200, 200, 200, 503, 404, None)[inp.arg % 6]
    results: list[object] = []
    try:
        if api == "ollama_ps":
            st, res = engine_api.ollama_ps("http://x", ts, status, body, None)
            results += [st] + ([res] if res is not None else [])
            ok = isinstance(st, EngineStatus) and (res is None or isinstance(res, OllamaResidency))
        elif api == "ollama_version":
            st = engine_api.ollama_version("http://x", ts, status, body, None)
            results.append(st)
            ok = isinstance(st, EngineStatus)
        elif api == "openai_models":
            ml = engine_api.openai_models("vllm", "http://x", ts, status, body, None)
            results.append(ml)
            ok = isinstance(ml, ModelList)
        elif api == "mlx_health":
            st = engine_api.mlx_health("http://x", ts, status, body, None)
            results.append(st)
            ok = isinstance(st, EngineStatus)
        elif api == "proxy_log":
            parser = ProxyLogParser()
            events = [e for n, line in enumerate(body.decode("utf-8", "replace").split("\n"), 1)
                      for e in parser.parse(n, line)]
            results += events
            ok = True
        elif api == "scrape":
            text = body.decode("utf-8", "replace")
            try:
                scrape = parse_scrape(text, "file:x", ts, line=1)
                results.append(scrape)
                ok = isinstance(scrape, Scrape)
            except ScrapeError:
                ok = True  # documented: nothing at all could be read
            counted, bad = parse_scrape_counted(text, "file:x", ts, line=1)
            results.append(counted)
            ok = ok and isinstance(counted, Scrape) and isinstance(bad, int) and bad >= 0
        else:  # stream
            seed = api_seeds()[int(index or 0) % len(api_seeds())]
            meter = StreamMeter(seed.path or "/api/chat", seed.request, seed.content_type, 0.0)
            t = 0.0
            for chunk in _chunks(body, inp.arg):
                t += 0.01
                meter.feed(t, chunk)
            req = meter.finish(t + 0.01, status, None)
            results.append(req)
            ok = isinstance(req, ProxyRequest)
            for name in ("ttfb_s", "ttft_s", "itl_s", "e2e_s", "load_s"):
                value = getattr(req, name)
                if value is not None and not math.isfinite(value):
                    results.append(f"{name}={value}")
                    ok = False
    except CaseTimeout:
        raise
    except Exception as exc:
        return [Violation("parser_exception", f"{api}:{_exc_key(exc)}", _exc_detail(exc))]
    out = [] if ok else [Violation("parser_type", f"{api}: return value", repr(results)[:300])]
    for r in results:
        for err in type_errors(r)[:1]:
            out.append(Violation("parser_type", f"{api}: {err.split('=')[0]}", err))
    return out


# ---------------------------------------------------------------------------------------------- targets


_RECORD_HEAD_B = re.compile(rb"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?:\d{4}-)?\d{2}-\d{2} \d{2}:\d{2}:\d{2}")
_RECORD_HEAD = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?:\d{4}-)?\d{2}-\d{2} \d{2}:\d{2}:\d{2}")


def check_glued(inp: Input) -> list[Violation]:
    """vLLM lines that hold several records (a lost newline, fixture 012): each record is read, in bounded time.
    Not drawn by the fuzzing (its slow_line and memory checks see the symptom): N7's regression check."""
    from parsers.events import Unparsed

    parser = make_parser("vllm")
    out: list[Violation] = []
    for n, text in enumerate(inp.files[0].decode("utf-8", "replace").split("\n"), 1):
        t0 = time.perf_counter()
        events = parser.parse(n, text)
        took = time.perf_counter() - t0
        records = len(_RECORD_HEAD.findall(text))
        if took > SLOW_LINE_S:
            out.append(Violation("slow_line", "vllm", f"line {n} ({len(text)} chars) took {took:.1f} s"))
        if records >= 2 and events and all(isinstance(e, Unparsed) for e in events):
            out.append(Violation("glued_records_lost", "vllm", f"line {n}: {records} records read as one Unparsed"))
    return out


SCALING_UNITS = 1500


def check_scaling(inp: Input) -> list[Violation]:
    """`strip_inner` on a line of SCALING_UNITS copies of the case's first line, then of four times as many: a
    linear reader takes about 4x as long; over 8x (and over 0.3 s) is superlinear. N14's regression check (a
    ratio, not a deadline: it holds on a fast machine and on a loaded one)."""
    from parsers.text.envelope import strip_inner

    unit = inp.files[0].split(b"\n")[0].decode("utf-8", "replace")
    times = []
    for n in (SCALING_UNITS, 4 * SCALING_UNITS):
        t0 = time.perf_counter()
        strip_inner(unit * n)
        times.append(time.perf_counter() - t0)
    if times[1] > 0.3 and times[1] > 8 * times[0]:
        return [Violation("superlinear", "strip_inner", f"{len(unit) * SCALING_UNITS} chars: {times[0]:.2f} s, "
                          f"4x as many: {times[1]:.2f} s")]
    return []


@dataclass(frozen=True)
class Target:
    name: str
    check: Callable[[Input], list[Violation]]


def _analyze_check(inp: Input) -> list[Violation]:
    return check_analyze(inp)


TARGETS: dict[str, Target] = {
    "analyze": Target("analyze", _analyze_check),
    "parsers": Target("parsers", check_parsers),
    "text": Target("text", check_text),
    "api": Target("api", check_api),
    "glued": Target("glued", check_glued),
    "scaling": Target("scaling", check_scaling),
}
FUZZ_TARGETS = ("analyze", "parsers", "text", "api")
"""What the tests and the campaign draw cases for (`glued` and `scaling` only rerun known defects' reproducers)."""

ENGINE_FLAGS = ("ollama", "vllm", "mlx", "proxy")


@dataclass(frozen=True)
class Case:
    """What a target draws: recipes (one per file; analyze may merge two), and the case's small choices."""

    target: str
    recipes: tuple[Recipe, ...]
    choice: int = 0
    """analyze: --engine (0-5: none; 6: the seed's; 7: another); parsers: the engine (by the seed's, or
    another); api: ignored (the seed's entry point)."""
    arg: int = 0
    csv: bool = False


def case_input(case: Case) -> Input:
    """Materialize a case into the bytes (and option) its target runs."""
    if case.target == "api":
        seeds = api_seeds()
        r = case.recipes[0]
        seed = seeds[r.seed % len(seeds)]
        # The whole body: a window of a pretty-printed JSON answer would be garbage before any mutation.
        whole = Recipe(0, 0, len(seed.body), r.ops, r.newline)
        data = materialize(whole, [Seed(seed.name, seed.api, seed.body)])
        option = f"stream:{r.seed % len(seeds)}" if seed.api == "stream" else seed.api
        return Input("api", (data,), option, case.arg)
    pool: Sequence[Seed] = log_seeds()
    deck = seed_deck()
    files = tuple(materialize(r, pool, deck) for r in case.recipes)
    seed_engine = pool[deck[case.recipes[0].seed % len(deck)]].engine
    if case.target == "analyze":
        engine = {6: seed_engine if seed_engine in ENGINE_FLAGS else "vllm",
                  7: ENGINE_FLAGS[case.arg % len(ENGINE_FLAGS)]}.get(case.choice % 8, "")
        return Input("analyze", files, engine, case.arg, case.csv)
    if case.target == "parsers":
        engine = seed_engine if case.choice % 4 and seed_engine in PARSER_ENGINES else (
            "vllm" if seed_engine == "metrics" else PARSER_ENGINES[case.arg % len(PARSER_ENGINES)])
        return Input("parsers", files[:1], engine, case.arg)
    return Input("text", files[:1], "", case.arg)


def random_case(target: str, rng: random.Random, index: int) -> Case:
    n = len(api_seeds()) if target == "api" else len(seed_deck())
    count = 2 if target == "analyze" and rng.random() < 0.15 else 1
    recipes = tuple(random_recipe(rng, n) for _ in range(count))
    return Case(target, recipes, rng.randrange(8), rng.randrange(1 << 20),
                target == "analyze" and index % CSV_EVERY == 0)


def case_strategy(target: str) -> Any:
    """Hypothesis' draw of a `Case` of `target` (the shape `random_case` draws): it shrinks toward the first
    seed, a one-line window and no operation. Hypothesis is imported here: the campaign does not need it."""
    from hypothesis import strategies as st

    n = len(api_seeds()) if target == "api" else len(seed_deck())
    op = st.tuples(st.sampled_from(OP_DECK), st.integers(0, (1 << 16) - 1), st.integers(0, (1 << 20) - 1))
    recipe = st.builds(Recipe, st.integers(0, n - 1), st.integers(0, (1 << 16) - 1), st.integers(1, MAX_WINDOW),
                       st.lists(op, max_size=MAX_OPS).map(tuple), st.booleans())
    recipes = st.lists(recipe, min_size=1, max_size=2 if target == "analyze" else 1).map(tuple)
    csv = st.integers(0, CSV_EVERY - 1).map(lambda i: target == "analyze" and i == 0)
    return st.builds(Case, st.just(target), recipes, st.integers(0, 7), st.integers(0, (1 << 20) - 1), csv)


def fuzz_settings(default: int) -> hypothesis.settings:
    """The bounded tests' hypothesis settings: `fuzz_examples(default)` examples, no deadline (a busy CI machine
    must not turn a slow case into a failure: hangs have their own alarm), and no explain phase (it reruns a
    failing analyze case hundreds of times: 95 s measured, for a line of commentary)."""
    from hypothesis import HealthCheck, Phase, settings

    return settings(max_examples=fuzz_examples(default), deadline=None,
                    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def fuzz_examples(default: int) -> int:
    """max_examples of a bounded fuzz test: IETOP_FUZZ_EXAMPLES when set (to run longer), else `default`."""
    value = os.environ.get("IETOP_FUZZ_EXAMPLES", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else default


def new_violations(violations: Sequence[Violation]) -> tuple[list[Violation], list[KnownDefect]]:
    """(violations no open known defect explains, the open known defects seen)."""
    new, seen = [], []
    for v in violations:
        k = known(v, open_only=True)
        if k is None:
            new.append(v)
        elif k not in seen:
            seen.append(k)
    return new, seen


def check_bounded(case: Case) -> None:
    """The bounded tests' step: run the case under the watchdog, count the open known defects it shows
    (`hypothesis.event`), fail on anything else with the input in the message."""
    from hypothesis import event

    inp = case_input(case)
    try:
        with watchdog():
            violations = run_case(inp)
    except CaseTimeout as exc:  # a BaseException: turned into a violation, known (N7, N14) or not
        violations = [Violation("hang", outside_key(inp.target, inp), str(exc))]
    new, seen = new_violations(violations)
    for k in seen:
        event(f"open known defect {k.id}")
    assert not new, describe(new, inp)


def describe(violations: Sequence[Violation], inp: Input) -> str:
    """A failure message: each violation, then the input as one line per file and how to run it."""
    rows = [f"{v.signature} ({v.mode or inp.target}): {v.detail}" for v in violations]
    files = [f"  file {i}: {one_line(data, 600)}" for i, data in enumerate(inp.files)]
    how = (f"  target {inp.target}, option {inp.option or '-'}, arg {inp.arg}"
           + (", with --csv" if inp.csv else ""))
    return "\n".join([*rows, *files, how])


def run_case(inp: Input) -> list[Violation]:
    """The target's check, with exceptions of the harness itself reported rather than lost."""
    return TARGETS[inp.target].check(inp)


# -------------------------------------------------------------------------------------------- minimizer


def _still(inp: Input, signature: str, check: Callable[[Input], list[Violation]]) -> bool:
    try:
        return any(v.signature == signature for v in check(inp))
    except CaseTimeout:
        return signature.startswith("hang")


def minimize(inp: Input, signature: str, check: Callable[[Input], list[Violation]] | None = None,
             budget_s: float = 60.0) -> Input:
    """The smallest input (ddmin over lines, then over the bytes of each remaining line) whose check still
    reports `signature`; stops at `budget_s`."""
    run = check or run_case
    deadline = time.monotonic() + budget_s
    current = inp
    for f in range(len(inp.files)):
        current = _minimize_file(current, f, signature, run, deadline)
    return current


def _minimize_file(inp: Input, f: int, signature: str, run: Callable[[Input], list[Violation]],
                   deadline: float) -> Input:
    def rebuild(lines: Sequence[bytes]) -> Input:
        return dataclasses.replace(inp, files=_with(inp.files, f, b"\n".join(lines)))

    lines = _ddmin(inp.files[f].split(b"\n"), lambda keep: _still(rebuild(keep), signature, run), deadline)
    for li in range(len(lines)):
        if len(lines[li]) > 1:
            lines[li] = _minimize_line(lines, li, rebuild, signature, run, deadline)
    return rebuild(lines)


def _minimize_line(lines: list[bytes], li: int, rebuild: Callable[[Sequence[bytes]], Input], signature: str,
                   run: Callable[[Input], list[Violation]], deadline: float) -> bytes:
    head, tail = lines[:li], lines[li + 1:]

    def fails(keep: list[int]) -> bool:
        return _still(rebuild([*head, bytes(keep), *tail]), signature, run)

    kept: list[int] = _ddmin(list(lines[li]), fails, deadline)
    return bytes(kept)


def _with(files: tuple[bytes, ...], i: int, data: bytes) -> tuple[bytes, ...]:
    return (*files[:i], data, *files[i + 1:])


T = typing.TypeVar("T")


def _ddmin(items: list[T], fails: Callable[[list[T]], bool], deadline: float) -> list[T]:
    """Zeller's ddmin, complements only: remove chunks while the failure stays; halve the chunk when none can
    go. Greedy, bounded by `deadline`."""
    n = 2
    while len(items) >= 2 and time.monotonic() < deadline:
        size = max(1, len(items) // n)
        removed = False
        start = 0
        while start < len(items) and time.monotonic() < deadline:
            candidate = items[:start] + items[start + size:]
            if candidate and fails(candidate):
                items = candidate
                removed = True
            else:
                start += size
        if not removed:
            if size == 1:
                break
            n = min(len(items), n * 2)
    return items


def one_line(data: bytes, limit: int = 300) -> str:
    """A reproducer as one printable line (Python bytes literal), long runs folded: b'9'*400 and b'\\x00'*4096,
    and a line that is one unit repeated as unit*count."""
    if len(data) > 2000:
        for p in range(1, 301):
            if data[p:] == data[:-p]:
                count = len(data) // p
                rest = data[count * p:]
                return f"{data[:p]!r}*{count}" + (f"+{rest!r}" if rest else "")
    text = repr(data)
    text = re.sub(r"(9{20,}|0{20,}|(?:\\x00){8,}|x{20,}|m{20,})", lambda m: _fold(m.group()), text)
    text = text.removeprefix("b''+").removesuffix("+b''")
    return text if len(text) <= limit else text[:limit] + f"…({len(data)} bytes)"


def _fold(run: str) -> str:
    unit = "\\x00" if run.startswith("\\x00") else run[0]
    count = len(run) // len(unit)
    return f"'+b'{unit}'*{count}+b'"
