"""`ietop budget` (issue 25): every size equals the line it cites, pairs agree with the sums, and the seeds' own
example gives the seeds' rule.

The budget is computed the way the command computes it (`ietop budget --json PATH`, in process); each figure's
evidence names a path and a line, which the test reads back from the file and parses on its own.
"""

from __future__ import annotations

import json
import re
from itertools import product
from pathlib import Path
from typing import Any

import pytest

from ietop.cli import main

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "fixtures" / "synthetic" / "seed-budget.log"
GIB = 1 << 30

# Real fixtures that state sizes, by era: E2 llama.cpp output, E3 scheduler estimate (`offload to gpu`, `offload`),
# E3 `new model will fit … required=`, E4 device lines (v0.11 dev), E5 `runner.size`; vLLM V0 and V1; MLX.
SIZED = {
    "ollama/030-v01-windows-cgo-llamacpp-load-n_ctx-2048.log": "E2 llama.cpp",
    "ollama/060-v0140-journald-offload-to-gpu-old-fields-cpu-fallback.log": "E3 offload to gpu",
    "ollama/009-v07-two-gpu-ollama-engine-tensor-split.log": "E3 offload",
    "ollama/024-v057-windows-mllama-parallel-forced-1.log": "E3 required=",
    "ollama/034-v011-dev-new-memory-two-gpu-ollama-engine.log": "E4 model weights",
    "ollama/012-v032-vulkan-evict-idle-runner-debug.log": "E5 runner.size",
    "vllm/030-v0-0.8-startup-memory-profile-cuda-blocks-tui.txt": "vLLM V0",
    "vllm/028-v1-2026-startup-model-loading-memory-wording.txt": "vLLM V1",
    "mlx/real-two-runs-server.log": "MLX real run",
    "mlx/info-no-hf-cache-server.stderr": "MLX real run, prompt cache 0.02 GB",
}
_SIZE_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(TiB|GiB|MiB|KiB|GB|MB|KB|B)\b")
_UNIT = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "KB": 10**3, "MB": 10**6,
         "GB": 10**9}


