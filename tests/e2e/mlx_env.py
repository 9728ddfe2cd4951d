"""A cached, separate virtual environment with a real `mlx_lm` (CPU build) and two tiny offline models.

Everything lives outside the repository, under ``$IETOP_E2E_CACHE`` or ``~/.cache/ietop-e2e/``:

* ``mlx-venv-<key>/``: ``python -m venv`` + ``pip install`` of the pinned packages below. The key hashes the
  requirement list, the Python version and the platform, so a change of any of them builds a new venv.
  ``.ietop-complete.json`` inside it is written last: a venv without it is a broken build and is rebuilt.
* ``models-<key>/``: two random-weight llama models built by ``make_tiny_mlx_model.py`` (run with the venv's
  python) and a fake Hugging Face hub cache that holds the second one under a repo id. The key hashes the
  builder script, the model specs and the venv key; the same marker-file rule applies.

After a fresh build, sibling entries with other keys (old pins, old builder versions) are deleted, unless
another process holds their lock. Both builds run under an exclusive ``flock`` on a ``.lock`` file beside the target, so parallel pytest
workers (xdist) wait for one builder instead of racing. Nothing here imports pytest: failures raise
:class:`MlxEnvError` with a ``kind`` the caller maps to skip or fail.
"""

from __future__ import annotations

import hashlib
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

MLX_VERSION = "0.32.4"
MLX_LM_VERSION = "0.32.2"
# mlx-lm pulls these in anyway; pinning them keeps the server (and its log format) the one we verified.
TRANSFORMERS_VERSION = "5.24.0"
TOKENIZERS_VERSION = "0.23.3"
HF_HUB_VERSION = "2.4.0"

BUILDER = Path(__file__).with_name("make_tiny_mlx_model.py")
TOKENIZER = Path(tokenizer_module.__file__)  # imported by BUILDER: part of the models key
# (name, hidden size, layers): two sizes so a request can switch models.
MODEL_SPECS: tuple[tuple[str, int, int], ...] = (("tiny-a", 64, 2), ("tiny-b", 96, 2))
VOCAB_SIZE = 2000
HF_REPO_ID = "ietop-e2e/tiny-llama-b"  # the second model, also reachable by this repo id via the fake HF cache

PIP_TIMEOUT_S = 30
PIP_RETRIES = 2


class MlxEnvError(BuildError):
    """The mlx venv or the models could not be built.

    ``kind`` is ``"network"`` (the package index was unreachable), ``"unavailable"`` (no wheel for this
    platform / Python, e.g. glibc < 2.35) or ``"other"`` (anything else: treat as a real failure).
    """


@dataclass(frozen=True)
class MlxEnv:
    """A complete mlx venv."""

    root: Path  # the venv directory
    python: Path  # its interpreter
    server: Path  # its ``mlx_lm.server`` console script
    versions: dict[str, str]  # distribution name -> installed version
    build_seconds: float  # how long the (cold) build took when it was made
    built_now: bool  # True if this call built it, False if it came from the cache
    key: str


@dataclass(frozen=True)
class MlxModels:
    """The two tiny models and a Hugging Face hub cache that holds the second one as ``hf_repo_id``."""

    root: Path
    default: Path  # tiny-a: hidden 64; start the server with this one
    second: Path  # tiny-b: hidden 96; name it in a request to switch models
    hf_hub_cache: Path  # pass as MlxServer(hf_hub_cache=...) so /v1/models lists hf_repo_id
    hf_repo_id: str
    build_seconds: float
    built_now: bool
    info: dict[str, object] = field(default_factory=dict)  # the builder's summary (vocab, params, ...)


def requirements() -> list[str]:
    """The pinned requirement strings (``mlx[cpu]`` on Linux: the CPU-only wheel; plain ``mlx`` on macOS)."""
    mlx = f"mlx[cpu]=={MLX_VERSION}" if sys.platform.startswith("linux") else f"mlx=={MLX_VERSION}"
    return [
        mlx,
        f"mlx-lm=={MLX_LM_VERSION}",
        f"transformers=={TRANSFORMERS_VERSION}",
        f"tokenizers=={TOKENIZERS_VERSION}",
        f"huggingface-hub=={HF_HUB_VERSION}",
    ]


