"""ruff and mypy --strict are part of the test suite, so CI (which runs the suite) enforces them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def test_ruff_clean() -> None:
    result = subprocess.run([_tool("ruff"), "check", "--output-format", "concise", "."], cwd=ROOT,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_clean() -> None:
    result = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
