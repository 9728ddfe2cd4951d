"""Saved logs open the same way whatever their compression, and fail with one clear line.

Compression is detected by magic bytes, so the cases include a gzip file named
``.log``; damaged archives must fail as SourceError, never as a zlib/zstd traceback.
"""

from __future__ import annotations

import gzip
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import pytest
import zstandard

from ietop.sources import files
from ietop.sources.files import SourceError, open_log, read_chunks

LOG = (
    b'time=2025-04-22T11:21:47.546Z level=WARN source=runner.go:131 msg="truncating input prompt" '
    b"limit=2048 prompt=5065 keep=5 new=2048\n"
) + ('[GIN] 2024/10/08 - 20:16:09 | 200 |      16.724µs |             ::1 | GET      "/"\n'.encode())


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _read_all(path: Path, chunk_size: int = 1 << 20) -> bytes:
    return b"".join(read_chunks(path, chunk_size))


def _message(excinfo: pytest.ExceptionInfo[SourceError]) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("name", "encode"),
    [
        ("server.log", lambda d: d),
        ("server.log.gz", gzip.compress),
        ("server.log.zst", lambda d: zstandard.ZstdCompressor().compress(d)),
        ("server.log", gzip.compress),  # a gzip file with a plain name
        ("server.log.gz", lambda d: zstandard.ZstdCompressor().compress(d)),  # a wrong extension
    ],
)
def test_round_trip(tmp_path: Path, name: str, encode: Callable[[bytes], bytes]) -> None:
    path = _write(tmp_path / name, encode(LOG))
    assert _read_all(path) == LOG
    with open_log(str(path)) as stream:
        assert stream.read() == LOG


def test_multi_member_gzip_and_multi_frame_zstd(tmp_path: Path) -> None:
    gz = _write(tmp_path / "a.gz", gzip.compress(LOG) + gzip.compress(LOG))
    assert _read_all(gz) == LOG * 2
    cctx = zstandard.ZstdCompressor()
    zst = _write(tmp_path / "a.zst", cctx.compress(LOG) + cctx.compress(LOG))
    assert _read_all(zst) == LOG * 2


def test_empty_file(tmp_path: Path) -> None:
    assert list(read_chunks(_write(tmp_path / "empty.log", b""))) == []


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    with pytest.raises(SourceError) as excinfo:
        open_log(path)
    assert _message(excinfo) == f"cannot read {path}: no such file"
    with pytest.raises(SourceError, match="no such file"):
        list(read_chunks(path))


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(SourceError) as excinfo:
        open_log(tmp_path)
    assert _message(excinfo) == f"cannot read {tmp_path}: is a directory"


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root or Windows ignore the mode bits")
def test_permission_denied(tmp_path: Path) -> None:
    path = _write(tmp_path / "server.log", LOG)
    path.chmod(0)
    with pytest.raises(SourceError) as excinfo:
        open_log(path)
    assert _message(excinfo) == f"cannot read {path}: permission denied"


def test_permission_denied_even_as_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Root ignores mode bits, so simulate the error the OS would raise."""

    def denied(name: str, mode: str) -> NoReturn:
        raise PermissionError(13, "Permission denied", name)

    monkeypatch.setattr(files, "open", denied, raising=False)
    path = _write(tmp_path / "server.log", LOG)
    with pytest.raises(SourceError) as excinfo:
        open_log(path)
    assert _message(excinfo) == f"cannot read {path}: permission denied"


def test_corrupt_gzip_header(tmp_path: Path) -> None:
    path = _write(tmp_path / "server.log.gz", b"\x1f\x8b\x00garbage, not deflate")
    with pytest.raises(SourceError) as excinfo:
        open_log(path)
    assert _message(excinfo).startswith(f"cannot read {path}: corrupt gzip data")


def test_corrupt_gzip_in_the_middle(tmp_path: Path) -> None:
    data = bytearray(gzip.compress(os.urandom(1 << 20) + LOG * 20000))
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(64)
    path = _write(tmp_path / "server.log.gz", bytes(data))
    with pytest.raises(SourceError) as excinfo:
        _read_all(path, 1 << 16)
    assert _message(excinfo).startswith(f"cannot read {path}: corrupt gzip data")


def test_truncated_gzip(tmp_path: Path) -> None:
    data = gzip.compress(LOG * 1000)
    path = _write(tmp_path / "server.log.gz", data[: len(data) // 2])
    with pytest.raises(SourceError, match="corrupt gzip data"):
        _read_all(path)


def test_corrupt_zstd(tmp_path: Path) -> None:
    # The zstd CLI writes frame checksums by default; without one, damage inside a
    # stored (incompressible) block is undetectable.
    cctx = zstandard.ZstdCompressor(write_checksum=True)
    data = bytearray(cctx.compress(os.urandom(1 << 18) + LOG * 1000))
    data[len(data) // 2 : len(data) // 2 + 64] = b"\xff" * 64
    path = _write(tmp_path / "server.log.zst", bytes(data))
    with pytest.raises(SourceError, match="corrupt zstd data"):
        _read_all(path)


def test_truncated_zstd(tmp_path: Path) -> None:
    data = zstandard.ZstdCompressor().compress(LOG * 1000)
    path = _write(tmp_path / "server.log.zst", data[: len(data) // 2])
    with pytest.raises(SourceError, match="corrupt zstd data"):
        _read_all(path)


def test_control_characters_in_name_stay_on_one_line(tmp_path: Path) -> None:
    with pytest.raises(SourceError) as excinfo:
        open_log(tmp_path / "bad\nname.log")
    assert "no such file" in _message(excinfo)


@pytest.mark.parametrize("suffix", ["log", "gz", "zst"])
def test_large_file_streams_in_bounded_chunks(tmp_path: Path, suffix: str) -> None:
    data = LOG * 60000  # about 13 MB
    encoded = {
        "log": data,
        "gz": gzip.compress(data, compresslevel=1),
        "zst": zstandard.ZstdCompressor(level=1).compress(data),
    }[suffix]
    path = _write(tmp_path / f"big.{suffix}", encoded)
    sizes = []
    total = bytearray()
    for chunk in read_chunks(path, chunk_size=1 << 20):
        sizes.append(len(chunk))
        total += chunk
    assert bytes(total) == data
    assert max(sizes) <= 1 << 20
    assert len(sizes) >= len(data) // (1 << 20)
