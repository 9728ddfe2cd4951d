"""What the live dashboard watches: the flags, or what it finds on this host by itself (DESIGN.md).

Engines are polled at their default addresses (Ollama `$OLLAMA_HOST` or 127.0.0.1:11434, vLLM :8000, MLX
:8080); those guesses stay hidden until they answer. Ollama's log is found where each OS keeps it.
No Textual here: the CLI builds a `Plan`, the app runs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ENGINES = ("ollama", "vllm", "mlx")
DEFAULTS = {"vllm": "http://127.0.0.1:8000", "mlx": "http://127.0.0.1:8080"}


@dataclass
class Plan:
    endpoints: list[tuple[str, str]] = field(default_factory=list)
    discovered: set[str] = field(default_factory=set)
    logs: list[tuple[str, str]] = field(default_factory=list)
    """(engine, path); path "-" is stdin."""
    journals: list[tuple[str, str]] = field(default_factory=list)
    """(engine, systemd unit)."""
    dockers: list[tuple[str, str]] = field(default_factory=list)
    """(engine, container)."""
    notes: list[str] = field(default_factory=list)
    proxy: str | None = None
    """`--proxy [HOST:]PORT`: listen address of an in-dashboard proxy."""
    proxy_upstream: str | None = None


def ollama_url(env: dict[str, str] | None = None) -> str:
    """`$OLLAMA_HOST` as Ollama itself reads it: host, host:port or a URL; 0.0.0.0 means this host."""
    value = (env if env is not None else os.environ).get("OLLAMA_HOST", "").strip()
    if not value:
        return "http://127.0.0.1:11434"
    scheme = "http"
    if "://" in value:
        scheme, value = value.split("://", 1)
    value = value.rstrip("/")
    host, _, port = value.rpartition(":") if value.count(":") == 1 or value.startswith("[") else (value, "", "")
    if not host:
        host, port = value, ""
    if host in ("0.0.0.0", "", "[::]"):
        host = "127.0.0.1"
    return f"{scheme}://{host}:{port or '11434'}"


def parse_log_arg(text: str) -> tuple[str | None, str]:
    """`--log [ENGINE:]PATH` → (engine or None to detect, path). A Windows drive letter is not an engine."""
    engine, sep, path = text.partition(":")
    if sep and engine in ENGINES:
        return engine, path
    return None, text


def ollama_log(platform: str = sys.platform, home: Path | None = None,
               env: dict[str, str] | None = None) -> tuple[str, str] | None:
    """("file", path) or ("journal", unit) for Ollama's log on this host, or None."""
    env = env if env is not None else dict(os.environ)
    home = home or Path.home()
    if platform == "darwin":
        path = home / ".ollama" / "logs" / "server.log"
        return ("file", str(path)) if path.exists() else None
    if platform.startswith("win"):
        base = env.get("LOCALAPPDATA")
        win = Path(base) / "Ollama" / "server.log" if base else None
        return ("file", str(win)) if win is not None and win.exists() else None
    if shutil.which("systemctl") and shutil.which("journalctl") and _unit_exists("ollama"):
        return ("journal", "ollama")
    return None


def _unit_exists(unit: str) -> bool:
    try:
        out = subprocess.run(["systemctl", "list-unit-files", f"{unit}.service", "--no-legend", "--no-pager"],
                             capture_output=True, text=True, timeout=2, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return unit in out.stdout


def plan(ollama: list[str], vllm: list[str], mlx: list[str], logs: list[str], journals: list[str],
         dockers: list[str], engine: str | None = None, proxy: str | None = None,
         proxy_upstream: str | None = None) -> Plan:
    """The flags as a plan; with none given, what discovery finds."""
    p = Plan()
    p.proxy = proxy if proxy is None or ":" in proxy else f"127.0.0.1:{proxy}"
    for eng, urls in (("ollama", ollama), ("vllm", vllm), ("mlx", mlx)):
        p.endpoints += [(eng, u if "://" in u else f"http://{u}") for u in urls]
    for text in logs:
        named, path = parse_log_arg(text)
        p.logs.append((named or engine or "", path))
    p.journals = [(engine or "ollama", unit) for unit in journals]
    p.dockers = [(engine or "ollama", c) for c in dockers]
    if p.endpoints or p.logs or p.journals or p.dockers:
        p.proxy_upstream = proxy_upstream or (p.endpoints[0][1] if p.endpoints else None)
        return p
    for eng, url in (("ollama", ollama_url()), ("vllm", DEFAULTS["vllm"]), ("mlx", DEFAULTS["mlx"])):
        p.endpoints.append((eng, url))
        p.discovered.add(url)
    p.proxy_upstream = proxy_upstream or p.endpoints[0][1]
    found = ollama_log()
    if found is not None and found[0] == "file":
        p.logs.append(("ollama", found[1]))
    elif found is not None:
        p.journals.append(("ollama", found[1]))
    return p
