"""Several hosts in one dashboard (issue 24 item 6): `--ollama` URLs on two machines, here two loopback fakes
on 127.0.0.2 and 127.0.0.3 answering the real live app's polls. Residency says which host each model is on
(a `host` column, rows grouped by it) and Memory what each host holds, instead of one budget of this host's
devices over models that are not on it. With one host neither panel changes (the incident's snapshots).

The fakes serve recorded `/api/ps` bodies (fixtures/ollama/api/README.md: ps-v0.10-two-models.json on one host,
ps-seed-budget.json on the other) with `expires_at` moved to the year 2318, as `keep_alive: -1` sets it
(ps-keep-alive-forever.json), so the countdown reads "forever" whenever the test runs.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from rich.console import Group
from rich.text import Text
from textual.pilot import Pilot

from ietop.cli import build_parser
from ietop.cli_config import parse
from ietop.model.snapshot import ResidentRow
from ietop.model.timeline import host_port
from ietop.pipeline.discover import plan
from ietop.tui.app import IetopApp
from ietop.tui.run import live_app, replay_app
from ietop.tui.widgets.engines import EnginesBar
from ietop.tui.widgets.memory import MemoryPanel
from ietop.tui.widgets.residency import ResidencyTable, by_host, several_hosts
from tests.tui.support import INCIDENT, ROOT, moment, replay_settled, until

API = ROOT / "fixtures" / "ollama" / "api"
FOREVER = json.loads((API / "ps-keep-alive-forever.json").read_text())["models"][0]["expires_at"]
HOSTS = {"127.0.0.2": "ps-v0.10-two-models.json", "127.0.0.3": "ps-seed-budget.json"}
MODELS = {("llama3.2:latest", "127.0.0.2"), ("qwen2.5:0.5b", "127.0.0.2"), ("vision:27b-q8", "127.0.0.3"),
          ("workhorse:35b-q4", "127.0.0.3")}
"""(model, host) as the Residency panel must show them."""


def _ps_body(name: str) -> bytes:
    doc = json.loads((API / name).read_text())
    for m in doc["models"]:
        m["expires_at"] = FOREVER
    return json.dumps(doc).encode()


class _Fake(BaseHTTPRequestHandler):
    """GET /api/ps and /api/version answer; anything else is refused and recorded."""

    bodies: ClassVar[dict[str, bytes]] = {}
    refused: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        body = self.bodies.get(self.path)
        if body is None:
            self.refused.append(f"GET {self.path}")
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body or b"{}")))
        self.end_headers()
        self.wfile.write(body or b"{}")

    def do_POST(self) -> None:  # nothing ietop polls may load a model
        self.refused.append(f"POST {self.path}")
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def engines() -> Iterator[tuple[dict[str, str], list[str]]]:
    """host → URL of a fake Ollama on each of 127.0.0.2 and 127.0.0.3, and what they refused."""
    refused: list[str] = []
    servers = []
    try:
        for host, ps in HOSTS.items():
            class Handler(_Fake):
                bodies: ClassVar[dict[str, bytes]] = {"/api/ps": _ps_body(ps),
                                                      "/api/version": (API / "version-0.12.3.json").read_bytes()}

            Handler.refused = refused
            try:
                server = ThreadingHTTPServer((host, 0), Handler)
            except OSError as exc:  # macOS configures 127.0.0.1 alone on lo0
                pytest.skip(f"cannot listen on {host}: {exc}")
            servers.append(server)
            threading.Thread(target=server.serve_forever, daemon=True).start()
        yield {host: f"http://{host}:{s.server_port}" for host, s in zip(HOSTS, servers, strict=True)}, refused
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def _app(urls: list[str]) -> IetopApp:
    """The live dashboard as `ietop --ollama URL --ollama URL` builds it, polling every 0.2 s, with no sampling
    of this machine (its memory would be in the picture)."""
    app = live_app(plan(urls, [], [], [], [], []), poll_interval=0.2)
    app.setup.hardware = False
    return app


def _shown(table: ResidencyTable) -> set[tuple[str, str]]:
    return {(table.cell_text(i, 0), table.cell_text(i, 1)) for i in range(table.row_count)}


def _memory_lines(app: IetopApp) -> list[str]:
    content = app.query_one(MemoryPanel).content
    assert isinstance(content, Group)
    return [t.plain for t in content.renderables if isinstance(t, Text)]


async def _both_hosts(pilot: Pilot[None]) -> None:
    table = pilot.app.query_one(ResidencyTable)
    await until(pilot, lambda: _shown(table) == MODELS)
    await pilot.pause()


def test_the_config_file_lists_both_hosts(tmp_path: Path) -> None:
    """`ollama = [...]` at the file's top level is `--ollama` given twice: both reach the plan."""
    path = tmp_path / "config.toml"
    path.write_text('ollama = ["http://127.0.0.2:11434", "127.0.0.3:11434"]\n')
    args = parse(build_parser(), ["--config", str(path)], lambda _: False)
    p = plan(args.ollama, args.vllm, args.mlx, args.log, args.journal, args.docker, proxy=args.proxy,
             proxy_upstream=args.proxy_upstream)
    assert p.endpoints == [("ollama", "http://127.0.0.2:11434"), ("ollama", "http://127.0.0.3:11434")]
    assert not p.discovered and not p.logs  # listed: nothing guessed besides


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_two_hosts_each_with_its_models(engines: tuple[dict[str, str], list[str]],
                                              size: tuple[int, int]) -> None:
    urls, refused = engines
    app = _app(list(urls.values()))
    async with app.run_test(size=size) as pilot:
        await _both_hosts(pilot)
        table = app.query_one(ResidencyTable)
        # Grouped by host, the host's name on each row; at 80 columns it outlasts every other optional column.
        assert [table.cell_text(i, 1) for i in range(4)] == ["127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"]
        assert "host" not in table.hidden and "host" not in table.absent
        assert {r.host for r in table.resident} == {urls[h].removeprefix("http://") for h in HOSTS}
        lines = _memory_lines(app)
        # 5432852480 + 1221157120 bytes; 31138512896 + 23622320128 bytes: what each host's /api/ps lists.
        start = lines.index("resident per host:")
        assert lines[start + 1 : start + 3] == ["127.0.0.2: 6.2 GiB", "127.0.0.3: 51.0 GiB"]
        assert not any(line.startswith("budget") for line in lines)  # no one gauge over both hosts
        assert all(len(line) <= app.query_one(MemoryPanel).content_size.width for line in lines)
    assert refused == []


