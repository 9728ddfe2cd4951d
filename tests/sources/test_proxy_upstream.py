"""`ietop proxy` against an upstream scripted at the socket level: what happens to its connections.

test_proxy.py drives the proxy with a well-behaved ASGI upstream. Here the upstream is a raw socket server
on 127.0.0.1 that answers each request with bytes chosen by the test, so it can do what real engines and
their servers do at the edges: close a kept connection, cut an answer, send HTTP/1.0, 1xx, or garbage.
What must hold:

- a connection is reused after a complete exchange, and only then: not after a body left unread, a
  ``Connection: close``, a HEAD, an error;
- a kept connection the upstream closed does not fail the next request: it is noticed while idle, or, if
  the upstream closes it just as the request goes out, the request is sent once more on a new connection,
  but never once the upstream has answered, and never a body streamed from the client;
- request bodies are framed for what is sent (``Content-Length`` or chunks), answers of every framing
  (length, chunks, until the connection closes) reach the client byte for byte, hop-by-hop headers do not.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from ietop.sources.proxy import BackgroundServer, make_app
from ietop.sources.proxy_messages import request_head
from ietop.sources.upstream import Connections
from parsers.events import ProxyRequest

SSE = b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\ndata: [DONE]\n\n'


@dataclass
class Request:
    conn: int
    """Which upstream connection it came on (0, 1, ... in order of acceptance)."""
    nth: int
    """Its place on that connection (0 for the first)."""
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class Closing(bytes):
    """An answer after which the upstream closes the connection."""


Answer = Callable[[Request], "bytes | None"]
"""What the upstream writes back for a request; None closes the connection without a word."""


def ok(body: bytes = b"{}", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%b\r\n%b" % (
        len(body), extra, body)


def chunked(*parts: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            + b"".join(b"%x\r\n%b\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n")


@dataclass
class Upstream:
    """A socket server answering each request with ``answer(request)``; ``close_idle_after`` closes a
    connection that has been idle that long (an engine's keep-alive timeout)."""

    answer: Answer
    close_idle_after: float | None = None
    hold: float = 0.0
    """Seconds to keep the connection open, silent, after an answer that does not end the exchange."""
    requests: list[Request] = field(default_factory=list)
    closed_by_proxy: list[int] = field(default_factory=list)
    sent_at: list[float] = field(default_factory=list)
    """When each answer was handed whole to the kernel (``time.monotonic()``)."""
    _sock: socket.socket = field(default_factory=lambda: socket.create_server(("127.0.0.1", 0)))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def serve(self) -> None:
        conn_id = 0
        while True:
            try:
                sock, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._connection, args=(sock, conn_id), daemon=True).start()
            conn_id += 1

    def _connection(self, sock: socket.socket, conn: int) -> None:
        reader = _Reader(sock)
        with sock:
            for nth in range(1000):
                sock.settimeout(self.close_idle_after)
                try:
                    request = reader.request(conn, nth)
                except TimeoutError:
                    return  # idle too long: close, as engines' servers do
                if request is None:
                    self.closed_by_proxy.append(conn)
                    return
                self.requests.append(request)
                reply = self.answer(request)
                if reply is None:
                    return
                try:
                    sock.sendall(reply)
                except OSError:
                    return
                self.sent_at.append(time.monotonic())
                if isinstance(reply, Closing):
                    return
                if self.hold:
                    sock.settimeout(self.hold)
                    with contextlib.suppress(TimeoutError, OSError):
                        if sock.recv(1) == b"":
                            self.closed_by_proxy.append(conn)
                    return

    def close(self) -> None:
        self._sock.close()


class _Reader:
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buf = b""

    def _more(self) -> bool:
        try:
            data = self._sock.recv(65536)
        except ConnectionResetError:
            data = b""
        self._buf += data
        return bool(data)

    def _until(self, marker: bytes) -> bytes | None:
        while marker not in self._buf:
            if not self._more():
                return None
        line, self._buf = self._buf.split(marker, 1)
        return line

    def _exactly(self, n: int) -> bytes:
        while len(self._buf) < n:
            if not self._more():
                raise AssertionError("request body cut")
        data, self._buf = self._buf[:n], self._buf[n:]
        return data

    def request(self, conn: int, nth: int) -> Request | None:
        head = self._until(b"\r\n\r\n")
        if head is None:
            return None
        line, *lines = head.decode("latin-1").split("\r\n")
        method, path, _ = line.split(" ")
        headers = {k.lower(): v.strip() for k, v in (h.split(":", 1) for h in lines)}
        assert len(headers) == len(lines), f"a header came twice: {lines}"
        if "content-length" in headers:
            body = self._exactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding") == "chunked":
            body = b""
            while size := int(self._until(b"\r\n") or b"0", 16):
                body += self._exactly(size + 2)[:-2]
            assert self._until(b"\r\n") == b""
        else:
            body = b""
        return Request(conn, nth, method, path, headers, body)


