"""`ietop proxy`: run the measuring pass-through proxy (``proxy_app``) under uvicorn.

Security defaults from DESIGN.md: nothing listens beyond this host unless asked — ``run_proxy`` refuses a
non-loopback listen address without ``allow_remote=True`` — and the proxy adds no headers of its own
(uvicorn's ``Server``/``Date`` are turned off, so the engine's own pass through unchanged).

Clients are held to ``proxy_guard``'s limits (a deadline for the request head, an idle time for the body, a
cap on connections waiting for a request), so that idle or trickling ones cannot take every descriptor.

Each measured request can be appended to a JSONL file, one ``ProxyRequest`` per line (``ts`` as ISO-8601
UTC), which is what the pipeline reads back; a line that cannot be written is counted, not fatal
(``JsonlSink``). ``BackgroundServer`` runs any ASGI app on a free loopback port in a thread, for tests, the
benchmark and embedding the proxy in the live dashboard.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import logging
import os
import resource
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import uvicorn

from ietop.sources.listen import parse_listen as parse_listen
from ietop.sources.proxy_app import ASGIApp, ProxyApp, make_app
from ietop.sources.proxy_guard import BODY_IDLE_S, HEAD_TIMEOUT_S, protocol_class
from parsers.api.proxy_log import from_json, to_json
from parsers.events import ProxyRequest

__all__ = [
    "DEFAULT_LISTEN",
    "DEFAULT_UPSTREAM",
    "BackgroundServer",
    "JsonlError",
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

log = logging.getLogger("ietop.proxy")


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


class JsonlError(ValueError):
    """The ``--jsonl`` file cannot be opened: a ValueError, like the other mistakes in what the proxy was
    asked to do (an OSError from ``run_proxy`` means the listen address could not be bound)."""


class _Writer(Protocol):
    def write(self, data: bytes | memoryview, /) -> int | None: ...

    def close(self) -> None: ...


class JsonlSink:
    """Appends each ProxyRequest to a file as one line, each line one write (a reader can tail it).

    A line that cannot be written (disk full, quota, I/O error) is lost, and counted in ``lost``; the next
    measurement tries again, so lines are written again once there is room. Why not hold the unwritten lines
    until then: a disk can stay full for hours, and the proxy must neither stop forwarding nor grow meanwhile;
    a count says exactly what is missing. What is lost is said on stderr (the ``ietop.proxy`` log): at the
    first failure, every ``REMIND_S`` while it lasts, when writing works again, and at ``close``. A line cut
    short by the failure is cut off the file.
    """

    REMIND_S = 60.0
    """While writes fail, how often the count of lost lines is logged again."""

    def __init__(self, path: str | Path, *, file: _Writer | None = None) -> None:
        """Open ``path`` for appending (created if missing), or write to ``file`` (tests: a failing one).

        Raises:
            OSError: the file cannot be opened.
        """
        self.path = str(path)
        self._file: _Writer = file if file is not None else open(path, "ab", buffering=0)  # noqa: SIM115
        self.lost = 0
        """Measurements that could not be written."""
        self._failing: str | None = None
        """Why the last write failed; None while writes work."""
        self._warned_at = 0.0
        self._torn = False
        """A line cut short by a failure is still in the file: the next line starts on a line of its own."""

    def __call__(self, event: ProxyRequest) -> None:
        """Write one record; a failure is counted and logged, never raised (see the class docstring)."""
        line = (proxy_request_to_json(event) + "\n").encode()
        try:
            self._write(b"\n" + line if self._torn else line)
        except OSError as exc:
            self._lost(exc)
            return
        self._torn = False
        if self._failing is not None:
            self._failing = None
            log.warning("ietop proxy: writing measurements to %s again; %d could not be written",
                        self.path, self.lost)

    def _write(self, line: bytes) -> None:
        view = memoryview(line)
        done = 0
        while done < len(line):
            try:
                n = self._file.write(view[done:])
            except OSError:
                if done:
                    self._untear(done)
                raise
            if not n:  # a file that takes nothing (no regular file does): as good as full
                raise OSError(errno.EIO, "the file took no bytes")
            done += n

    def _untear(self, written: int) -> None:
        fileno = getattr(self._file, "fileno", None)
        try:
            fd = fileno() if fileno is not None else -1
            os.ftruncate(fd, os.fstat(fd).st_size - written)
        except (OSError, ValueError):  # not a regular file, or a file of its own: end that line instead
            self._torn = True

    def _lost(self, exc: OSError) -> None:
        self.lost += 1
        why = exc.strerror or str(exc)
        now = time.monotonic()
        if self._failing is None:
            self._failing = why
            log.warning("ietop proxy: cannot write measurements to %s: %s; still forwarding, lost lines are "
                        "counted and each new measurement is tried again", self.path, why)
        elif now - self._warned_at < self.REMIND_S:
            return
        else:
            log.warning("ietop proxy: %d measurements not written to %s so far (%s)", self.lost, self.path, why)
        self._warned_at = now

    def close(self) -> None:
        """Close the file; say how many measurements were lost, if any."""
        if self.lost:
            log.warning("ietop proxy: %d measurements could not be written to %s", self.lost, self.path)
        self._file.close()


def _uvicorn_config(app: ASGIApp, host: str, port: int, log_level: str, *, head_timeout_s: float = HEAD_TIMEOUT_S,
                    body_idle_s: float = BODY_IDLE_S, max_waiting: int | None = None, **extra: Any) -> uvicorn.Config:
    # Requests are parsed with httptools, as uvicorn's "auto" would (a dependency of ietop, see pyproject.toml),
    # through proxy_guard's protocol: uvicorn alone lets idle and trickling clients hold descriptors without
    # bound. The loop stays "auto": uvloop in ``run_proxy``; ``BackgroundServer`` runs on a plain asyncio loop,
    # as it shares a process with the dashboard or the tests.
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol_class(head_timeout_s, body_idle_s, max_waiting),
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
    head_timeout_s: float = HEAD_TIMEOUT_S,
    body_idle_s: float = BODY_IDLE_S,
    max_waiting: int | None = None,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Serve the proxy until interrupted: Ctrl-C returns after a graceful shutdown; SIGTERM shuts down
    gracefully, then ends the process as uvicorn does (records are written line by line as they come).

    Args:
        listen: ``HOST:PORT`` to bind; loopback only unless ``allow_remote``.
        upstream: the engine's base URL.
        jsonl_path: append each measured request to this file as one JSON line (``JsonlSink``: a line that
            cannot be written is counted and reported, and the proxy goes on).
        on_request: also call this with each measured request (on the event loop: keep it quick).
        allow_remote: allow a non-loopback listen address.
        timeout: upstream connect/answer/next-chunk timeout in seconds.
        log_level: uvicorn's log level.
        head_timeout_s, body_idle_s, max_waiting: what clients may hold without a request in progress
            (``proxy_guard``; ``max_waiting`` None: by the descriptor limit).
        on_ready: called once the JSONL file is open, the upstream URL checked and the address bound, just
            before serving: where a "listening on" line is true.

    Raises:
        ValueError: a bad listen address or upstream URL (one line: a usage error), or ``JsonlError``: the
            JSONL file cannot be opened (one line, with the reason).
        OSError: the address cannot be bound.
    """
    host, port = parse_listen(listen, allow_remote=allow_remote)
    try:
        sink = JsonlSink(jsonl_path) if jsonl_path else None
    except OSError as exc:
        raise JsonlError(f"cannot open the JSONL file {jsonl_path}: {exc.strerror or exc}") from None

    def emit(event: ProxyRequest) -> None:
        if sink is not None:
            sink(event)
        if on_request is not None:
            on_request(event)

    try:
        app = make_app(upstream, emit, timeout=timeout)
        _raise_descriptor_limit()
        server = uvicorn.Server(_uvicorn_config(app, host, port, log_level, head_timeout_s=head_timeout_s,
                                                body_idle_s=body_idle_s, max_waiting=max_waiting))
        sock = _bind(host, port)
        if on_ready is not None:
            on_ready()
        with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises Ctrl-C after its graceful shutdown
            server.run(sockets=[sock])
    finally:
        if sink is not None:
            sink.close()