async def test_one_host_reads_as_before(engines: tuple[dict[str, str], list[str]]) -> None:
    urls, _ = engines
    app = _app([urls["127.0.0.2"]])
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(ResidencyTable)
        await until(pilot, lambda: table.row_count == 2 and table.cell_text(0, 0) != "nothing resident")
        assert "host" in table.absent and "host" not in table.hidden  # not offered as "+1 col when wider"
        assert {table.cell_text(i, 1) for i in range(2)} == {""}
        assert not any("per host" in line for line in _memory_lines(app))


async def test_a_logs_rows_are_on_the_address_it_listens_on() -> None:
    """incident.log line 5: `Listening on 127.0.0.1:11434 (version 0.32.13)`."""
    app = replay_app([str(INCIDENT)], 0, until=moment())
    app.setup.hardware = False
    async with app.run_test(size=(120, 40)) as pilot:
        await replay_settled(pilot)
        assert app.snap is not None and app.snap.resident
        assert {r.host for r in app.snap.resident} == {"127.0.0.1:11434"}


@pytest.mark.parametrize(("address", "listen", "expected"), [
    ("http://127.0.0.2:11434", False, "127.0.0.2:11434"),
    ("http://localhost:11434/", False, "127.0.0.1:11434"),  # this host under another name: one host
    ("http://0.0.0.0:11434", False, "127.0.0.1:11434"),  # polled there, it is this host
    ("https://gpu-box.lan", False, "gpu-box.lan:443"),
    ("127.0.0.1:11434", True, "127.0.0.1:11434"),  # Ollama's `Listening on ADDR`
    ("[::]:11434", True, None),  # listening everywhere: the line does not say which machine wrote it
    ("http://0.0.0.0:8000", True, None),  # vLLM's `Starting vLLM API server on URL`
    ("[fe80::1]:11434", True, "[fe80::1]:11434"),
    ("http://[::1", False, None),
    (None, True, None),
])
def test_host_port(address: str | None, listen: bool, expected: str | None) -> None:
    assert host_port(address, listen=listen) == expected


def test_one_machine_is_one_host() -> None:
    """Ollama and vLLM on one machine (two ports) are one host: nothing changes; an unknown host counts for none."""
    one = [ResidentRow("ollama", "a", "api/ps", host="127.0.0.1:11434"),
           ResidentRow("vllm", "b", "models", host="127.0.0.1:8000"), ResidentRow("mlx", "c", "process")]
    assert not several_hosts(one)
    two = [ResidentRow("ollama", "a", "api/ps", host="gpu-b:11434"), ResidentRow("mlx", "c", "process"),
           ResidentRow("ollama", "b", "api/ps", host="gpu-a:11434")]
    assert several_hosts(two) and [r.model for r in by_host(two)] == ["b", "a", "c"]


async def _both_hosts_still(pilot: Pilot[None]) -> None:
    """Both hosts shown, then the view held (`p`), and the header's endpoints drawn in a fixed order with the
    fakes' ports (the kernel's choice) as PORT: the rest of the picture is the dashboard's own."""
    await _both_hosts(pilot)
    await pilot.press("p")
    app = pilot.app
    assert isinstance(app, IetopApp) and app.snap is not None and app.paused
    engines = sorted(app.snap.engines, key=lambda e: e.endpoint)
    masked = replace(app.snap, engines=tuple(
        replace(e, endpoint=e.endpoint.rsplit(":", 1)[0] + ":PORT") for e in engines))
    app.query_one(EnginesBar).show(masked, app._status_text())
    await pilot.pause()


def test_two_hosts_snapshot(snap_compare: Any, engines: tuple[dict[str, str], list[str]]) -> None:
    urls, _ = engines
    assert snap_compare(_app(list(urls.values())), terminal_size=(120, 40), run_before=_both_hosts_still)

