"""`ietop proxy --jsonl`: a file that cannot be opened, and one that can no longer be written (disk full).

- a path that cannot be opened is named, with the reason, in one line, and the proxy exits non-zero without
  a traceback (it used to say "cannot listen on …", blaming the listen address);
- a write that fails (ENOSPC: /dev/full is a real one; a fake writer for a disk that fills then frees up)
  never stops the forwarding: the lost lines are counted and said on stderr, each new measurement tries
  again, and once there is room lines are written again. A line cut short is cut off the file.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ietop.sources.proxy import BackgroundServer, JsonlSink, run_proxy
from parsers.api.proxy_log import from_json
from parsers.events import ProxyRequest

REPO = Path(__file__).resolve().parents[2]
FULL = Path("/dev/full")
RECORD = ProxyRequest(line=0, ts=None, method="POST", path="/v1/chat/completions", status=200, model="m", stream=False,
                      ttfb_s=0.01, ttft_s=None, itl_s=None, e2e_s=0.02, content_chunks=1, prompt_tokens=3,
                      output_tokens=1, cached_tokens=None, load_s=None, bytes_up=10, bytes_down=20)
ANSWER = json.dumps({"model": "m", "choices": [{"message": {"content": "ok"}}],
                     "usage": {"prompt_tokens": 3, "completion_tokens": 1}}).encode()


async def engine(scope: Any, receive: Any, send: Any) -> None:
    """A fake engine: every request gets the same small chat completion."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(ANSWER))]})
    await send({"type": "http.response.body", "body": ANSWER})


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    with BackgroundServer(engine) as server:
        yield server.url


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- a file that cannot be opened ---------------------------------------------------------------------------


def _unopenable(tmp_path: Path, kind: str) -> tuple[Path, str]:
    if kind == "a directory":
        return tmp_path, os.strerror(errno.EISDIR)
    if kind == "no such directory":
        return tmp_path / "missing" / "m.jsonl", os.strerror(errno.ENOENT)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    return locked / "m.jsonl", os.strerror(errno.EACCES)


