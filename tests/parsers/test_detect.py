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