def _raise_descriptor_limit() -> None:
    """Soft RLIMIT_NOFILE up to the hard one, as Go's runtime does for every server: each request in
    progress takes two descriptors (client and upstream), and a soft limit of 1024, common, would refuse
    connections at ~500 streams. Only in ``run_proxy``'s own process: ``BackgroundServer`` shares one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


class BackgroundServer:
    """Runs an ASGI app under uvicorn in a daemon thread with its own event loop.

    Binds before starting, so ``port=0`` picks a free port and ``url`` is known once ``start`` returns.
    Usable as a context manager from sync or async code (starting and stopping block for a moment).
    """

    def __init__(self, app: ASGIApp, host: str = "127.0.0.1", port: int = 0, *, log_level: str = "warning",
                 graceful_s: float = 1.0, head_timeout_s: float = HEAD_TIMEOUT_S, body_idle_s: float = BODY_IDLE_S,
                 max_waiting: int | None = None) -> None:
        """Prepare (not start) a server for ``app`` on ``host:port`` (limits: see ``run_proxy``)."""
        self.app = app
        self._host = host
        self._port = port
        self._config = _uvicorn_config(app, host, port, log_level, timeout_graceful_shutdown=max(graceful_s, 0.01),
                                       head_timeout_s=head_timeout_s, body_idle_s=body_idle_s,
                                       max_waiting=max_waiting)
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
