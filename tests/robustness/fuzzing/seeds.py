"""Fuzz seeds: every case starts from a real fixture (fixtures/: Ollama, vLLM, MLX logs, scrapes, API answers,
recorded streams) plus a few SYNTHETIC seeds (bench/gen_*_log.py output and proxy JSONL written by the proxy's own
`to_json`: the fixtures hold no llama-server timing line nor any proxy log).

`log_seeds` feeds the analyze, parsers and text targets (drawn through `seed_deck`, each engine its share) and
`api_seeds` the api target; mutate.py then mutates a window of one. The package's overview is in run.py.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from tests.bench_support import load_script

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "fixtures"



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


def _synthetic_seeds() -> list[Seed]:
    """SYNTHETIC seeds from the benchmark generators (deterministic per seed): no real fixture has llama-server
    timing lines (`eval time = … ms / N tokens`), which feed the per-request facts the model divides by."""
    seeds: list[Seed] = []
    with tempfile.TemporaryDirectory(prefix="ietop-fuzz-gen-") as tmp:
        out = Path(tmp) / "gen.log"
        gen = load_script(ROOT / "bench" / "gen_ollama_log.py", "_fuzz_gen_ollama_log")
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
        gen_v = load_script(ROOT / "bench" / "gen_vllm_log.py", "_fuzz_gen_vllm_log")
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