def venv_key() -> str:
    return hash_key(requirements(), platform.python_version(), sys.platform, platform.machine(), platform.libc_ver())


def _venv_bin(venv: Path, name: str) -> Path:
    return venv / "bin" / name


def _env_from(venv: Path, marker: dict[str, object], built_now: bool, key: str) -> MlxEnv:
    versions = marker.get("versions", {})
    seconds = marker.get("build_seconds", 0.0)
    return MlxEnv(
        root=venv,
        python=_venv_bin(venv, "python"),
        server=_venv_bin(venv, "mlx_lm.server"),
        versions={str(k): str(v) for k, v in versions.items()} if isinstance(versions, dict) else {},
        build_seconds=float(seconds) if isinstance(seconds, (int, float)) else 0.0,
        built_now=built_now,
        key=key,
    )


def _usable(venv: Path, marker: dict[str, object] | None) -> bool:
    return marker is not None and _venv_bin(venv, "python").exists() and _venv_bin(venv, "mlx_lm.server").exists()


_PROBE = (
    "import json, importlib.metadata as m, mlx.core, mlx_lm, tokenizers, transformers\n"
    "names = ['mlx', 'mlx-cpu', 'mlx-metal', 'mlx-lm', 'transformers', 'tokenizers', 'huggingface-hub', 'numpy']\n"
    "out = {}\n"
    "for n in names:\n"
    "    try:\n"
    "        out[n] = m.version(n)\n"
    "    except m.PackageNotFoundError:\n"
    "        pass\n"
    "print(json.dumps(out))\n"
)


def ensure_mlx_env() -> MlxEnv:
    """Return the cached mlx venv, building it first (under a lock) if it is missing or incomplete."""
    if not (sys.platform.startswith("linux") or sys.platform == "darwin"):
        raise MlxEnvError(f"mlx has no wheels for {sys.platform}", "unavailable")
    key = venv_key()
    root = cache_root()
    venv = root / f"mlx-venv-{key}"
    marker, built_now = ensure_cached(venv, lambda: _build_venv(venv, root / f"mlx-venv-{key}.install.log"),
                                      usable=lambda m: _usable(venv, m), prune="mlx-venv-*", prune_field="python")
    return _env_from(venv, marker, built_now=built_now, key=key)


def _build_venv(venv: Path, log_path: Path) -> dict[str, object]:
    t0 = time.monotonic()
    if venv.exists():
        shutil.rmtree(venv)
    log_lines: list[str] = []

    def run(cmd: list[str], what: str, timeout: float) -> str:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            log_path.write_text("\n".join([*log_lines, f"$ {' '.join(cmd)}", f"timed out after {timeout} s"]))
            raise MlxEnvError(f"{what} timed out after {timeout} s (log: {log_path})", "network", log_path) from exc
        out = proc.stdout + proc.stderr
        log_lines.extend([f"$ {' '.join(cmd)}", out])
        log_path.write_text("\n".join(log_lines))
        if proc.returncode != 0:
            kind = classify_pip_failure(out) if "pip" in cmd else "other"
            raise MlxEnvError(f"{what} failed (exit {proc.returncode}, kind {kind}, log: {log_path}):\n{tail(out)}",
                              kind, log_path)
        return proc.stdout

    # sys.executable may itself be a venv's python: `-m venv` bases the new venv on the base interpreter.
    run([sys.executable, "-m", "venv", str(venv)], "python -m venv", timeout=300)
    pip = [str(_venv_bin(venv, "python")), "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
           "--timeout", str(PIP_TIMEOUT_S), "--retries", str(PIP_RETRIES), *requirements()]
    run(pip, "pip install " + " ".join(requirements()), timeout=1200)
    probe = run([str(_venv_bin(venv, "python")), "-c", _PROBE], "import check of mlx / mlx_lm", timeout=300)
    versions = json.loads(probe.strip().splitlines()[-1])
    if not _venv_bin(venv, "mlx_lm.server").exists():
        raise MlxEnvError("mlx_lm.server console script missing after install", "other", log_path)
    marker: dict[str, object] = {
        "versions": versions,
        "requirements": requirements(),
        "python": platform.python_version(),
        "build_seconds": round(time.monotonic() - t0, 2),
        "built_at": time.time(),
    }
    write_marker(venv, marker)
    return marker