def budget(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["budget", "--json", *args]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "ietop.budget/1"
    return doc


def _line(path: str, number: int) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        for i, text in enumerate(f, 1):
            if i == number:
                return text
    raise AssertionError(f"{path} has no line {number}")


def _sizes_in(text: str) -> set[int]:
    """Every size the line prints, in bytes, as each engine rounds it (floor and nearest both allowed), and the
    sum of any two of them (one line can give a part in two pieces: Ollama's `memory.weights.total` plus
    `projector.weights` are a vision model's weights)."""
    one: set[int] = set()
    for number, unit in _SIZE_RE.findall(text):
        exact = float(number) * _UNIT[unit]
        one.update({int(exact), round(exact)})
    return one | {a + b for a in one for b in one if a != b}


def check_figure(figure: dict[str, Any] | None) -> int:
    """The figure's bytes are what its lines print (one size per line, summed over the lines: one line per
    device). Returns how many log lines were checked."""
    if figure is None or figure["estimated"] or not figure["lines"]:
        return 0
    per_line = [_sizes_in(_line(ev["path"], ev["line"])) for ev in figure["lines"]]
    assert all(per_line), f"a cited line prints no size: {figure}"
    sums = {sum(choice) for choice in product(*per_line)}
    assert figure["bytes"] in sums, f"{figure['bytes']} is not what {figure['lines']} print ({sorted(sums)[:6]})"
    return len(per_line)


def check_pairs(doc: dict[str, Any]) -> None:
    totals = {m["model"]: m["total_bytes"] for m in doc["models"]}
    usable = doc["usable_bytes"]
    for p in doc["pairs"]:
        a, b = totals[p["a"]], totals[p["b"]]
        if a is None or b is None:
            assert p["need_bytes"] is None and p["fits"] is None
            continue
        assert p["need_bytes"] == a + b
        if usable is None:
            assert p["fits"] is None
        else:
            assert p["margin_bytes"] == usable - a - b
            assert p["fits"] == (a + b <= usable)


@pytest.mark.parametrize("fixture", sorted(SIZED))
def test_every_size_equals_the_line_it_cites(fixture: str, capsys: pytest.CaptureFixture[str]) -> None:
    doc = budget(capsys, "--memory", "24", str(ROOT / "fixtures" / fixture))
    checked = 0
    for m in doc["models"]:
        for part in ("weights", "kv", "total"):
            figure = m["evidence"][part]
            assert (figure["bytes"] if figure else None) == m[f"{part}_bytes"]
            checked += check_figure(figure)
    assert checked, f"{SIZED[fixture]}: no size of {fixture} was read from a line"
    check_pairs(doc)


def test_the_demo_incident_cites_its_lines(capsys: pytest.CaptureFixture[str]) -> None:
    doc = budget(capsys, str(ROOT / "ietop" / "demo" / "incident.log"))
    names = {m["model"] for m in doc["models"]}
    assert {"qwen3:8b", "gemma3:27b"} <= names
    assert sum(check_figure(m["evidence"][p]) for m in doc["models"] for p in ("weights", "kv", "total")) >= 2
    # The usable memory is the device the log names, and the line says so.
    cited = doc["usable_lines"][0]
    assert doc["usable_bytes"] in _sizes_in(_line(cited["path"], cited["line"]))
    check_pairs(doc)


def test_the_seeds_example_gives_the_seeds_rule(capsys: pytest.CaptureFixture[str]) -> None:
    doc = budget(capsys, str(SEED))
    assert doc["usable_bytes"] == 78 * GIB
    fits = {frozenset((p["a"], p["b"])): p for p in doc["pairs"]}
    assert fits[frozenset(("workhorse:35b-q4", "vision:27b-q8"))]["fits"] is True
    reasoner = [p for key, p in fits.items() if "reasoner:120b-q4" in key]
    assert len(reasoner) == 3 and all(p["fits"] is False for p in reasoner)
    # What a swap to the reasoner costs is its measured load (one, 58.3 s in the log).
    assert {(p["swap_s"], p["swap_loads_measured"], p["swap_model"]) for p in reasoner} == {(58.3, 1, "reasoner:120b-q4")}
    embedder = next(m for m in doc["models"] if m["model"] == "embedder:0.3b")
    assert embedder["on_demand"] is not None and "evicted vision:27b-q8" in embedder["on_demand"]
    rules = "\n".join(doc["rules"])
    assert "workhorse:35b-q4 + vision:27b-q8 fit together (51.0 GiB of 78.0): yes" in rules
    assert "reasoner:120b-q4 runs alone" in rules
    assert "embedder:0.3b loads on demand" in rules
    together = doc["resident_together"]
    assert set(together["models"]) == {"workhorse:35b-q4", "vision:27b-q8"} and together["fits"] is True
    for m in doc["models"]:
        for part in ("weights", "kv", "total"):
            check_figure(m["evidence"][part])
    check_pairs(doc)


def test_a_swap_cost_is_the_median_of_the_measured_loads(capsys: pytest.CaptureFixture[str]) -> None:
    doc = budget(capsys, str(SEED))
    by = {m["model"]: m for m in doc["models"]}
    # Two loads each in the log: 9.20 and 9.00 s, 11.40 and 10.80 s.
    assert (by["workhorse:35b-q4"]["load_s_median"], by["workhorse:35b-q4"]["loads_measured"]) == (9.1, 2)
    assert (by["vision:27b-q8"]["load_s_median"], by["vision:27b-q8"]["loads_measured"]) == (11.1, 2)


def test_memory_flag_overrides_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    doc = budget(capsys, "--memory", "110", "--reserve", "10", str(SEED))
    assert doc["usable_bytes"] == 100 * GIB
    assert "--memory 110.0 GiB (given)" in doc["usable_source"] and "--reserve 10.0 GiB" in doc["usable_source"]
    check_pairs(doc)
    # With 100 GiB, the workhorse and the reasoner fit (22.0 + 77.8).
    pair = next(p for p in doc["pairs"] if {p["a"], p["b"]} == {"workhorse:35b-q4", "reasoner:120b-q4"})
    assert pair["fits"] is True
