"""`HOST:PORT` listen addresses for what ietop serves (`ietop proxy`, `ietop export`): loopback unless asked.

Apart from the proxy so that `ietop export` can check its address without importing the proxy's server."""

from __future__ import annotations

import ipaddress


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
    if not allow_remote and not is_loopback(host):
        raise ValueError(f"refusing to listen on {host}: not a loopback address")
    return host, port


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere
