"""MlxServer's process handling against a stand-in server (stdlib only, no mlx needed, ~2 s).

The stand-in accepts the real server's flags, answers /health, and can ignore SIGTERM or exit early, so
the SIGKILL escalation, the port-in-use retry and the startup error paths are covered without the venv.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import mlx_server
import pytest
from mlx_server import MlxServer, MlxServerError, pid_alive, port_refuses

FAKE = r'''
import argparse, http.server, signal, sys
ap = argparse.ArgumentParser()
for flag in ("--model", "--host", "--port", "--log-level"):
    ap.add_argument(flag)
ap.add_argument("--mode", default="ok")
a = ap.parse_args()
assert a.host == "127.0.0.1", a.host
if a.mode == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if a.mode == "crash":
    print("boom: cannot load model", a.model, file=sys.stderr)
    sys.exit(3)

class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        code = 503 if a.mode == "never-healthy" else 200
        self.send_response(code)
        self.end_headers()
        self.wfile.write(b"{}")

print("fake server on", a.port, "level", a.log_level, file=sys.stderr)
http.server.HTTPServer((a.host, int(a.port)), H).serve_forever()
'''


@pytest.fixture
def fake_server(tmp_path: Path) -> Path:
    script = tmp_path / "fake_server.py"
    script.write_text(f"#!{sys.executable}\n{FAKE}")
    script.chmod(0o755)
    return script


def test_start_stop_by_pid(fake_server: Path, tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.write_text("earlier line\n")
    with MlxServer("m", log_level="debug", log_path=log, server=fake_server) as server:
        assert server.url.startswith("http://127.0.0.1:")
        assert pid_alive(server.pid) and not port_refuses(server.port)
        assert server.startup_seconds is not None
        pid, port = server.pid, server.port
    assert not pid_alive(pid) and port_refuses(port)
    assert server.returncode == -15
    assert server.stop() == -15  # idempotent
    text = log.read_text()
    assert text.startswith("earlier line\n")  # appended, not truncated
    assert "level DEBUG" in text


def test_sigkill_when_sigterm_is_ignored(fake_server: Path) -> None:
    server = MlxServer("m", server=fake_server, extra_args=["--mode", "ignore-term"], stop_grace=0.5).start()
    pid = server.pid
    assert server.stop() == -9
    assert not pid_alive(pid)


def test_early_exit_reports_log_tail(fake_server: Path) -> None:
    server = MlxServer("the-model", server=fake_server, extra_args=["--mode", "crash"])
    with pytest.raises(MlxServerError, match=r"exited with 3(.|\n)*boom: cannot load model the-model"):
        server.start()
    assert server.stop() == 3


def test_startup_timeout(fake_server: Path) -> None:
    server = MlxServer("m", server=fake_server, extra_args=["--mode", "never-healthy"], startup_timeout=1.0)
    with pytest.raises(MlxServerError, match="did not answer /health"):
        server.start()
    assert not server.running


def test_port_taken_between_pick_and_bind_is_retried(fake_server: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        ports = iter([busy])
        real = mlx_server.free_port
        monkeypatch.setattr(mlx_server, "free_port", lambda: next(ports, None) or real())
        with MlxServer("m", server=fake_server) as server:
            assert server.port != busy
