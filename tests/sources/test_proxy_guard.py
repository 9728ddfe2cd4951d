"""`ietop proxy` against clients that hold connections without sending a request (ietop.sources.proxy_guard).

- a connection whose request head is not complete within the head timeout is closed, whether it sends
  nothing or a byte now and then (slowloris), on a new connection or a kept one;
- a request body that stalls is cut after the idle time, and recorded as the client leaving; a slow but
  steady one is served;
- at most ``max_waiting`` connections wait for a request: the oldest make room for new ones, so a flood of
  idle connections neither exhausts the descriptors nor keeps out a client that sends its request. This is
  the reported failure, reproduced as it was (a proxy process with a low descriptor limit, default limits).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ietop.sources.proxy import BackgroundServer, make_app
from parsers.events import ProxyRequest

REPO = Path(__file__).resolve().parents[2]
ANSWER = json.dumps({"model": "m", "choices": [{"message": {"content": "ok"}}],
                     "usage": {"prompt_tokens": 3, "completion_tokens": 1}}).encode()
GIVE_UP_S = 10.0
"""How long a client waits to see its connection closed before the test fails (far above the limits)."""


async def engine(scope: Any, receive: Any, send: Any) -> None:
    """A fake engine: reads the whole body, answers a small chat completion saying how long it was."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = ANSWER[:-1] + b', "length": %d}' % size
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    with BackgroundServer(engine) as server:
        yield server.url


@contextlib.contextmanager
def proxy(upstream: str, **limits: Any) -> Iterator[tuple[str, list[ProxyRequest]]]:
    records: list[ProxyRequest] = []
    with BackgroundServer(make_app(upstream, records.append), **limits) as server:
        yield server.url, records


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=GIVE_UP_S)


def closed_by_server(sock: socket.socket, trickle: bytes = b"", every_s: float = 0.05) -> bool:
    """Whether the server closes ``sock`` before GIVE_UP_S; meanwhile sends ``trickle`` a byte at a time."""
    deadline = time.monotonic() + GIVE_UP_S
    sock.settimeout(every_s)
    sent = 0
    while time.monotonic() < deadline:
        try:
            if sock.recv(65536) == b"":
                return True
        except TimeoutError:
            pass
        except ConnectionError:
            return True
        if sent < len(trickle):
            try:
                sock.send(trickle[sent:sent + 1])
            except OSError:
                return True
            sent += 1
    return False


def served(url: str) -> bool:
    r = httpx.post(url + "/v1/chat/completions", json={"model": "m", "messages": []}, timeout=GIVE_UP_S)
    return r.status_code == 200 and r.json()["choices"] == [{"message": {"content": "ok"}}]


HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


def test_connection_sending_no_request_is_closed_after_the_head_timeout(upstream: str) -> None:
    with proxy(upstream, head_timeout_s=0.3) as (url, _), connect(url) as idle:
        assert closed_by_server(idle)
        assert served(url)


def test_head_sent_a_byte_at_a_time_is_closed_at_the_deadline(upstream: str) -> None:
    """A deadline, not an idle timer: slowloris keeps sending and is closed all the same."""
    with proxy(upstream, head_timeout_s=0.3) as (url, _), connect(url) as slow:
        t0 = time.monotonic()
        endless = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 300  # a head never ending
        assert closed_by_server(slow, trickle=endless, every_s=0.02)
        took = time.monotonic() - t0
        # It was still sending when closed: the whole trickle would have taken longer than it took.
        assert took < len(endless) * 0.02
        assert served(url)


def test_next_request_on_a_kept_connection_has_its_own_deadline(upstream: str) -> None:
    with proxy(upstream, head_timeout_s=0.3) as (url, _), connect(url) as kept:
        kept.sendall(HEAD)
        answer = b""
        while b"}" not in answer:
            answer += kept.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200 ")
        kept.sendall(HEAD[:20])  # the next request's first bytes, and no more: uvicorn's keep-alive timer is off
        assert closed_by_server(kept)


def test_request_heads_within_the_deadline_are_served(upstream: str) -> None:
    with proxy(upstream, head_timeout_s=1.0) as (url, _), connect(url) as sock:
        for part in (HEAD[:10], HEAD[10:40], HEAD[40:]):
            sock.sendall(part)
            time.sleep(0.05)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
        assert served(url)


def test_stalled_body_is_cut_and_recorded_as_the_client_leaving(upstream: str) -> None:
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
    with proxy(upstream, body_idle_s=0.3) as (url, records), connect(url) as stalled:
        stalled.sendall(head + b'{"model": "m", "messages": [')
        assert closed_by_server(stalled)
        deadline = time.monotonic() + GIVE_UP_S
        while not records and time.monotonic() < deadline:
            time.sleep(0.01)
        (rec,) = records
        assert (rec.error, rec.status, rec.path) == ("client disconnected", None, "/v1/chat/completions")
        assert served(url)


def test_slow_but_steady_body_is_served(upstream: str) -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 30}]}).encode()
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
    with proxy(upstream, body_idle_s=0.3) as (url, _), connect(url) as sock:
        sock.sendall(head)
        # Longer in all than the idle time, never idle for that long.
        for i in range(0, len(body), 10):
            sock.sendall(body[i:i + 10])
            time.sleep(0.1)
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200 ") and b'"length": %d' % len(body) in answer


def test_waiting_connections_are_capped_the_oldest_closed_first(upstream: str) -> None:
    with proxy(upstream, max_waiting=8) as (url, _):
        idle = [connect(url) for _ in range(20)]
        try:
            assert served(url)  # one more connection, with a request: served, not refused
            time.sleep(0.2)
            still_open = [not closed_by_server_now(s) for s in idle]
            # The first to come were closed to make room; the last 7 or 8 still wait (the request's own
            # connection took a place while it waited for its head).
            assert still_open[:12] == [False] * 12
            assert 7 <= sum(still_open) <= 8
        finally:
            for s in idle:
                s.close()


def closed_by_server_now(sock: socket.socket) -> bool:
    sock.settimeout(0.001)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


PROXY_WITH_FEW_FDS = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, ({fds}, {fds}))
from ietop.sources.proxy import run_proxy
run_proxy("127.0.0.1:{port}", {upstream!r})
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="counts descriptors in /proc")
def test_flood_of_idle_connections_leaves_room_for_a_request(upstream: str) -> None:
    """The reported failure at a small scale: a proxy allowed 128 descriptors, 300 idle connections, then a
    normal request. It used to get no answer (every descriptor held by an idle connection); now it is
    served, and the proxy holds a bounded number of descriptors (the default cap: a quarter of the limit)."""
    fds, flood = 128, 300
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] > flood + 100
    port = _free_port()
    code = PROXY_WITH_FEW_FDS.format(fds=fds, port=port, upstream=upstream)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    idle: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                assert served(url)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, "proxy did not start"
                time.sleep(0.05)
        before = _fds(proc.pid)
        idle = [connect(url) for _ in range(flood)]
        time.sleep(0.5)  # all accepted by now, as far as the proxy can
        assert served(url)
        held = _fds(proc.pid)
        assert held - before <= fds // 4 + 2, (before, held)
        assert proc.poll() is None
    finally:
        for s in idle:
            s.close()
        proc.terminate()
        proc.communicate(timeout=20)
