"""Fixtures shared across the test packages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def synthetic_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SYNTHETIC 2 MB Ollama log (bench/gen_ollama_log.py, seed 3): every era, envelope and probe kind."""
    log = tmp_path_factory.mktemp("synthetic") / "synthetic.log"
    subprocess.run([sys.executable, str(ROOT / "bench" / "gen_ollama_log.py"), str(log), "--size", "2M",
                    "--seed", "3"], check=True, capture_output=True)
    return log


@pytest.fixture(autouse=True)
def no_user_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite never reads the config file of whoever runs it (`[analyze] json = true` in someone's
    ~/.config would change every report): an empty config home for each test, children included."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config-home")))
