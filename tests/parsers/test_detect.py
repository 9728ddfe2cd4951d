"""Engine detection on every real fixture: each file is detected as the engine whose folder it is in,
including raw pastes without any envelope (tracebacks, stripped prefixes, llama.cpp output)."""

from __future__ import annotations

from pathlib import Path

import pytest

from parsers.detect import detect_engine
from parsers.text.envelope import strip_envelope

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FILES = sorted(
    p for engine in ("ollama", "vllm", "mlx") for p in (FIXTURES / engine).iterdir()
    if p.suffix in (".log", ".txt", ".stderr") and "metrics" not in p.name
)


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.name}" for p in FILES])
def test_fixture_is_detected_as_its_engine(path: Path) -> None:
    lines = [strip_envelope(line).text for line in path.read_text(errors="replace").split("\n")[:200]]
    assert detect_engine(lines) == path.parent.name


@pytest.mark.parametrize("text", [["hello world", "this is not a log"], [], ["", "   "], ["12345", "{}"]])
def test_non_logs_are_not_detected(text: list[str]) -> None:
    assert detect_engine(text) is None


# Raw pastes of an MLX failure carry no timestamp at all, only Python's traceback. Built from the two real
# pastes in fixtures/mlx (both stop before their exception line) and the exception line their threads quote
# (mlx-lm PR #1513; the shared reference mlx-formats.md §2): a user who copies from `Traceback` down to the
# error, or only the innermost frames, gives detection nothing but mlx_lm's own paths and MLX's allocator.
MLX_OOM = "RuntimeError: [metal::malloc] Resource limit (499000) exceeded."
THREAD_DISTRIBUTED = FIXTURES / "mlx" / "003-mlx-lm-831-generate-thread-exception-distributed.txt"
THREAD_MALLOC = FIXTURES / "mlx" / "004-mlx-lm-1513-generate-thread-metal-malloc.txt"


def _paste(path: Path) -> list[str]:
    return path.read_text().splitlines()


@pytest.mark.parametrize(
    "lines",
    [
        [*_paste(THREAD_MALLOC)[1:], MLX_OOM],  # from `Traceback` to the error line
        [*_paste(THREAD_DISTRIBUTED)[1:], MLX_OOM],
        _paste(THREAD_DISTRIBUTED)[2:],  # the frames alone (read as Ollama before)
        _paste(THREAD_MALLOC)[2:],
        [MLX_OOM],
    ],
    ids=["004-from-traceback", "003-from-traceback", "003-frames", "004-frames", "exception-line"],
)
def test_a_raw_mlx_traceback_paste_is_mlx(lines: list[str]) -> None:
    assert detect_engine(lines) == "mlx"


def test_mlx_paths_do_not_outvote_another_engines_envelope() -> None:
    # A vLLM line decides even after a traceback naming mlx_lm: the markers only speak when no line has an envelope.
    vllm = "INFO 11-29 15:51:00 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s"
    assert detect_engine([*_paste(THREAD_MALLOC)[2:], vllm]) == "vllm"
