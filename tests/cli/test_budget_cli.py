"""`ietop budget` on the command line: usage errors in one line, the text report, and the live budget from a
loopback fake Ollama (127.0.0.2) serving recorded `/api/ps` and `/api/tags` bodies, which must equal the budget
the log gives for the same models."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ietop.cli import main

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "fixtures" / "synthetic" / "seed-budget.log"
API = ROOT / "fixtures" / "ollama" / "api"


class _Fake(BaseHTTPRequestHandler):
    bodies: ClassVar[dict[str, bytes]] = {}
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:  # the only method the budget may use
        self.seen.append(f"GET {self.path}")
        body = self.bodies.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body or b'{"error":"not found"}')

    def do_POST(self) -> None:  # a POST (/api/generate, /api/show…) is never sent: it is recorded and refused
        self.seen.append(f"POST {self.path}")
        self.send_response(405)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def fake_ollama() -> Iterator[tuple[str, list[str]]]:
    class Handler(_Fake):
        bodies: ClassVar[dict[str, bytes]] = {"/api/ps": (API / "ps-seed-budget.json").read_bytes(),
                                              "/api/tags": (API / "tags-seed-budget.json").read_bytes()}
        seen: ClassVar[list[str]] = []

    server = ThreadingHTTPServer(("127.0.0.2", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.2:{server.server_address[1]}", Handler.seen
    finally:
        server.shutdown()
        server.server_close()


def _doc(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["budget", "--json", *args]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def test_live_budget_equals_the_logs_for_the_same_models(fake_ollama: tuple[str, list[str]],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    url, seen = fake_ollama
    live = _doc(capsys, "--memory", "78", "--ollama", url)
    logged = _doc(capsys, "--memory", "78", str(SEED))
    live_models = {m["model"]: m for m in live["models"]}
    log_models = {m["model"]: m for m in logged["models"]}
    # /api/ps lists the two resident models with their total; /api/tags all four with their files' size.
    for name in ("workhorse:35b-q4", "vision:27b-q8"):
        assert live_models[name]["total_bytes"] == log_models[name]["total_bytes"]
        assert live_models[name]["evidence"]["total"]["endpoint"] == f"{url}/api/ps"
    for name in log_models:
        assert live_models[name]["weights_bytes"] == log_models[name]["weights_bytes"], name
        assert live_models[name]["evidence"]["weights"]["estimated"] is True  # files on disk, not memory
    pair = next(p for p in live["pairs"] if {p["a"], p["b"]} == {"workhorse:35b-q4", "vision:27b-q8"})
    log_pair = next(p for p in logged["pairs"] if {p["a"], p["b"]} == {"workhorse:35b-q4", "vision:27b-q8"})
    assert (pair["fits"], pair["margin_bytes"]) == (log_pair["fits"], log_pair["margin_bytes"]) == (True, 27 << 30)
    # Only the endpoints that never load a model were asked.
    assert set(seen) == {"GET /api/ps", "GET /api/tags"}


def test_live_and_log_together_keep_the_logs_evidence_first(fake_ollama: tuple[str, list[str]],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    url, _seen = fake_ollama
    doc = _doc(capsys, "--ollama", url, str(SEED))
    workhorse = next(m for m in doc["models"] if m["model"] == "workhorse:35b-q4")
    # The log's own line wins over the endpoint and over the files' size; the swap costs come from the log.
    assert workhorse["evidence"]["total"]["lines"] and workhorse["evidence"]["total"]["endpoint"] is None
    assert workhorse["load_s_median"] == 9.1
    assert doc["usable_bytes"] == 78 << 30


def test_no_server_answering_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on: bound here, never listening
        s.bind(("127.0.0.3", 0))
        port = s.getsockname()[1]
        assert main(["budget", "--ollama", f"http://127.0.0.3:{port}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ietop: error: no Ollama server answered") and err.count("\n") == 1


@pytest.mark.parametrize(("args", "says"), [
    ([], "give a log PATH, an --ollama URL, or both"),
    (["--memory", "lots", str(SEED)], "not a number of GiB"),
    (["--memory", "nan", str(SEED)], "GiB must be between"),
    (["--ollama", "127.0.0.1:11434"], "give a URL"),
    (["/nonexistent/server.log"], "/nonexistent/server.log"),
])
def test_usage_errors_are_one_line_and_exit_2(args: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["budget", *args])
    except SystemExit as exc:  # argparse's own errors (a bad --memory) exit from inside the parser
        code = exc.code  # type: ignore[assignment]
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert says in err[-1] and "Traceback" not in "\n".join(err)


def test_the_text_report_states_the_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["budget", str(SEED)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usable model memory: 78.0 GiB")
    assert "workhorse:35b-q4 + vision:27b-q8 fit together (51.0 GiB of 78.0): yes" in out
    assert "reasoner:120b-q4 runs alone: it fits beside no other model" in out
    assert "embedder:0.3b loads on demand" in out
    assert "seed-budget.log:" in out  # each total names its line