KINDS = ["a directory", "no such directory",
         pytest.param("no permission", marks=pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere"))]


@pytest.mark.parametrize("kind", KINDS)
def test_cli_names_the_jsonl_file_that_cannot_be_opened(tmp_path: Path, kind: str) -> None:
    path, reason = _unopenable(tmp_path, kind)
    listen = f"127.0.0.1:{_free_port()}"
    done = subprocess.run([sys.executable, "-m", "ietop", "proxy", "--listen", listen, "--upstream",
                           "http://127.0.0.1:9", "--jsonl", str(path)],
                          cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1  # a runtime failure (the file), not a usage error
    # One line, and no "listening on" before it: the proxy never listened.
    assert done.stderr.splitlines() == [f"ietop: error: cannot open the JSONL file {path}: {reason}"], done.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_run_proxy_raises_a_one_line_jsonl_error(tmp_path: Path, kind: str) -> None:
    path, reason = _unopenable(tmp_path, kind)
    with pytest.raises(ValueError, match="JSONL file") as raised:
        run_proxy(f"127.0.0.1:{_free_port()}", "http://127.0.0.1:9", str(path))
    assert type(raised.value).__name__ == "JsonlError"
    assert str(raised.value) == f"cannot open the JSONL file {path}: {reason}"


# -- a file that can no longer be written -------------------------------------------------------------------


class FillingDisk:
    """A file on a disk that is full for the next ``full`` writes; ``short`` makes the first of them a short
    write (part of the line goes to ``real``, as a real disk filling up mid-line does)."""

    def __init__(self, real: Any = None, full: int = 0, short: int = 0) -> None:
        self.real = real
        self.full = full
        self.short = short
        self.data = bytearray()

    def write(self, data: bytes | memoryview) -> int:
        if self.short:
            n, self.short = self.short, 0
            self._put(bytes(data[:n]))
            return n
        if self.full:
            self.full -= 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._put(bytes(data))
        return len(data)

    def _put(self, data: bytes) -> None:
        self.data += data
        if self.real is not None:
            self.real.write(data)

    def fileno(self) -> int:
        if self.real is None:
            raise OSError(errno.EBADF, "no file")
        return int(self.real.fileno())

    def close(self) -> None:
        if self.real is not None:
            self.real.close()


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ietop.proxy" and r.levelno >= logging.WARNING]


@pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full")
def test_full_disk_loses_lines_counted_and_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="ietop.proxy")
    sink = JsonlSink(FULL)
    for _ in range(5):
        sink(RECORD)  # ENOSPC, for real
    assert sink.lost == 5
    (warning,) = _warnings(caplog)  # one line, not one per lost measurement
    assert warning.startswith("ietop proxy: cannot write measurements to /dev/full: No space left on device")
    sink.close()
    assert _warnings(caplog)[-1] == "ietop proxy: 5 measurements could not be written to /dev/full"


def test_lines_are_written_again_once_there_is_room(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="ietop.proxy")
    disk = FillingDisk(full=3)
    sink = JsonlSink("m.jsonl", file=disk)
    for i in range(6):
        sink(dataclasses.replace(RECORD, bytes_up=i))
    assert sink.lost == 3
    lines = bytes(disk.data).decode().splitlines()
    assert [from_json(line).bytes_up for line in lines] == [3, 4, 5]
    assert _warnings(caplog) == [
        "ietop proxy: cannot write measurements to m.jsonl: No space left on device; still forwarding, lost lines "
        "are counted and each new measurement is tried again",
        "ietop proxy: writing measurements to m.jsonl again; 3 could not be written",
    ]


def test_lost_lines_are_reminded_while_the_disk_stays_full(caplog: pytest.LogCaptureFixture,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.WARNING, logger="ietop.proxy")
    monkeypatch.setattr(JsonlSink, "REMIND_S", 0.0)
    sink = JsonlSink("m.jsonl", file=FillingDisk(full=3))
    for _ in range(3):
        sink(RECORD)
    assert _warnings(caplog)[1:] == ["ietop proxy: 2 measurements not written to m.jsonl so far (No space left on device)",
                                     "ietop proxy: 3 measurements not written to m.jsonl so far (No space left on device)"]


@pytest.mark.parametrize("truncatable", [True, False])
def test_a_line_cut_short_by_a_full_disk_does_not_spoil_the_file(tmp_path: Path, truncatable: bool) -> None:
    path = tmp_path / "m.jsonl"
    real = open(path, "ab", buffering=0) if truncatable else None  # noqa: SIM115 (closed by the sink)
    disk = FillingDisk(real, full=1, short=25)
    sink = JsonlSink(path, file=disk)
    sink(RECORD)  # 25 bytes of it reach the file, then the disk is full
    sink(RECORD)  # room again
    sink.close()
    text = path.read_text() if truncatable else bytes(disk.data).decode()
    lines = [line for line in text.split("\n") if line]
    assert sink.lost == 1
    # Truncated back where the file can be; otherwise the torn line stays alone on its line and the next is whole.
    assert len(lines) == (1 if truncatable else 2)
    assert from_json(lines[-1]) == RECORD
    assert text.endswith("\n")


@pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full")
def test_proxy_on_a_full_disk_keeps_serving_and_says_what_was_lost(upstream: str) -> None:
    """The command as users run it: every request forwarded and shown, the lost lines said on stderr."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "ietop", "proxy", "--listen", f"127.0.0.1:{port}",
                             "--upstream", upstream, "--jsonl", str(FULL)],
                            cwd=REPO, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        with httpx.Client(timeout=10) as client:
            while True:
                try:
                    client.get(url + "/api/version")
                    break
                except httpx.TransportError:
                    assert proc.poll() is None and time.monotonic() < deadline, "proxy did not start"
                    time.sleep(0.05)
            for _ in range(3):
                r = client.post(url + "/v1/chat/completions", json={"model": "m", "messages": []})
                assert (r.status_code, r.content) == (200, ANSWER)
        time.sleep(0.2)  # measurements are recorded within ~5 ms of their end
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    shown = [line for line in stderr.splitlines() if line.startswith("POST /v1/chat/completions 200")]
    assert len(shown) == 3, stderr  # measuring goes on: only the file misses them
    assert stderr.count("cannot write measurements to /dev/full: No space left on device") == 1, stderr
    assert "ietop proxy: 3 measurements could not be written to /dev/full" in stderr, stderr
