"""LoadMemory events from the memory lines of every Ollama era (parsers.ollama.memory).

Real lines come from fixtures/ollama; a line not from a fixture is marked (ref) and names the source it was
written from (Ollama's Go source or the llama.cpp it vendored, at the tag given), so it is synthetic.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from parsers import events as ev
from parsers.ollama.log import OllamaParser
from parsers.ollama.memory import human_bytes, llamacpp_memory
from parsers.text.envelope import strip_envelope
from parsers.text.framing import split_lines

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "ollama"
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def parse_lines(lines: list[str]) -> list[ev.Event]:
    """Lines as the whole-file path reads them: envelope off, then the parser, numbered from 1."""
    parser = OllamaParser()
    out: list[ev.Event] = []
    for n, line in enumerate(lines, 1):
        st = strip_envelope(line)
        if st.text:
            out.extend(parser.parse(n, st.text, st.ts))
    return out


def parse_file(name: str) -> tuple[list[str], list[ev.LoadMemory]]:
    lines = [line.text for line in split_lines([(FIX / name).read_bytes()])]
    return lines, memory(parse_lines(lines))


def memory(events: list[ev.Event]) -> list[ev.LoadMemory]:
    return [e for e in events if isinstance(e, ev.LoadMemory)]


def table(found: list[ev.LoadMemory]) -> list[tuple[int, str, int, str | None, bool]]:
    return [(e.line, e.part, e.size_bytes, e.device, e.planned) for e in found]


def hb(text: str) -> int:
    size = human_bytes(text)
    assert size is not None
    return size


def test_human_bytes_reads_go_and_llamacpp_sizes() -> None:
    assert human_bytes("11.5 GiB") == int(11.5 * GiB)
    assert human_bytes("680.0 MiB") == 680 * MiB
    assert human_bytes("0 B") == 0
    assert human_bytes("36.00 MiB") == 36 * MiB
    assert human_bytes("1.56 GiB") == int(1.56 * GiB)


def test_a_size_past_a_floats_range_is_read_not_raised() -> None:
    """Found by the fuzz campaign (2026-12-02, case 296497035:analyze:3297): a 301-digit size times GiB is an
    infinite float, and int() of it raised OverflowError out of `ietop analyze`. It is read (the store then
    refuses the line as implausible); what is no number at all is unreadable."""
    huge = "1" + "0" * 300
    size = human_bytes(huge + " GB")
    assert size is not None and size > 10**300
    assert human_bytes("inf GiB") is None and human_bytes("nan MiB") is None
    kv = llamacpp_memory(f"llama_kv_cache_init: KV self size = {'9' * 400}.50 MiB", 3, None)
    assert kv is not None and [e.part for e in kv] == ["kv"] and kv[0].size_bytes > 10**400  # type: ignore[attr-defined]


def test_analyze_refuses_the_line_of_an_impossible_size(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text('time=2025-01-01T00:00:00Z level=INFO source=sched.go:1 msg="new model will fit in available '
                   f'VRAM" required="{"1" + "0" * 300} GB"\n'
                   f"llama_kv_cache_init: KV self size = {'9' * 400}.50 MiB\n")
    run = subprocess.run([sys.executable, "-m", "ietop", "analyze", str(log), "--json"], capture_output=True,
                         text=True, timeout=120, check=False)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    doc = json.loads(run.stdout)
    assert doc["counts"]["implausible_lines"] == 1  # the KV line's event; the scheduler's size is kept as text

    def numbers(value: object) -> list[float]:
        if isinstance(value, dict):
            return [n for v in value.values() for n in numbers(v)]
        if isinstance(value, list):
            return [n for v in value for n in numbers(v)]
        return [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else []

    assert max(numbers(doc)) < 2**53


def test_offload_to_gpu_v0140_is_a_planned_estimate() -> None:
    lines, found = parse_file("060-v0140-journald-offload-to-gpu-old-fields-cpu-fallback.log")
    assert table(found) == [
        (2, "total", hb("12.5 GiB"), None, True),
        (2, "kv", 448 * MiB, None, True),
        (2, "weights", hb("11.6 GiB"), None, True),  # v0.1.33-v0.1.44: weights.total is the whole model
        (2, "graph", 244 * MiB, None, True),
    ]
    for text in ("12.5 GiB", "448.0 MiB", "11.6 GiB", "244.0 MiB"):
        assert f'"{text}"' in lines[1]
    events = parse_lines(lines)
    assert [(e.line, e.offloaded, e.total) for e in events if isinstance(e, ev.Offload)] == [(2, 0, None)]


def test_msg_offload_v07_adds_the_projector() -> None:
    lines, found = parse_file("009-v07-two-gpu-ollama-engine-tensor-split.log")
    assert table(found) == [
        (2, "total", hb("14.9 GiB"), None, True),
        (2, "kv", 2 * GiB, None, True),
        (2, "weights", hb("7.5 GiB") + hb("806.2 MiB"), None, True),
        (2, "graph", hb("1.3 GiB"), None, True),
    ]
    for text in ('memory.weights.total="7.5 GiB"', 'projector.weights="806.2 MiB"', 'memory.required.full="14.9 GiB"'):
        assert text in lines[1]
    assert any(isinstance(e, ev.Offload) and e.line == 2 for e in parse_lines(lines))


def test_ollama_engine_buffer_lines_v011_dev() -> None:
    lines, found = parse_file("034-v011-dev-new-memory-two-gpu-ollama-engine.log")
    assert table(found) == [
        (6, "weights", hb("11.5 GiB"), "CUDA0", False),
        (7, "weights", hb("11.9 GiB"), "CUDA1", False),
        (8, "weights", 680 * MiB, "CPU", False),
        (9, "graph", 0, "CUDA0", False),  # ggml.go prints each backend's reserve, `0 B` included
    ]
    for e, text in zip(found, ("11.5 GiB", "11.9 GiB", "680.0 MiB", "0 B"), strict=True):
        assert f'size="{text}"' in lines[e.line - 1] and f"={e.device} " in lines[e.line - 1]


def test_llamacpp_summaries_not_buffers_v01_cgo() -> None:
    lines, found = parse_file("030-v01-windows-cgo-llamacpp-load-n_ctx-2048.log")
    assert table(found) == [
        (3, "weights", int(1.56 * GiB), None, False),  # `model size`, not the CPU/CUDA0 buffers (lines 14-15)
        (21, "kv", 36 * MiB, None, False),  # `KV self size`, not `CUDA0 KV buffer size` (line 20): the same bytes
        (23, "graph", int(504.25 * MiB), "CUDA0", False),
    ]
    assert "model size       = 1.56 GiB" in lines[2]
    assert "KV self size  =   36.00 MiB" in lines[20]
    assert "CUDA0 compute buffer size =   504.25 MiB" in lines[22]
    # The CUDA_Host input buffer (line 22) is no part of weights, KV or graph.
    assert "input buffer size" in lines[21]


def test_other_fixtures_state_no_load_memory() -> None:
    with_memory = {"009", "030", "034", "060"}
    for path in sorted(FIX.glob("*.log")):
        _lines, found = parse_file(path.name)
        assert bool(found) == (path.name[:3] in with_memory), path.name


# E4 device lines (ref): the format of ml/device.go BackendMemory.Log (v0.12.4+; ml/backend.go v0.11.5-v0.12.3):
# slog.Log(level, "model weights", "device", gpu.Name, "size", format.HumanBytes2(sum)) and its kin.
E4_INFO = [
    'time=2025-10-01T10:00:01.000Z level=INFO source=device.go:241 msg="model weights" device=CUDA0 size="4.6 GiB"',
    'time=2025-10-01T10:00:01.000Z level=INFO source=device.go:246 msg="model weights" device=CPU size="525.0 MiB"',
    'time=2025-10-01T10:00:01.000Z level=INFO source=device.go:252 msg="kv cache" device=CUDA0 size="1.1 GiB"',
    'time=2025-10-01T10:00:01.000Z level=INFO source=device.go:263 msg="compute graph" device=CUDA0 size="304.0 MiB"',
    'time=2025-10-01T10:00:01.000Z level=INFO source=device.go:268 msg="compute graph" device=CPU size="12.0 MiB"',
    'time=2025-10-01T10:00:01.000Z level=INFO source=device.go:273 msg="total memory" size="6.5 GiB"',
]
E4_EXPECTED = [
    ("weights", hb("4.6 GiB"), "CUDA0"),
    ("weights", 525 * MiB, "CPU"),
    ("kv", hb("1.1 GiB"), "CUDA0"),
    ("graph", 304 * MiB, "CUDA0"),
    ("graph", 12 * MiB, "CPU"),
    ("total", hb("6.5 GiB"), None),
]
# Real runner starts: 015 (a model on the Go engine) and 016 (a device-discovery runner: no model). The llama
# engine's start (ref) is 015's without `--ollama-engine` (llm/server.go StartRunner, v0.12.11+).
GO_ENGINE_START = (FIX / "015-v011-docker-embeddinggemma-second-load-v1-chat.log").read_text().splitlines()[6]
DISCOVERY_START = strip_envelope(
    (FIX / "016-v02x-journald-gemma4-vulkan-runner-start.log").read_text().splitlines()[4]
).text
LLAMA_ENGINE_START = GO_ENGINE_START.replace("--ollama-engine ", "")


def test_e4_device_lines_are_allocations() -> None:
    found = memory(parse_lines([GO_ENGINE_START, *E4_INFO]))
    assert [(e.part, e.size_bytes, e.device) for e in found] == E4_EXPECTED
    assert [e.line for e in found] == [2, 3, 4, 5, 6, 7]
    assert not any(e.planned for e in found)


def test_e4_debug_device_lines_are_attempts_not_loads() -> None:
    # llm/server.go logs the same set at DEBUG after every fit/alloc attempt (ref: the INFO lines at DEBUG).
    debug = [line.replace("level=INFO", "level=DEBUG") for line in E4_INFO]
    assert memory(parse_lines(debug)) == []


def test_llama_engine_device_lines_are_ollamas_estimate() -> None:
    # v0.12.11+: llamaServer.Load synthesizes the set from its estimate before llama.cpp loads; a discovery
    # runner started in between loads nothing and changes nothing.
    found = memory(parse_lines([LLAMA_ENGINE_START, DISCOVERY_START, *E4_INFO]))
    assert [(e.part, e.size_bytes, e.device) for e in found] == E4_EXPECTED
    assert all(e.planned for e in found)
    # The same line texts after a Go-engine start: allocations (the meaning is not remembered by text).
    again = memory(parse_lines([LLAMA_ENGINE_START, *E4_INFO, GO_ENGINE_START, *E4_INFO]))
    assert [e.planned for e in again] == [True] * 6 + [False] * 6


def test_ggml_v060_compute_graph_without_size_is_skipped() -> None:
    # (ref) v0.6.0 ml/backend/ggml/ggml.go: slog.Info("compute graph", "backend", …, "buffer_type", …), no size.
    line = 'time=2025-03-12T10:00:00.000Z level=INFO source=ggml.go:356 msg="compute graph" backend=CUDA0 buffer_type=CUDA0'
    assert memory(parse_lines([line])) == []


OFFLOAD_009 = (FIX / "009-v07-two-gpu-ollama-engine-tensor-split.log").read_text().splitlines()[1]


def test_msg_offload_before_v061_holds_kv_in_weights_total() -> None:
    # v0.5.12-v0.6.0 summed each layer with its KV share and no output layer (llm/memory.go): the version says so.
    # (ref) the `Listening on` line of 022 with the version changed; the offload line is 009's.
    listen = (
        "time=2025-02-20T09:23:09.833+08:00 level=INFO source=routes.go:1238 "
        'msg="Listening on 127.0.0.1:11434 (version 0.5.13)"'
    )
    weights = [e.size_bytes for e in memory(parse_lines([listen, OFFLOAD_009])) if e.part == "weights"]
    assert weights == [hb("7.5 GiB") - 2 * GiB + hb("1.9 GiB") + hb("806.2 MiB")]
    later = listen.replace("0.5.13", "0.6.8")
    weights = [e.size_bytes for e in memory(parse_lines([later, OFFLOAD_009])) if e.part == "weights"]
    assert weights == [hb("7.5 GiB") + hb("806.2 MiB")]


def test_offload_to_library_holds_kv_in_weights_total() -> None:
    # (ref) v0.1.45-v0.5.11 llm/memory.go log(): "offload to "+library with the same fields as 009's line.
    line = OFFLOAD_009.replace("msg=offload library=cuda", 'msg="offload to cuda"')
    found = {e.part: e.size_bytes for e in memory(parse_lines([line]))}
    assert found["weights"] == hb("7.5 GiB") - 2 * GiB + hb("1.9 GiB") + hb("806.2 MiB")
    assert found["total"] == hb("14.9 GiB") and found["kv"] == 2 * GiB


def test_offload_v061_total_without_output_layer() -> None:
    # (ref) v0.6.1-v0.6.2 printed total = repeating = the repeating layers; nonrepeating is the output layer.
    line = OFFLOAD_009.replace('memory.weights.repeating="5.6 GiB"', 'memory.weights.repeating="7.5 GiB"')
    found = {e.part: e.size_bytes for e in memory(parse_lines([line]))}
    assert found["weights"] == hb("7.5 GiB") + hb("1.9 GiB") + hb("806.2 MiB")


def test_offload_to_gpu_v0132_old_fields() -> None:
    # (ref) v0.1.32 llm/server.go: slog.Info("offload to gpu", "reallayers", …, "required", …, "kv", …,
    # "fulloffload", …, "partialoffload", …): no weights figure.
    line = (
        'time=2024-04-16T10:00:00.000Z level=INFO source=server.go:127 msg="offload to gpu" reallayers=33 '
        'layers=33 required="5.0 GiB" used="5.0 GiB" available="22.1 GiB" kv="256.0 MiB" '
        'fulloffload="164.0 MiB" partialoffload="181.0 MiB"'
    )
    found = memory(parse_lines([line]))
    assert [(e.part, e.size_bytes, e.planned) for e in found] == [
        ("total", 5 * GiB, True),
        ("kv", 256 * MiB, True),
        ("graph", 164 * MiB, True),
    ]


@pytest.mark.parametrize(
    ("line", "part", "size", "device"),
    [
        # (ref) llama.cpp in Ollama v0.6.0+ (llama-model-loader.cpp print_info) and llama-server (E5).
        ("print_info: file size   = 4.58 GiB (4.89 BPW) ", "weights", int(4.58 * GiB), None),
        ("print_info: file size   = 638.73 MiB (5.07 BPW) ", "weights", int(638.73 * MiB), None),
        # (ref) llama-kv-cache-unified.cpp (v0.12.x) and llama-kv-cache.cpp (v0.20.x).
        (
            "llama_kv_cache_unified: size =  256.00 MiB (  2048 cells,  32 layers,  1/1 seqs), K (f16):  128.00 MiB, "
            "V (f16):  128.00 MiB",
            "kv",
            256 * MiB,
            None,
        ),
        (
            "llama_kv_cache: size = 1024.00 MiB (  8192 cells,  32 layers,  1/1 seqs), K (q8_0):  512.00 MiB, "
            "V (q8_0):  512.00 MiB",
            "kv",
            1024 * MiB,
            None,
        ),
        # (ref) v0.9.x llama-kv-cache.cpp (its constructor's name), and llama-memory-recurrent.cpp (v0.12+).
        (
            "llama_kv_cache_unified: KV self size  =  448.00 MiB, K (f16):  224.00 MiB, V (f16):  224.00 MiB",
            "kv",
            448 * MiB,
            None,
        ),
        (
            "llama_memory_recurrent: size =   37.00 MiB (     1 cells,  64 layers,  1 seqs), R (f32):    1.00 MiB, "
            "S (f32):   36.00 MiB",
            "kv",
            37 * MiB,
            None,
        ),
        # (ref) 2023 llama.cpp: `kv self size = %7.2f MB` of memory_size / 1024.0 / 1024.0, a MiB.
        ("llama_new_context_with_model: kv self size  =  256.00 MB", "kv", 256 * MiB, None),
        # (ref) llama-context.cpp (v0.9+) compute buffers, one per backend.
        ("llama_context:      CUDA0 compute buffer size =   300.01 MiB", "graph", int(300.01 * MiB), "CUDA0"),
        ("llama_context:  CUDA_Host compute buffer size =    12.01 MiB", "graph", int(12.01 * MiB), "CUDA_Host"),
    ],
)
def test_newer_llamacpp_lines(line: str, part: str, size: int, device: str | None) -> None:
    found = memory(parse_lines([line]))
    assert [(e.line, e.part, e.size_bytes, e.device, e.planned) for e in found] == [(1, part, size, device, False)]


@pytest.mark.parametrize(
    "line",
    [
        # (ref) per-device buffers (llama-model.cpp, llama-kv-cache*.cpp): the summaries above state the same memory.
        "load_tensors:        CUDA0 model buffer size =  4403.49 MiB",
        "load_tensors:   CPU_Mapped model buffer size =   281.81 MiB",
        "llama_kv_cache_unified:      CUDA0 KV buffer size =   256.00 MiB",
        "llama_kv_cache_iswa: creating non-SWA KV cache, size = 4096 cells",
        "llama_context:  CUDA_Host  output buffer size =     0.58 MiB",
        # (ref) clip.cpp's projector (left out: it would replace the model's own figures, see parsers.ollama.memory).
        "clip_model_load: model size:     595.49 MB",
        "alloc_compute_meta:      CUDA0 compute buffer size =   198.93 MiB",
        # (ref) llama-quant.cpp, not a load.
        "llama_model_quantize_impl: model size  =  6939.10 MB",
        # real (003): a cache of the vocabulary, not memory of a load.
        "load: token to piece cache size = 1.9458 MB",
    ],
)
def test_lines_that_are_not_load_memory(line: str) -> None:
    events = parse_lines([line])
    assert memory(events) == []
    assert not any(isinstance(e, ev.Unparsed) for e in events)
