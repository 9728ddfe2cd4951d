"""Open saved logs (plain, gzip or zstd) as one byte stream.

Compression is recognised by its magic bytes, never by the file name: logs get
renamed, attached to bug reports and re-compressed, and a ``server.log`` that is
really gzip is common. Every failure a user can cause (missing file, permissions,
a directory, damaged or truncated compressed data) becomes a ``SourceError`` whose
message is one line that can be shown as is; the CLI should not need a traceback.
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

__all__ = ["SourceError", "open_log", "read_chunks"]

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

# Compressed bytes handed to the zstd decompressor per step. Its output has no size
# cap, so this bounds the memory of one step to this times the compression ratio.
_ZSTD_INPUT_STEP = 1 << 16


class SourceError(Exception):
    """A log source cannot be read; ``str(error)`` is one line meant for the user."""


def _shown(name: str) -> str:
    # A name with control characters would break the one-line promise: quote it.
    return name if name.isprintable() else repr(name)


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _os_reason(exc: OSError, name: str) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    if isinstance(exc, IsADirectoryError) or (isinstance(exc, PermissionError) and os.path.isdir(name)):
        # Windows reports opening a directory as a permission error.
        return "is a directory"
    if isinstance(exc, PermissionError):
        return "permission denied"
    return _one_line(exc.strerror or exc).lower()


def _error(name: str, reason: str) -> SourceError:
    return SourceError(f"cannot read {_shown(name)}: {reason}")


class _ZstdReader:
    """Streaming zstd decoder that, unlike ``stream_reader``, notices a truncated frame."""

    def __init__(self, raw: BinaryIO) -> None:
        import zstandard  # only needed for .zst input; keeps start-up lean otherwise

        self._dctx: Any = zstandard.ZstdDecompressor()
        self._obj: Any = self._dctx.decompressobj()
        self._raw = raw
        self._out = b""
        self._pos = 0
        self._in_frame = False

    def readinto(self, buffer: memoryview) -> int:
        while self._pos >= len(self._out):
            data = self._raw.read(_ZSTD_INPUT_STEP)
            if not data:
                if self._in_frame:
                    raise EOFError("compressed file ended before the end of its last zstd frame")
                return 0
            self._out, self._pos = self._decompress(data), 0
        n = min(len(buffer), len(self._out) - self._pos)
        buffer[:n] = self._out[self._pos : self._pos + n]
        self._pos += n
        return n

    def _decompress(self, data: bytes) -> bytes:
        pieces: list[bytes] = []
        while data:
            pieces.append(self._obj.decompress(data))
            self._in_frame = True
            if not self._obj.eof:
                break
            # Concatenated frames (pzstd, appended archives): continue with a fresh
            # decoder on whatever followed the frame that just ended.
            data = self._obj.unused_data
            self._obj = self._dctx.decompressobj()
            self._in_frame = False
        return b"".join(pieces)

    def close(self) -> None:
        self._raw.close()


class _Decoded(io.RawIOBase):
    """Raw stream over a decompressor that turns its errors into ``SourceError``."""

    def __init__(
        self,
        inner: Any,
        close: Callable[[], None],
        name: str,
        fmt: str,
        corrupt: tuple[type[BaseException], ...],
    ) -> None:
        super().__init__()
        self._inner = inner
        self._close_inner = close
        self._name = name
        self._fmt = fmt
        self._corrupt = corrupt

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            return int(self._inner.readinto(memoryview(buffer).cast("B")))
        except self._corrupt as exc:
            raise _error(self._name, f"corrupt {self._fmt} data ({_one_line(exc)})") from exc
        except OSError as exc:
            raise _error(self._name, _os_reason(exc, self._name)) from exc

    def close(self) -> None:
        if not self.closed:
            self._close_inner()
        super().close()


def _corrupt_zstd_errors() -> tuple[type[BaseException], ...]:
    import zstandard

    return (zstandard.ZstdError, EOFError)


def open_log(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a saved log for reading, decompressing gzip or zstd transparently.

    Raises:
        SourceError: the file is missing, unreadable, a directory, or its compressed
            header is damaged. Damage further in is reported by the reads.
    """
    name = os.fspath(path)
    try:
        raw = open(name, "rb")  # noqa: SIM115 - returned to the caller, who closes it
    except OSError as exc:
        raise _error(name, _os_reason(exc, name)) from exc
    try:
        magic = raw.peek(4)[:4]
    except OSError as exc:
        raw.close()
        raise _error(name, _os_reason(exc, name)) from exc
    if magic.startswith(_GZIP_MAGIC):
        gz = gzip.GzipFile(fileobj=raw, mode="rb")

        def close_gz() -> None:
            gz.close()
            raw.close()

        stream = _Decoded(gz, close_gz, name, "gzip", (gzip.BadGzipFile, EOFError, zlib.error))
    elif magic == _ZSTD_MAGIC:
        try:
            reader = _ZstdReader(raw)
            corrupt = _corrupt_zstd_errors()
        except ImportError as exc:
            raw.close()
            raise _error(name, "zstd-compressed, but the zstandard package is not installed") from exc
        stream = _Decoded(reader, reader.close, name, "zstd", corrupt)
    else:
        return raw
    buffered = io.BufferedReader(stream, buffer_size=1 << 16)
    try:
        # Decode the first block now, so a damaged header fails here, not on first use.
        buffered.peek(1)
    except SourceError:
        buffered.close()
        raise
    return buffered


def read_chunks(path: str | os.PathLike[str], chunk_size: int = 1 << 20) -> Iterator[bytes]:
    """Yield the (decompressed) content of a saved log in chunks of up to ``chunk_size`` bytes.

    Memory stays flat in the file size. Raises ``SourceError`` as ``open_log`` does,
    and when a read fails or compressed data turns out damaged part-way through.
    """
    name = os.fspath(path)
    with open_log(path) as stream:
        while True:
            try:
                chunk = stream.read(chunk_size)
            except OSError as exc:
                raise _error(name, _os_reason(exc, name)) from exc
            if not chunk:
                return
            yield chunk