@contextlib.contextmanager
def scripted(answer: Answer, close_idle_after: float | None = None,
             hold: float = 0.0) -> Iterator[tuple[Upstream, str, list[ProxyRequest]]]:
    """The scripted upstream and a proxy in front of it (timeout 2 s); yields (upstream, proxy URL, records)."""
    upstream = Upstream(answer, close_idle_after, hold)
    threading.Thread(target=upstream.serve, daemon=True).start()
    records: list[ProxyRequest] = []
    try:
        with BackgroundServer(make_app(upstream.url, records.append, timeout=2.0)) as proxy:
            yield upstream, proxy.url, records
    finally:
        upstream.close()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=5) as c:
        yield c


def wait_for(condition: Callable[[], bool], timeout: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


# -- reuse -----------------------------------------------------------------------------------------


def test_connection_is_reused_after_a_complete_answer(client: httpx.Client) -> None:
    with scripted(lambda r: ok() if r.method != "POST" else chunked(SSE)) as (upstream, url, _):
        for _ in range(3):
            assert client.get(url + "/api/tags").status_code == 200
            assert client.post(url + "/v1/chat/completions", content=b'{"stream": true}').content == SSE
    assert [(r.conn, r.nth) for r in upstream.requests] == [(0, n) for n in range(6)]


@pytest.mark.parametrize(("why", "answer"), [
    ("connection: close", lambda r: ok(extra=b"connection: close\r\n")),
    ("HTTP/1.0", lambda r: b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\n{}"),  # and no keep-alive
    ("an error", lambda r: ok() + b"garbage after the answer\r\n\r\n"),
])
def test_connection_is_not_reused_when_the_exchange_says_so(client: httpx.Client, why: str, answer: Answer) -> None:
    with scripted(answer) as (upstream, url, _):
        for _ in range(2):
            r = client.get(url + "/api/tags")
            assert r.status_code == 200 and r.content == b"{}"
    assert [(r.conn, r.nth) for r in upstream.requests] == [(0, 0), (1, 0)], why


def test_head_answer_ends_at_its_headers_and_keeps_the_connection(client: httpx.Client) -> None:
    """A HEAD answer says how long its body would be but has none: the proxy must not wait for one."""
    def answer(r: Request) -> bytes:
        return ok(b"x" * 500)[:-500] if r.method == "HEAD" else ok(b"x" * 500)

    with scripted(answer) as (upstream, url, _):
        for _ in range(2):
            r = client.head(url + "/")
            assert (r.status_code, r.headers["content-length"], r.content) == (200, "500", b"")
        assert client.get(url + "/").content == b"x" * 500
    assert [(r.conn, r.nth, r.method) for r in upstream.requests] == [(0, 0, "HEAD"), (0, 1, "HEAD"), (0, 2, "GET")]


def test_answer_left_unread_closes_its_connection(client: httpx.Client) -> None:
    """The client leaves in the middle of a stream: the upstream sees its connection closed (how an engine
    learns to stop), and it is not reused for the next request."""
    first = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 100000\r\n\r\n" + SSE
    with scripted(lambda r: first if r.conn == 0 else ok(), hold=3.0) as (upstream, url, records):
        with client.stream("POST", url + "/v1/chat/completions", content=b'{"stream": true}') as r:
            next(r.iter_raw())
        assert wait_for(lambda: upstream.closed_by_proxy == [0])
        assert client.get(url + "/api/tags").status_code == 200
        assert wait_for(lambda: len(records) == 1)
    assert [(r.conn, r.nth) for r in upstream.requests] == [(0, 0), (1, 0)]
    assert records[0].error == "client disconnected"


def test_client_leaving_before_the_answer_closes_the_upstream_connection() -> None:
    """An engine still processing the prompt learns that nobody waits for the answer any more."""
    with scripted(lambda r: b"", hold=5.0) as (upstream, url, records):
        with httpx.Client(timeout=0.3) as impatient, pytest.raises(httpx.ReadTimeout):
            impatient.post(url + "/v1/chat/completions", content=b'{"model": "m", "stream": true}')
        assert wait_for(lambda: upstream.closed_by_proxy == [0])
        assert wait_for(lambda: len(records) == 1)
    assert (records[0].status, records[0].error, records[0].model) == (None, "client disconnected", "m")


def test_slow_client_slows_the_upstream_instead_of_filling_memory() -> None:
    """Backpressure end to end: a client that stops reading stops the upstream's writes (it holds 64 MiB;
    loopback socket buffers hold a few), and then gets every byte."""
    size = 64 << 20
    with scripted(lambda r: ok(b"z" * size)) as (upstream, url, _), httpx.Client(timeout=10) as client:
        with client.stream("GET", url + "/api/blobs/big") as r:
            chunks = r.iter_raw()
            got = len(next(chunks))
            time.sleep(1.0)
            assert upstream.sent_at == [], "the proxy read the whole answer while the client read nothing"
            got += sum(len(c) for c in chunks)
        assert got == size
        assert len(upstream.sent_at) == 1


def test_idle_connection_closed_by_the_upstream_is_not_reused(client: httpx.Client) -> None:
    with scripted(lambda r: ok(), close_idle_after=0.05) as (upstream, url, _):
        for _ in range(2):
            assert client.get(url + "/api/tags").status_code == 200
            time.sleep(0.3)
    assert [(r.conn, r.nth) for r in upstream.requests] == [(0, 0), (1, 0)]


def test_connection_idle_too_long_is_not_reused(client: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept no longer than an engine's server would keep it: the upstream still has it open here."""
    monkeypatch.setattr(Connections, "KEEPALIVE_S", 0.1)
    with scripted(lambda r: ok()) as (upstream, url, _):
        for pause in (0.0, 0.3, 0.0):
            time.sleep(pause)
            assert client.get(url + "/api/tags").status_code == 200
        assert wait_for(lambda: upstream.closed_by_proxy == [0])  # closed, not left open
    assert [(r.conn, r.nth) for r in upstream.requests] == [(0, 0), (1, 0), (1, 1)]


def test_kept_connection_closed_as_the_request_goes_out_is_retried_once(client: httpx.Client) -> None:
    """The race a keep-alive timeout makes: the request is sent on a connection the upstream is closing.
    Not a byte came back, so it is sent again on a new connection; the client never knows."""
    with scripted(lambda r: ok(b'{"conn": %d}' % r.conn) if r.nth == 0 else None) as (upstream, url, records):
        assert client.get(url + "/api/tags").json() == {"conn": 0}
        r = client.post(url + "/api/chat", content=b'{"model": "m", "stream": false}')
        assert r.status_code == 200 and r.json() == {"conn": 1}
        assert wait_for(lambda: len(records) == 1)
    assert [(r.conn, r.nth, r.path) for r in upstream.requests] == [
        (0, 0, "/api/tags"), (0, 1, "/api/chat"), (1, 0, "/api/chat")]
    assert upstream.requests[1].body == upstream.requests[2].body == b'{"model": "m", "stream": false}'
    assert (records[0].status, records[0].error) == (200, None)


def test_no_second_try_on_a_new_connection_or_after_an_answer_began(client: httpx.Client) -> None:
    with scripted(lambda r: None) as (upstream, url, _):  # a fresh connection closed unanswered: 502, once
        r = client.post(url + "/api/chat", content=b"{}")
        assert r.status_code == 502 and "upstream error" in r.json()["error"]
    assert len(upstream.requests) == 1

    half = Closing(b"HTTP/1.1 200 OK\r\ncontent-le")  # the kept connection begins to answer, then dies
    with scripted(lambda r: ok() if r.nth == 0 else half) as (upstream, url, _):
        assert client.get(url + "/api/tags").status_code == 200
        r = client.post(url + "/api/chat", content=b"{}")
        assert r.status_code == 502 and "upstream error" in r.json()["error"]
    assert [(r.conn, r.nth) for r in upstream.requests] == [(0, 0), (0, 1)]


def test_streamed_upload_goes_on_a_new_connection(client: httpx.Client) -> None:
    """A body streamed from the client cannot be sent twice, so it never risks a kept connection."""
    upload = bytes(range(256)) * 8192  # 2 MiB: over the proxy's read-it-whole limit
    with scripted(lambda r: ok(b'{"len": %d}' % len(r.body))) as (upstream, url, _):
        assert client.get(url + "/api/tags").status_code == 200
        assert client.post(url + "/api/blobs/sha256:x", content=upload).json() == {"len": len(upload)}
        assert client.get(url + "/api/tags").status_code == 200
    # The upload opened connection 1 although 0 was idle; 1, the last used, is the next one reused.
    assert [(r.conn, r.nth) for r in upstream.requests] == [(0, 0), (1, 0), (1, 1)]
    assert upstream.requests[1].body == upload


# -- framing ---------------------------------------------------------------------------------------


def test_request_bodies_are_framed_for_what_is_sent(client: httpx.Client) -> None:
    upload = b"x" * (3 << 20)
    with scripted(lambda r: ok()) as (upstream, url, _):
        client.post(url + "/v1/chat/completions", content=iter([b'{"model": ', b'"m"}']))  # chunked, read whole
        client.post(url + "/api/blobs/sha256:y", content=iter([upload[:1 << 20], upload[1 << 20:]]))  # streamed
        client.post(url + "/api/blobs/sha256:z", content=upload)  # streamed, with its length
        client.post(url + "/api/pull")  # no body
        client.get(url + "/api/tags")
    framing = [(r.headers.get("content-length"), r.headers.get("transfer-encoding"), len(r.body))
               for r in upstream.requests]
    assert framing == [("14", None, 14), (None, "chunked", 3 << 20), (str(3 << 20), None, 3 << 20),
                       ("0", None, 0), (None, None, 0)]
    assert upstream.requests[0].body == b'{"model": "m"}'
    assert [r.body == upload for r in upstream.requests[1:3]] == [True, True]


@pytest.mark.parametrize(("name", "raw", "body"), [
    ("length", ok(b'{"a": 1}'), b'{"a": 1}'),
    ("chunks", chunked(b"data: 1\n\n", b"data: 2\n\n"), b"data: 1\n\ndata: 2\n\n"),
    ("until close", Closing(b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n" + SSE), SSE),
    ("1xx first", b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n" + ok(), b"{}"),
    ("no content", b"HTTP/1.1 204 No Content\r\n\r\n", b""),
])
def test_answers_of_every_framing_reach_the_client_whole(client: httpx.Client, name: str, raw: bytes,
                                                         body: bytes) -> None:
    with scripted(lambda r: raw) as (_, url, records):
        for _ in range(2):
            r = client.post(url + "/v1/chat/completions", content=b'{"stream": true}')
            assert r.content == body, name
            assert r.status_code == (204 if name == "no content" else 200)
        assert wait_for(lambda: len(records) == 2)
    assert [(rec.status, rec.bytes_down) for rec in records] == [(r.status_code, len(body))] * 2
    assert not any((rec.error or "").startswith("upstream") for rec in records)  # the meter may judge the content


def test_answer_cut_short_cuts_the_client_connection(client: httpx.Client) -> None:
    cut = Closing(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 1000\r\n\r\n" + SSE)
    with scripted(lambda r: cut) as (_, url, records):
        with pytest.raises(httpx.RemoteProtocolError):
            client.post(url + "/v1/chat/completions", content=b'{"stream": true}')
        assert wait_for(lambda: len(records) == 1)
    assert (records[0].status, records[0].error, records[0].bytes_down) == (200, "upstream error", len(SSE))


def test_garbage_instead_of_http_is_a_502(client: httpx.Client) -> None:
    with scripted(lambda r: Closing(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")) as (_, url, records):
        r = client.post(url + "/api/generate", content=b'{"model": "m"}')
        assert r.status_code == 502 and "upstream error" in r.json()["error"]
        assert wait_for(lambda: len(records) == 1)
    assert (records[0].status, records[0].error) == (502, "upstream error")


def test_hop_by_hop_answer_headers_are_dropped(client: httpx.Client) -> None:
    extra = b"connection: x-hop\r\nx-hop: 1\r\nkeep-alive: timeout=5\r\nx-engine: kept\r\n"
    with scripted(lambda r: ok(extra=extra)) as (_, url, _records):
        r = client.get(url + "/api/tags")
    assert r.headers["x-engine"] == "kept" and r.headers["content-length"] == "2"
    assert "x-hop" not in r.headers and "keep-alive" not in r.headers


def test_a_line_break_in_a_request_never_reaches_the_upstream() -> None:
    """The server in front parsed these, so none should hold one; if one did, it would let a client write a
    request of its own onto the upstream connection."""
    assert request_head("GET", b"/a?b=1", [(b"host", b"h")]) == b"GET /a?b=1 HTTP/1.1\r\nhost: h\r\n\r\n"
    for target, headers in [(b"/", [(b"x", b"a\r\nb: c")]), (b"/\n", []), (b"/", [(b"x\r", b"1")])]:
        with pytest.raises(ValueError, match="line break"):
            request_head("GET", target, headers)


def test_https_upstream_goes_through_httpx(client: httpx.Client) -> None:
    """TLS is httpx's: the app makes its own client for an https upstream (nothing listens here)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    records: list[ProxyRequest] = []
    with BackgroundServer(make_app(f"https://127.0.0.1:{port}", records.append, timeout=2.0)) as proxy:
        r = client.post(proxy.url + "/api/chat", content=b'{"model": "m"}')
        assert r.status_code == 502 and "upstream down" in r.json()["error"]
        assert wait_for(lambda: len(records) == 1)
    assert (records[0].status, records[0].error, records[0].model) == (502, "upstream down", "m")
