"""Running `ietop export` as users do (a child process) and reading what it serves."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]
START_LIMIT_S = 60.0
"""How long the exporter may take to serve its first scrape on a busy two-core machine (a cap, not a figure)."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class Running:
    def __init__(self, proc: subprocess.Popen[bytes], url: str) -> None:
        self.proc = proc
        self.url = url

    def scrape(self, accept: str | None = None) -> str:
        req = urllib.request.Request(self.url, headers={"Accept": accept} if accept else {})
        with urllib.request.urlopen(req, timeout=10) as answer:
            return str(answer.read().decode("utf-8"))

    def samples(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        """Sample name → (labels, value) of every sample of the text exposition."""
        out: dict[str, list[tuple[dict[str, str], float]]] = {}
        for family in text_string_to_metric_families(self.scrape()):
            for s in family.samples:
                out.setdefault(s.name, []).append((dict(s.labels), s.value))
        return out

    def total(self, name: str) -> float:
        return sum(v for _labels, v in self.samples().get(name, []))

    def wait_for(self, name: str, value: float, limit_s: float = START_LIMIT_S) -> None:
        """Until the sum of `name` is `value` (the read-back is applied in batches on a busy machine)."""
        deadline = time.monotonic() + limit_s
        got = None
        while time.monotonic() < deadline:
            got = self.total(name)
            if got == value:
                return
            time.sleep(0.2)
        raise AssertionError(f"{name} is {got}, not {value}, after {limit_s} s")


@contextmanager
def exporter(*args: str, host: str = "127.0.0.1") -> Iterator[Running]:
    """`ietop export ARGS --listen HOST:free` until the block ends, then SIGTERM (its exit status is checked)."""
    port = free_port(host)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ietop", "export", *args, "--listen", f"{host}:{port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://{host}:{port}/metrics"
    running = Running(proc, url)
    try:
        deadline = time.monotonic() + START_LIMIT_S
        while True:
            try:
                running.scrape()
                break
            except OSError:
                if proc.poll() is not None:
                    said = proc.stderr.read() if proc.stderr is not None else b""
                    raise AssertionError(f"ietop export exited {proc.returncode}: {said!r}") from None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield running
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        running.returncode = proc.returncode  # type: ignore[attr-defined]
        if proc.stderr is not None:
            running.stderr = proc.stderr.read().decode("utf-8", "replace")  # type: ignore[attr-defined]
            proc.stderr.close()


def analyze_sums(paths: Sequence[str | Path], since: str | None = None) -> dict[str, float]:
    """What `ietop analyze --json` says of the same log: the four totals the exporter's counters must equal."""
    cmd = [sys.executable, "-m", "ietop", "analyze", "--json", *map(str, paths)]
    if since:
        cmd += ["--since", since]
    doc = json.loads(subprocess.run(cmd, cwd=ROOT, capture_output=True, check=True, text=True).stdout)
    return {
        "ietop_model_loads_total": float(len(doc["loads"])),
        "ietop_evictions_total": float(sum(u["reason"] in ("evicted", "switched") for u in doc["unloads"])),
        "ietop_prompt_truncations_total": float(len(doc["truncations"])),
        "ietop_requests_total": float(doc["counts"].get("inference_requests", 0)),
    }
