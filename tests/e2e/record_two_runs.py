#!/usr/bin/env python3
"""Record a REAL mlx_lm.server log with two server starts in one file (fixtures/mlx/real-two-runs-server.log):
`ietop compare --by-run` needs one, and none of the public samples has one.

Run 1: `--max-tokens 48`; run 2, after a SIGTERM, appended to the same file: `--max-tokens 12`, as an operator
tuning the default output length would. Each run serves three non-stream chats to its default model (tiny-a,
the end-to-end tests' cached random-weight model) without `max_tokens` in the request, so the server's default
decides how many tokens come out. DEBUG logs, HF_HUB_OFFLINE=1, loopback only.

    .venv/bin/python tests/e2e/record_two_runs.py OUT.log      # needs the e2e cache (tests/e2e builds it)
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parents[1]))

from mlx_env import ensure_mlx_env, ensure_models

PROMPTS = ("Name three colours.", "Count to five.", "Say hello in French.")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(port: int, proc: subprocess.Popen[bytes], limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit("the server did not answer /health")


def chat(port: int, prompt: str) -> dict[str, object]:
    body = json.dumps({"messages": [{"role": "user", "content": prompt}]}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        return dict(json.load(resp))


def run(env_python: str, model: str, max_tokens: int, log: Path, hf_cache: str) -> list[dict[str, object]]:
    port = free_port()
    argv = [env_python, "-m", "mlx_lm", "server", "--model", model, "--host", "127.0.0.1", "--port", str(port),
            "--log-level", "DEBUG", "--max-tokens", str(max_tokens)]
    environ = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": hf_cache}
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=environ)
        try:
            wait_up(port, proc)
            answers = [chat(port, p) for p in PROMPTS]
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    return answers


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else Path("real-two-runs-server.log")
    out.unlink(missing_ok=True)
    env = ensure_mlx_env()
    models = ensure_models(env)
    for max_tokens in (48, 12):
        answers = run(str(env.python), str(models.default), max_tokens, out, str(models.hf_hub_cache))
        usage = [a.get("usage") for a in answers]
        print(f"--max-tokens {max_tokens}: usage {json.dumps(usage)}")
        time.sleep(1.0)  # two runs a second apart at least: their clocks do not overlap
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
