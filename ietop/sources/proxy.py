"""`ietop proxy`: run the measuring pass-through proxy (``proxy_app``) under uvicorn.

Security defaults from DESIGN.md: nothing listens beyond this host unless asked — ``run_proxy`` refuses a
non-loopback listen address without ``allow_remote=True`` — and the proxy adds no headers of its own
(uvicorn's ``Server``/``Date`` are turned off, so the engine's own pass through unchanged).

Each measured request can be appended to a JSONL file, one ``ProxyRequest`` per line (``ts`` as ISO-8601
UTC), which is what the pipeline reads back; ``BackgroundServer`` runs any ASGI app on a free loopback
port in a thread, for tests, the benchmark and embedding the proxy in the live dashboard.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import uvicorn

from ietop.sources.proxy_app import ASGIApp, ProxyApp, make_app
from parsers.api.proxy_log import from_json, to_json
from parsers.events import ProxyRequest

__all__ = [
    "DEFAULT_LISTEN",
    "DEFAULT_UPSTREAM",
    "BackgroundServer",
    "JsonlSink",
    "ProxyApp",
    "make_app",
    "parse_listen",
    "proxy_request_from_json",
    "proxy_request_to_json",
    "run_proxy",
]

DEFAULT_LISTEN = "127.0.0.1:11435"
DEFAULT_UPSTREAM = "http://127.0.0.1:11434"


def parse_listen(listen: str, *, allow_remote: bool = False) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6, ``:PORT`` or ``PORT`` for 127.0.0.1) to (host, port).

    Raises:
        ValueError: one line, for a malformed address, or a non-loopback one without ``allow_remote``.
    """
    text = listen.strip()
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "", text
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"listen address must be HOST:PORT, not {listen!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"listen port out of range: {port}")
    if not allow_remote and not _is_loopback(host):
        raise ValueError(f"refusing to listen on {host}: not a loopback address (pass allow_remote to expose it)")
    return host, port


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


_FIELDS = tuple(f.name for f in dataclasses.fields(ProxyRequest))


def _bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket for host:port (raises OSError: address in use, not available, ...).

    Bound here rather than by uvicorn so that a failure is an OSError for the caller, not uvicorn's
    ``sys.exit(1)``. ``proto`` must say TCP: asyncio disables Nagle only on accepted sockets whose proto is
    IPPROTO_TCP, and with Nagle on, a small chunk right after the headers can wait ~40 ms for a delayed ACK.
    """
    family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                      proto=socket.IPPROTO_TCP, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


# One format, read and written by parsers.api.proxy_log (analyze reads the same files back).
proxy_request_to_json = to_json
proxy_request_from_json = from_json


class JsonlSink:
    """Appends each ProxyRequest to a file as one line, flushed per line (a reader can tail it)."""

    def __init__(self, path: str | Path) -> None:
        """Open ``path`` for appending (created if missing)."""
        self._file: IO[str] = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 (closed by close)

    def __call__(self, event: ProxyRequest) -> None:
        """Write one record."""
        self._file.write(proxy_request_to_json(event) + "\n")

    def close(self) -> None:
        """Close the file."""
        self._file.close()


def _uvicorn_config(app: ASGIApp, host: str, port: int, log_level: str, **extra: Any) -> uvicorn.Config:
    # http and loop stay "auto": uvicorn then parses requests with httptools and, in ``run_proxy``, runs on
    # uvloop, both dependencies of ietop (see pyproject.toml), and falls back to h11 and asyncio without them.
    # ``BackgroundServer`` runs on a plain asyncio loop: it shares a process with the dashboard or the tests.
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="on",
        ws="none",
        log_config=None,
        log_level=log_level,
        access_log=False,
        server_header=False,
        date_header=False,
        # X-Forwarded-* are the client's headers, forwarded as they are: uvicorn's middleware for them would
        # only rewrite the scope's client address, which nothing here reads, at a cost on every request.
        proxy_headers=False,
        **extra,
    )


def run_proxy(
    listen: str = DEFAULT_LISTEN,
    upstream: str = DEFAULT_UPSTREAM,
    jsonl_path: str | None = None,
    on_request: Callable[[ProxyRequest], None] | None = None,
    *,
    allow_remote: bool = False,
    timeout: float = 600.0,
    log_level: str = "warning",
) -> None:
    """Serve the proxy until interrupted: Ctrl-C returns after a graceful shutdown; SIGTERM shuts down
    gracefully, then ends the process as uvicorn does (records are flushed line by line, none is lost).

    Args:
        listen: ``HOST:PORT`` to bind; loopback only unless ``allow_remote``.
        upstream: the engine's base URL.
        jsonl_path: append each measured request to this file as one JSON line.
        on_request: also call this with each measured request (on the event loop: keep it quick).
        allow_remote: allow a non-loopback listen address.
        timeout: upstream connect/answer/next-chunk timeout in seconds.
        log_level: uvicorn's log level.

    Raises:
        ValueError: a bad listen address or upstream URL (one line: a usage error).
        OSError: the address cannot be bound.
    """
    host, port = parse_listen(listen, allow_remote=allow_remote)
    sink = JsonlSink(jsonl_path) if jsonl_path else None

    def emit(event: ProxyRequest) -> None:
        if sink is not None:
            sink(event)
        if on_request is not None:
            on_request(event)

    try:
        app = make_app(upstream, emit, timeout=timeout)
        server = uvicorn.Server(_uvicorn_config(app, host, port, log_level))
        sock = _bind(host, port)
        with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises Ctrl-C after its graceful shutdown
            server.run(sockets=[sock])
    finally:
        if sink is not None:
            sink.close()


class BackgroundServer:
    """Runs an ASGI app under uvicorn in a daemon thread with its own event loop.

    Binds before starting, so ``port=0`` picks a free port and ``url`` is known once ``start`` returns.
    Usable as a context manager from sync or async code (starting and stopping block for a moment).
    """

    def __init__(self, app: ASGIApp, host: str = "127.0.0.1", port: int = 0, *, log_level: str = "warning",
                 graceful_s: float = 1.0) -> None:
        """Prepare (not start) a server for ``app`` on ``host:port``."""
        self.app = app
        self._host = host
        self._port = port
        self._config = _uvicorn_config(app, host, port, log_level, timeout_graceful_shutdown=max(graceful_s, 0.01))
        self._server = uvicorn.Server(self._config)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.url = ""

    def start(self, timeout: float = 10.0) -> str:
        """Start serving; returns the base URL (``http://host:port``)."""
        sock = _bind(self._host, self._port)
        address, port = sock.getsockname()[:2]
        host = f"[{address}]" if sock.family == socket.AF_INET6 else address
        self.url = f"http://{host}:{port}"

        def serve() -> None:
            try:
                asyncio.run(self._server.serve(sockets=[sock]))
            except BaseException as exc:  # reported by start()/stop(), not lost in the thread
                self._error = exc
            finally:
                sock.close()

        self._thread = threading.Thread(target=serve, name=f"uvicorn:{port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"server on {self.url} did not start: {self._error!r}")
            time.sleep(0.002)
        return self.url

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and wait for the thread (open streams are cut after the graceful period)."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> BackgroundServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
