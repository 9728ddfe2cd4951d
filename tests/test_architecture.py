"""Architecture rules from ARCHITECTURE.md, checked rather than remembered.

- The import-linter contracts in pyproject.toml (parsers pure, no engine's parser importing another's, model
  pure, engine trackers apart, sources without model or presentation, the wiring headless, the dashboard
  importing no source) hold for the static import graph. Loops: tests/test_import_cycles.py.
- At run time, importing the headless core loads neither Textual nor Rich (a subprocess, so this
  process's imports cannot hide a leak), and `parsers` is ours, not another installed package's.
- `parsers` imports nothing outside the standard library.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), str(ROOT / "pyproject.toml")], cwd=ROOT,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 12 kept, 0 broken" in result.stdout


def test_headless_core_loads_no_textual_or_rich() -> None:
    code = (
        "import sys, json, parsers, parsers.ollama.log, parsers.vllm.log, parsers.mlx.log, parsers.detect, "
        "ietop.model.store, ietop.model.hints, ietop.pipeline.ingest, ietop.pipeline.feeds, ietop.pipeline.polling, "
        "ietop.pipeline.setup, ietop.pipeline.discover, ietop.analyze.report, ietop.analyze.spool, ietop.model.live, "
        "ietop.cli\n"
        "print(json.dumps([m for m in ('textual', 'rich', 'polars', 'httpx') if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_parsers_package_is_ours() -> None:
    import parsers

    assert Path(parsers.__file__).resolve().parent == ROOT / "parsers"


def test_parsers_import_only_the_standard_library() -> None:
    stdlib = set(sys.stdlib_module_names)
    paths = sorted((ROOT / "parsers").rglob("*.py"))
    assert len(paths) > 30  # every package of parsers/, not only its top level
    for path in paths:
        rel = path.relative_to(ROOT / "parsers").as_posix()
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                # The one deliberate exception: the Prometheus text format is parsed by the well-kept
                # library rather than by hand (pyproject's import-linter contract lists it too).
                allowed = top in stdlib or top == "parsers" or (rel, top) == ("vllm/prometheus.py", "prometheus_client")
                assert allowed, f"{rel} imports {name}"
