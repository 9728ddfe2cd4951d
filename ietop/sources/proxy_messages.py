"""The messages `ietop proxy` reads and writes, apart from what it does with them.

HTTP/1.1 rules between the clients and the upstream: which headers belong to one connection and are never
forwarded (RFC 9110 §7.6.1), how a forwarded request body is framed for what is actually sent, and the
request head as written on the wire (read by both ``proxy_app`` and ``upstream``). And the client side in
ASGI terms: reading a request body whole or as it comes, noticing the client leave, answering an error.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

__all__ = [
    "HOP_BY_HOP", "ASGIApp", "ClientGone", "Receive", "Scope", "Send", "ends_at_eof", "header", "read_upto",
    "request_head", "request_headers", "response_headers", "send_error", "stream_body", "wait_disconnect",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]

HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"proxy-connection", b"te",
     b"trailer", b"transfer-encoding", b"upgrade"}
)
"""Headers that describe one connection, not the message (RFC 9110 §7.6.1): never forwarded."""
_NOT_FORWARDED_UP = HOP_BY_HOP | {b"host", b"expect"}
"""Host is the upstream's; ``Expect: 100-continue`` was already answered by the server in front of us."""
_FRAMING = frozenset({b"content-length", b"transfer-encoding"})
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def connection_tokens(headers: Headers) -> set[bytes]:
    """Header names listed in ``Connection`` (hop-by-hop by declaration)."""
    return {t.strip().lower() for k, v in headers if k.lower() == b"connection" for t in v.split(b",") if t.strip()}


def request_headers(raw: Headers, host: bytes, method: str, content: bytes | AsyncIterator[bytes] | None) -> Headers:
    """What goes upstream: ``host`` as ``Host``, the client's end-to-end headers, and the framing of the body
    as it is sent on (what httpx's request model used to add).

    A body read whole gets its real ``Content-Length`` (the client may have sent it chunked); none at all gets
    ``Content-Length: 0`` where the method expects a body or the client sent one. A streamed body keeps the
    client's ``Content-Length``, or is sent chunked when the client did not give one.
    """
    drop = _NOT_FORWARDED_UP | connection_tokens(raw)
    headers = [(b"host", host)]
    had_length = False
    for k, v in raw:
        name = k.lower()
        if name in _FRAMING:
            had_length = True
            if isinstance(content, bytes) or content is None or name != b"content-length":
                continue  # set below, for what is sent
        if name not in drop:
            headers.append((k, v))
    if isinstance(content, bytes) or content is None:
        if content or had_length or method in _BODY_METHODS:
            headers.append((b"content-length", b"%d" % len(content or b"")))
    elif not any(k.lower() == b"content-length" for k, _ in headers):
        headers.append((b"transfer-encoding", b"chunked"))
    return headers


def header(headers: Headers, name: bytes) -> str | None:
    """The first value of header ``name`` (lower case), decoded."""
    for k, v in headers:
        if k.lower() == name:
            return v.decode("latin-1")
    return None


def response_headers(raw: Headers) -> Headers:
    """What goes back to the client: the upstream's end-to-end headers (the server frames the body itself)."""
    drop = HOP_BY_HOP | connection_tokens(raw)
    return [(k, v) for k, v in raw if k.lower() not in drop]


def ends_at_eof(headers: Headers) -> bool:
    """An answer with these headers has a body that ends where the connection does (neither a length nor
    chunks), or, when the status or request says so, none; ``ends_at_eof`` only decides the former."""
    for name, value in headers:
        lower = name.lower()
        if lower == b"content-length" or (lower == b"transfer-encoding" and b"chunked" in value.lower()):
            return False
    return True


def request_head(method: str, target: bytes, headers: Headers) -> bytes:
    """The request line and headers, as sent.

    Raises:
        ValueError: a line break in any part (the ASGI server parsed these from a request, so none should
        be there; checked because one would let a client write a request of its own to the upstream).
    """
    parts = [method.encode("ascii"), b" ", target, b" HTTP/1.1\r\n"]
    for name, value in headers:
        parts += (name, b": ", value, b"\r\n")
    parts.append(b"\r\n")
    head = b"".join(parts)
    lines = len(headers) + 2
    if head.count(b"\n") != lines or head.count(b"\r") != lines:
        raise ValueError("line break in a request's method, target or headers")
    return head


# -- the client side, in ASGI terms ---------------------------------------------------------------------


class ClientGone(Exception):
    """The client disconnected while its request body was being forwarded."""


def error_body(message: str) -> bytes:
    return json.dumps({"error": f"ietop proxy: {message}"}).encode() + b"\n"


async def send_error(send: Send, status: int, message: str) -> None:
    body = error_body(message)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def read_upto(receive: Receive, limit: int) -> tuple[bytes, bool]:
    """The whole request body and True if it ends within ``limit`` bytes (the client may not have said its
    length), else its first part and False, the rest still to receive; raises ``ClientGone``."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        body: bytes = message.get("body", b"")
        parts.append(body)
        size += len(body)
        if not message.get("more_body", False):
            return b"".join(parts), True
        if size > limit:
            return b"".join(parts), False


async def stream_body(receive: Receive, done: asyncio.Event, first: bytes = b"",
                      watch: Callable[[bytes], None] | None = None) -> AsyncIterator[bytes]:
    """The request body as it arrives (``first``: what was already received of it), for large uploads;
    ``watch`` sees each part as it goes; sets ``done`` after the last part was taken."""
    if first:
        if watch is not None:
            watch(first)
        yield first
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        body = message.get("body", b"")
        if body:
            if watch is not None:
                watch(body)
            yield body
        if not message.get("more_body", False):
            done.set()
            return


async def wait_disconnect(receive: Receive, body_done: asyncio.Event) -> None:
    """Returns when the client disconnects (only listens once the request body has been read)."""
    await body_done.wait()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
