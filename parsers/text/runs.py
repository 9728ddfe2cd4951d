"""Where the last server run begins in the tail of a log: the bytes each engine writes when it starts.

A dashboard that starts after the engine would otherwise see none of what the engine said at start-up (its
configured settings, the vLLM model's size and served name) nor the loads and requests since. Pure: bytes in,
an offset out; the caller reads the bytes.
"""

from __future__ import annotations

__all__ = ["RUN_OPENERS", "RUN_OPENING_SPAN", "last_opening", "last_run_start"]

RUN_OPENERS: dict[str, tuple[bytes, ...]] = {
    # routes.go: `server config env=map[…]` (through Go's log package to ~0.5, `INFO server config env=`; slog
    # after, `msg="server config"`), then `Listening on ADDR (version X)` a few lines later.
    "ollama": (b'msg="server config"', b"INFO server config env=", b"Listening on "),
    # The API server's first lines: `vLLM API server version X` (to 0.11), the ASCII-art banner whose
    # last row ends `█  version X` (0.12+).
    "vllm": (b"vLLM API server version ", "\u2588  version ".encode()),
    # mlx_lm.server logs once it has bound its port (the model loads later, lazily or before it).
    "mlx": (b"Starting httpd at ",),
}
RUN_OPENING_SPAN = 64 << 10
"""One run's opening lines lie within this many bytes of each other (Ollama logs a few lines between its
`server config` and `Listening on`)."""


def last_opening(engine: str, data: bytes) -> int | None:
    """The offset in `data` of the last server run's first opening text (not its line's start): the earliest
    within RUN_OPENING_SPAN before the last one. None when `data` holds none (or the engine has none)."""
    needles = RUN_OPENERS.get(engine, ())
    last = max((data.rfind(n) for n in needles), default=-1)
    if last < 0:
        return None
    lo = max(0, last - RUN_OPENING_SPAN)
    return min(at for n in needles if (at := data.rfind(n, lo, last + len(n))) >= 0)


def last_run_start(engine: str, data: bytes) -> int | None:
    """The offset in `data` of the first byte of the line that opens the last server run in it
    (last_opening()'s line); None when `data` holds no opening line."""
    first = last_opening(engine, data)
    return None if first is None else data.rfind(b"\n", 0, first) + 1
