"""Load a script of bench/ as a module: bench/ is a folder of scripts, not a package, and its generators and
harnesses are what several tests run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_script(path: Path, name: str | None = None) -> ModuleType:
    """The script at `path` as module `name` (its stem by default), registered in sys.modules first: its
    dataclasses look their module up there while it runs."""
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def load_bench(name: str) -> ModuleType:
    """bench/NAME.py."""
    return load_script(BENCH / f"{name}.py", name)
