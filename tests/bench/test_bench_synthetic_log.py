"""Tests for the benchmark's synthetic Ollama log generator and the analyze-vs-grep harness.

The generator is checked against the line grammars of ollama-formats.md (§2, §8), written out
here independently of the generator, so a shape drifting away from the reference fails here
before it can make the benchmark measure something unrealistic.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.bench_support import load_bench

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"


gen = load_bench("gen_ollama_log")

# --- envelopes (formats §2.1) -------------------------------------------------------------
JOURNALD = re.compile(
    r"^(?P<date>\S+(?:\s+\d{1,2})?)\s+(?P<clock>\d{2}:\d{2}:\d{2}(?:\.\d+)?)\s+(?:(?P<host>\S+)\s+)?"
    r"(?P<ident>[A-Za-z0-9_.\-]+)\[(?P<pid>\d+)\]: ?(?P<rest>.*)$"
)
DOCKER_T = re.compile(r"^(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z) (?P<rest>.*)$")
COMPOSE = re.compile(r"^(?P<svc>[A-Za-z0-9][A-Za-z0-9_.\-]*)\s+[|](?: (?P<rest>.*))?$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")

# --- inner lines (formats §2.2-§2.5) -------------------------------------------------------
SLOG = re.compile(
    r"^time=(?P<time>\S+) level=(?P<level>[A-Z]+(?:[+-]\d+)?) source=(?P<source>\S+) "
    r'msg=(?P<msg>"(?:[^"\\]|\\.)*"|\S*)(?: (?P<attrs>.*))?$'
)
GOLOG = re.compile(
    r"^(?P<date>\d{4}/\d{2}/\d{2}) (?P<clock>\d{2}:\d{2}:\d{2}) (?P<file>[\w.]+\.go):(?P<line>\d+): "
    r"(?:(?P<level>INFO|WARN|ERROR|DEBUG) )?(?P<msg>.*)$"
)
GIN = re.compile(
    r"^\[GIN\] (?P<date>\d{4}/\d{2}/\d{2}) - (?P<clock>\d{2}:\d{2}:\d{2}) \|\s*(?P<status>\d{3})\s*\|\s*"
    r"(?P<latency>[0-9.]+(?:ns|µs|us|ms|s)|(?:\d+h)?(?:\d+m)?\d+(?:\.\d+)?s)\s*\|\s*(?P<client>\S*)\s*\|\s*"
    r'(?P<method>[A-Z]+)\s+"(?P<path>(?:[^"\\]|\\.)*)"$'
)
CPP_TEXT = re.compile(r"^(?:INFO|WARN|ERROR|DEBUG) \[\w+\] .* \| .*$")
LLAMA_SERVER = re.compile(
    r"^(?P<comp>slot|srv|que|cmn)\s+(?P<func>[^:]+?):\s+(?:id\s+(?P<slot>-?\d+) \| task (?P<task>-?\d+) \| )?"
    r"(?P<msg>.*)$"
)
RAW = re.compile(
    r"^(?:llama_model_loader|llm_load_print_meta|print_info|load_tensors|llm_load_tensors|llama_context"
    r"|llama_new_context_with_model|llama_kv_cache|llama_model_load_from_file_impl|ggml_cuda_init"
    r"|load_backend|build|main|ggml_backend_cuda_buffer_type_alloc_buffer|alloc_tensor_range): "
    r"|^  Device \d+: |^ {8}\S|^ *(?:prompt eval|eval|total) time = "
)
OFFSET = re.compile(r"(?:Z|[+-]\d{2}:\d{2})$")
GO_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)(ns|µs|us|ms|s))?$")

# --- events (formats §8) -------------------------------------------------------------------
EVENTS = {
    "LISTEN": r"Listening on (?P<addr>\S+) \(version (?P<ver>[^)]+)\)",
    "CONFIG": r'(?:msg="server config"|INFO server config) env="map\[(?P<env>.*)\]"',
    "START": r'msg="(?P<kind>starting llama server|starting runner|starting llama-server)" cmd="',
    "LOADREQ": r'msg=load request="\{Operation:(?P<op>\w+) .*?Parallel:(?P<par>\d+) .*?KvSize:(?P<kv>\d+)',
    "LOADED": r'msg="loaded runners" count=(?P<n>\d+)',
    "READY": r"(?:llama runner|llama-server) started in (?P<secs>[0-9.]+) seconds",
    "EVICT": r'msg="(?:llama-server model predicted to exceed available memory, evicting|model requires more '
    r"(?:gpu |system )?memory than is currently available, evicting a model to make space|resetting model to "
    r'expire immediately to make room)"',
    "IDLE": r'msg="runner with (?:non-zero|zero) duration has gone idle[^"]*"',
    "EXPIRE": r'msg="(?:timer expired, expiring to unload|runner expired event received)"',
    "TRUNC": r'msg="truncating input prompt" limit=(\d+) prompt=(\d+) keep=(\d+) new=(\d+)',
    "TRUNC_CPP": r"input truncated \| n_ctx=(\d+) n_erase=(\d+) n_keep=(\d+) n_left=(\d+) n_shift=(\d+)",
    "NEWPROMPT": r"new prompt, n_ctx_slot = (\d+), n_keep = (\d+), (?:task\.n_tokens|n_prompt_tokens) = (\d+)",
    "PEVAL": r"prompt eval time =\s*([0-9.]+) ms /\s*(\d+) tokens",
    "LOADERR": r'msg="error loading llama server" error=',
    "TERMINATED": r"(?:llama runner|llama-server) (?:terminated|process (?:has terminated|no longer running))",
    "OOM": r"(?i)(out of memory|cudaMalloc failed|hipMalloc failed)",
    "OFFLOADED": r"offloaded (\d+)/(\d+) layers to GPU",
}
EVENT_RES = {k: re.compile(v) for k, v in EVENTS.items()}
JUNK = set(gen.JUNK_LINES)


def strip_envelope(line: str) -> tuple[str, str | None]:
    """Remove one outer envelope; returns (inner line, envelope kind or None)."""
    if line.startswith(("time=", "[GIN]")):
        return line, None
    m = DOCKER_T.match(line)
    if m:
        return m["rest"], "docker"
    m = JOURNALD.match(line)
    if m and m["ident"] == "ollama":
        return m["rest"], "journald"
    m = COMPOSE.match(line)
    if m and line.startswith("ollama-1  | "):
        return m["rest"] or "", "compose"
    return line, None


def classify(inner: str) -> str:
    if inner in JUNK:
        return "junk"
    if SLOG.match(inner):
        return "slog"
    if GIN.match(ANSI.sub("", inner)):
        return "gin"
    if GOLOG.match(inner):
        return "golog"
    if CPP_TEXT.match(inner):
        return "llamacpp_text"
    if LLAMA_SERVER.match(inner) or RAW.match(inner):
        return "raw"
    return "unknown"


def go_duration_ns(text: str) -> float:
    m = GO_DURATION.match(text)
    assert m, text
    h, mi, num, unit = m.groups()
    scale = {"ns": 1, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9, None: 0}[unit]
    return (int(h or 0) * 3600 + int(mi or 0) * 60) * 1e9 + float(num or 0) * scale


@pytest.fixture(scope="module")
def log16(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], dict[str, int], int]:
    # 16 MiB: enough sessions for all four eras, envelopes and rare events; ~1 s to make
    path = tmp_path_factory.mktemp("synth") / "o.log"
    stats, cut = gen.generate(str(path), 16 * 1024 * 1024, 7)
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return data.decode("utf-8", "surrogateescape").splitlines(), stats.kinds, cut


def test_go_duration_matches_go_formatting() -> None:
    cases = {
        0: "0s",
        912: "912ns",
        16_724: "16.724µs",
        27_388_420: "27.38842ms",
        7_589_501_463: "7.589501463s",
        90 * 10**9: "1m30s",
        (3600 + 24 * 60 + 39) * 10**9: "1h24m39s",
        3600 * 10**9: "1h0m0s",
    }
    for ns, text in cases.items():
        assert gen.go_duration(ns) == text
    # gin truncates latencies above a minute to whole seconds and right-aligns them in 13
    assert gen.gin_latency(497_123_456_789) == "        8m17s"


def test_parse_size() -> None:
    assert gen.parse_size("1G") == 1024**3
    assert gen.parse_size("200M") == 200 * 1024**2
    assert gen.parse_size("1.5GiB") == int(1.5 * 1024**3)
    assert gen.parse_size("4096") == 4096


def test_size_label_and_exact_size(tmp_path: Path) -> None:
    path = tmp_path / "s.log"
    gen.generate(str(path), 3 * 1024 * 1024, 1)
    size = path.stat().st_size
    # cut at a line boundary: never above the request, and short by less than one line
    assert 3 * 1024 * 1024 - 8192 < size <= 3 * 1024 * 1024
    first = path.read_text(errors="replace").splitlines()[0]
    m = SLOG.match(first)
    assert m and "SYNTHETIC" in m["msg"] and "seed=1" in m["msg"]


def test_same_seed_same_bytes_across_processes(tmp_path: Path) -> None:
    # different hash seeds: no set/dict-order or id() dependence may leak into the output
    outs = []
    for hashseed in ("0", "1"):
        out = tmp_path / f"h{hashseed}.log"
        env = dict(os.environ, PYTHONHASHSEED=hashseed)
        cmd = [sys.executable, str(BENCH / "gen_ollama_log.py"), str(out), "--size", "2M", "--seed", "5"]
        subprocess.run(cmd, check=True, env=env, capture_output=True)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    other = tmp_path / "other.log"
    gen.generate(str(other), 2 * 1024 * 1024, 6)
    assert other.read_bytes() != outs[0]
    meta = json.loads((tmp_path / "h0.log.meta.json").read_text())
    assert meta["synthetic"] is True and meta["seed"] == 5


def test_every_line_has_a_reference_shape(log16: tuple[list[str], dict[str, int], int]) -> None:
    lines, generated, cut = log16
    kinds: Counter[str] = Counter()
    envelopes: Counter[str | None] = Counter()
    unknown = []
    for line in lines[1:]:
        inner, env = strip_envelope(line)
        envelopes[env] += 1
        kind = classify(inner)
        kinds[kind] += 1
        if kind == "unknown":
            unknown.append(line)
    assert not unknown, unknown[:5]
    total = sum(kinds.values())
    # mostly GIN and slog by volume, ~1% junk, as in real logs
    assert (kinds["gin"] + kinds["slog"]) / total > 0.7
    assert 0.005 < kinds["junk"] / total < 0.02
    assert kinds["golog"] and kinds["llamacpp_text"] and kinds["raw"]
    assert envelopes["journald"] and envelopes["docker"] and envelopes["compose"] and envelopes[None]
    # the generator's own counters agree with an independent classification, up to the lines it
    # dropped at the end to respect the size
    assert generated["gin"] - cut <= kinds["gin"] <= generated["gin"]
    assert generated["slog"] - cut <= kinds["slog"] <= generated["slog"]
    assert generated["llamacpp_text"] - cut <= kinds["llamacpp_text"] <= generated["llamacpp_text"]


def test_events_and_eras_present(log16: tuple[list[str], dict[str, int], int]) -> None:
    lines, _, _ = log16
    found: Counter[str] = Counter()
    versions = set()
    start_kinds = set()
    statuses: Counter[str] = Counter()
    units = set()
    for line in lines:
        inner, _ = strip_envelope(line)
        for name, rx in EVENT_RES.items():
            m = rx.search(inner)
            if m:
                found[name] += 1
                if name == "LISTEN":
                    versions.add(tuple(int(x) for x in m["ver"].split(".")))
                if name == "START":
                    start_kinds.add(m["kind"])
        g = GIN.match(ANSI.sub("", inner))
        if g:
            statuses[g["status"]] += 1
            lat = g["latency"]
            units.add("m" if "m" in lat and not lat.endswith("ms") else re.sub(r"[0-9.]", "", lat))
            assert go_duration_ns(lat) >= 0
    missing = set(EVENTS) - set(found)
    assert not missing
    assert start_kinds == {"starting llama server", "starting runner", "starting llama-server"}
    eras = {"E2" if v < (0, 4, 0) else "E3" if v < (0, 11, 5) else "E4" if v < (0, 30, 0) else "E5" for v in versions}
    assert eras == {"E2", "E3", "E4", "E5"}
    assert {"200", "499", "500"} <= set(statuses)
    assert {"ns", "µs", "ms", "s", "m"} <= units


def test_timestamps_never_go_backwards(log16: tuple[list[str], dict[str, int], int]) -> None:
    lines, _, _ = log16
    last = None
    last_docker = ""
    for line in lines:
        inner, env = strip_envelope(line)
        if env == "docker":
            # fixed-width RFC3339Nano in UTC: string order is time order
            stamp = line.split(" ", 1)[0]
            assert stamp >= last_docker, line
            last_docker = stamp
        m = SLOG.match(inner)
        if not m or not OFFSET.search(m["time"]):
            continue  # not slog, or an old Windows build that printed no offset [S013]
        t = dt.datetime.fromisoformat(m["time"].replace("Z", "+00:00"))
        if last is not None:
            assert t >= last, line
        last = t


def test_harness_with_wc(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        str(BENCH / "analyze_vs_grep.py"),
        "--size",
        "2M",
        "--small-size",
        "512K",
        "--repeat",
        "1",
        "--analyze-cmd",
        "wc -l",
        "--out-dir",
        str(tmp_path),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "analyze_vs_grep-busy.json").read_text())
    assert report["synthetic_log"] is True and report["profile"] == "busy"
    large = report["files"]["large"]
    assert large["grep_count"] > 0
    assert report["ratios"]["wall_analyze_over_grep"] > 0
    assert report["ratios"]["rss_analyze_large_over_small"] > 0
    assert not report["warnings"]
    assert report["analyze_output_small"]["bytes"] > 0  # wc -l prints one line
    # --reuse keeps the log when the generator did not change
    done = subprocess.run([*cmd, "--reuse"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "reusing" in done.stdout


def test_harness_reports_failing_analyze_in_one_line(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        str(BENCH / "analyze_vs_grep.py"),
        "--size",
        "1M",
        "--small-size",
        "256K",
        "--repeat",
        "1",
        "--analyze-cmd",
        "sh -c 'echo boom >&2; exit 3' {file}",
        "--out-dir",
        str(tmp_path),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode != 0
    err = done.stderr.strip().splitlines()
    assert len(err) == 1 and "exit 3" in err[0] and "boom" in err[0]