def models_key(env: MlxEnv) -> str:
    return hash_key(file_digest(BUILDER, TOKENIZER), MODEL_SPECS, VOCAB_SIZE, HF_REPO_ID, env.key)


def ensure_models(env: MlxEnv) -> MlxModels:
    """Return the two cached tiny models (and the fake HF cache), building them first if needed."""
    key = models_key(env)
    root = cache_root() / f"models-{key}"
    marker, built_now = ensure_cached(root, lambda: _build_models(env, root), prune="models-*", prune_field="venv_key")
    info = marker.get("info", {})
    seconds = marker.get("build_seconds", 0.0)
    return MlxModels(
        root=root,
        default=root / MODEL_SPECS[0][0],
        second=root / MODEL_SPECS[1][0],
        hf_hub_cache=root / "hf-hub",
        hf_repo_id=HF_REPO_ID,
        build_seconds=float(seconds) if isinstance(seconds, (int, float)) else 0.0,
        built_now=built_now,
        info=info if isinstance(info, dict) else {},
    )


def _build_models(env: MlxEnv, root: Path) -> dict[str, object]:
    t0 = time.monotonic()
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    cmd = [str(env.python), str(BUILDER), "--out-root", str(root), "--vocab", str(VOCAB_SIZE)]
    for name, hidden, layers in MODEL_SPECS:
        cmd += ["--model", f"{name}:{hidden}:{layers}"]
    clean_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    clean_env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HOME=str(root / ".hf-home"))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False, env=clean_env,
                          stdin=subprocess.DEVNULL)
    (root / "build.log").write_text(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
    if proc.returncode != 0:
        raise MlxEnvError(f"model builder failed (exit {proc.returncode}):\n{tail(proc.stdout + proc.stderr)}",
                          "other", root / "build.log")
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    make_fake_hf_cache(root / MODEL_SPECS[1][0], root / "hf-hub", HF_REPO_ID)
    marker: dict[str, object] = {"info": info, "build_seconds": round(time.monotonic() - t0, 2),
                                 "built_at": time.time(), "venv_key": env.key}
    write_marker(root, marker)
    return marker


def make_fake_hf_cache(model_dir: Path, hub_cache: Path, repo_id: str) -> Path:
    """Lay ``model_dir`` out as a Hugging Face hub cache entry for ``repo_id`` and return its snapshot dir.

    Layout: ``models--ORG--NAME/{blobs/<sha256>, refs/main, snapshots/<commit>/<file> -> ../../blobs/<sha256>}``.
    With ``HF_HUB_OFFLINE=1`` mlx_lm then loads ``repo_id`` without a download, and ``/v1/models`` lists it
    (it only lists repos whose snapshot has config.json, tokenizer_config.json and
    model.safetensors.index.json, so an index is added).
    """
    repo_dir = hub_cache / ("models--" + repo_id.replace("/", "--"))
    commit = hashlib.sha1(repo_id.encode()).hexdigest()
    blobs, snapshot = repo_dir / "blobs", repo_dir / "snapshots" / commit
    for d in (blobs, snapshot, repo_dir / "refs"):
        d.mkdir(parents=True, exist_ok=True)
    (repo_dir / "refs" / "main").write_text(commit)
    files: dict[str, bytes] = {p.name: p.read_bytes() for p in sorted(model_dir.iterdir()) if p.is_file()}
    weights = files.get("model.safetensors", b"")
    files["model.safetensors.index.json"] = json.dumps(
        {"metadata": {"total_size": len(weights)}, "weight_map": {}}).encode()
    for name, data in files.items():
        sha = hashlib.sha256(data).hexdigest()
        (blobs / sha).write_bytes(data)
        link = snapshot / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(Path("..") / ".." / "blobs" / sha)
    return snapshot
