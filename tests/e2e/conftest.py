"""Fixtures for end-to-end tests against a real ``mlx_lm.server`` (CPU build, offline, tiny random models).

Fixtures (all session-scoped except ``mlx_server_factory``):

* ``mlx_env`` → :class:`mlx_env.MlxEnv`: the cached venv (``.python``, ``.server``, ``.versions``, ...).
  Built on first use (about a minute, from the package registry), then reused from
  ``$IETOP_E2E_CACHE`` / ``~/.cache/ietop-e2e``. If it cannot be built because the registry is unreachable
  or has no wheel for this platform, the tests skip, unless ``CI=true``: then they fail.
* ``mlx_models`` → :class:`mlx_env.MlxModels`: ``.default`` (tiny-a), ``.second`` (tiny-b),
  ``.hf_hub_cache`` + ``.hf_repo_id`` (tiny-b again, by repo id).
* ``e2e_timings`` → dict of phase → seconds that tests may add to; printed in the terminal summary.
* ``mlx_server_factory`` → ``start(model_dir=None, log_level="INFO", log_path=None, **kw) -> MlxServer``:
  started servers (default model: ``mlx_models.default``, default HF cache: ``mlx_models.hf_hub_cache``)
  are stopped at the end of the test.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

# The harness modules import the shared code as `e2e_support.*`: put tests/ on sys.path (pytest puts only this
# folder there). Appended, not prepended: tests/parsers etc. must not shadow the real packages.
sys.path.append(str(Path(__file__).resolve().parents[1]))

import pytest
from e2e_support.cache import BuildError
from e2e_support.report import timed_build, write_summary
from mlx_env import MlxEnv, MlxModels, ensure_mlx_env, ensure_models
from mlx_server import MlxServer

_TIMINGS: dict[str, float] = {}
_NOTES: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: end-to-end tests against a real engine (tests/e2e)")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    write_summary(terminalreporter, "ietop e2e (mlx) timings", _TIMINGS, _NOTES)


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _skip_or_fail(what: str, exc: BuildError) -> NoReturn:
    log = f" (log: {exc.log_path})" if exc.log_path else ""
    if _in_ci():
        pytest.fail(f"CI=true: {what} failed, kind={exc.kind}{log}: {exc}", pytrace=False)
    if exc.kind in ("network", "unavailable"):
        reason = ("the package registry is unreachable and there is no cached venv"
                  if exc.kind == "network" else "no mlx wheel for this platform/Python")
        pytest.skip(f"{what}: {reason} (kind={exc.kind}){log}. Last lines:\n{exc}")
    pytest.fail(f"{what} failed{log}: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def e2e_timings() -> dict[str, float]:
    return _TIMINGS


@pytest.fixture(scope="session")
def e2e_notes() -> list[str]:
    """Lines printed in the summary (the overlap scores: what was stated, how much was wrong)."""
    return _NOTES


@pytest.fixture(scope="session")
def mlx_env(e2e_timings: dict[str, float]) -> MlxEnv:
    env = timed_build(e2e_timings, "venv", ensure_mlx_env, lambda exc: _skip_or_fail("building the mlx venv", exc))
    _NOTES.append(f"mlx venv {env.root} ({'built now' if env.built_now else 'cached'}): "
                  + ", ".join(f"{k} {v}" for k, v in sorted(env.versions.items())))
    return env


@pytest.fixture(scope="session")
def mlx_models(mlx_env: MlxEnv, e2e_timings: dict[str, float]) -> MlxModels:
    models = timed_build(e2e_timings, "models", lambda: ensure_models(mlx_env),
                         lambda exc: _skip_or_fail("building the tiny mlx models", exc), cold="(when they were made)")
    _NOTES.append(f"tiny models {models.root} ({'built now' if models.built_now else 'cached'})")
    return models


@pytest.fixture
def mlx_server_factory(mlx_env: MlxEnv, mlx_models: MlxModels, tmp_path: Path) -> Iterator[Callable[..., MlxServer]]:
    servers: list[MlxServer] = []

    def start(model_dir: Path | str | None = None, log_level: str = "INFO", log_path: Path | str | None = None,
              **kwargs: Any) -> MlxServer:
        kwargs.setdefault("server", mlx_env.server)
        kwargs.setdefault("hf_hub_cache", mlx_models.hf_hub_cache)
        path = log_path if log_path is not None else tmp_path / f"mlx-server-{len(servers)}.log"
        server = MlxServer(model_dir if model_dir is not None else mlx_models.default, log_level, path, **kwargs)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()
