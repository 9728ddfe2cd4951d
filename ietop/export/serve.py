"""`ietop export`: the dashboard's sources, feeds, pollers, store and hints, headless, served as Prometheus metrics.

One asyncio loop owns the store (its single writer, as the dashboard's main thread is): the feeds read their logs
on threads and hand batches over; polls run on the loop; host and GPU sampling runs on a thread. `/metrics` is
served by prometheus-client's WSGI server on its own thread, whose collector asks the loop for the families and
waits for them, so a scrape never reads the store while it changes. SIGTERM and SIGINT stop everything and exit 0.
No Textual import anywhere on this path (tests/test_architecture.py keeps it so).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any

from ietop.export.view import ExportView
from ietop.model.store import Store
from ietop.pipeline.feeds import Batch, Evidence, TailFeed

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from ietop.pipeline.discover import Plan
    from ietop.pipeline.hardware import Hardware

READ_BACK_BYTES = 256 << 20
"""How far back each log is read at start, to the server's current run's first line: the counters' totals are the
run's. A run longer than this is counted from that far back (its `_created` then says where counting began)."""
INFLIGHT = 4
"""Batches a feed may hand over before the loop applied them (a long read-back must not queue in memory)."""
SCRAPE_TIMEOUT_S = 10.0


class Exporter:
    """The running exporter. `start()` on the loop, `stop()` from anywhere."""

    def __init__(self, plan: Plan, poll_interval: float = 2.0, read_back: int = READ_BACK_BYTES) -> None:
        from ietop.pipeline.setup import live_feeds

        self.view = ExportView()
        self.store = Store(self.view)
        self.view.attach(self.store)
        self.plan = plan
        self.poll_interval = poll_interval
        self.hardware: Hardware | None = None
        self._stop = threading.Event()
        self._slots = threading.Semaphore(INFLIGHT)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._cache: dict[str, tuple[tuple[int, int, int, bool], bytes]] = {}
        self._done: asyncio.Event | None = None
        # Raises ValueError (a plan that cannot run) before anything starts.
        self.feeds = live_feeds(self.store, Evidence(), plan, _no_stdin, read_back=read_back)
        self._read_back = [(feed, _size(feed.tailer.path)) for feed in self.feeds if isinstance(feed, TailFeed)]
        self.caught_up = not self._read_back
        """Whether every log has been read back to where it ended at start: until then a scrape gets no counters
        (a partial total after a restart would read as a reset to Prometheus, and `increase()` would count the
        whole run again)."""

    # -- the loop's side ---------------------------------------------------------------------------
    def apply(self, batch: Batch) -> None:
        """On the loop: run boundaries first, then the store."""
        view, sources = self.view, self.store.sources
        for src, t, event in batch.items:
            view.saw(src, t, event, sources[src].engine if 0 <= src < len(sources) else "")
        self.store.apply_all(batch.items)
        for src, n in batch.lines.items():
            sources[src].lines = n
        if batch.error:
            print(f"ietop export: {batch.error}", file=sys.stderr)

    async def run(self) -> None:
        self.loop = asyncio.get_running_loop()
        threads = [threading.Thread(target=self._feed, args=(feed,), daemon=True, name="feed") for feed in self.feeds]
        threads.append(threading.Thread(target=self._sample, daemon=True, name="hardware"))
        for thread in threads:
            thread.start()
        poll = asyncio.create_task(self._poll()) if self.plan.endpoints else None
        self._done = asyncio.Event()
        if self._stop.is_set():
            self._done.set()
        try:
            await self._done.wait()  # no wake-ups while idle: stop() sets it
        finally:
            self._stop.set()
            if poll is not None:
                poll.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await poll

    async def _poll(self) -> None:
        from ietop.pipeline.polling import poll_forever

        await poll_forever(lambda: self.store, self.plan.endpoints, self.poll_interval)

    def stop(self) -> None:
        """From a signal handler on the loop or from any thread."""
        self._stop.set()
        loop, done = self.loop, self._done
        if loop is not None and done is not None and not loop.is_closed():
            loop.call_soon_threadsafe(done.set)

    # -- threads -------------------------------------------------------------------------------------
    def _feed(self, feed: Any) -> None:
        def post(batch: Batch) -> None:
            loop = self.loop
            while not self._slots.acquire(timeout=0.25):
                if self._stop.is_set():
                    return
            if loop is None or self._stop.is_set():
                return
            try:
                loop.call_soon_threadsafe(self._applied, batch)
            except RuntimeError:  # the loop closed between the check and the call: stopping anyway
                self._slots.release()

        feed.run(post, self._stop)

    def _applied(self, batch: Batch) -> None:
        try:
            self.apply(batch)
        finally:
            self._slots.release()
        if not self.caught_up:
            if not batch.behind:  # the feed had read everything there was: a file rotated meanwhile counts too
                self._read_back = [(f, size) for f, size in self._read_back if f.tail.src not in batch.lines]
            self._read_back = [(f, size) for f, size in self._read_back if f.tailer.offset < size]
            self.caught_up = not self._read_back

    def _sample(self) -> None:
        from ietop.pipeline.polling import sample_forever

        def post(hardware: Hardware, processes: Any) -> None:
            loop = self.loop
            if loop is not None and not self._stop.is_set():
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: stopping anyway
                    loop.call_soon_threadsafe(self._sampled, hardware, processes)

        sample_forever(lambda: self.store, self.plan.endpoints, self._stop, post)

    def _sampled(self, hardware: Hardware, processes: Any) -> None:
        self.hardware = hardware
        for src, t, rss, alive in processes:
            self.store.process_sample(src, t, rss, alive)

    # -- scrapes (the HTTP server's threads) ----------------------------------------------------------
    def exposition(self, accept: str) -> tuple[bytes, str]:
        """The encoded metrics for a scrape's Accept header (OpenMetrics when asked for), built on the loop."""
        from prometheus_client.exposition import choose_encoder

        encoder, content_type = choose_encoder(accept)
        loop = self.loop
        if loop is None or loop.is_closed():
            return b"", content_type
        future = asyncio.run_coroutine_threadsafe(self._encoded(encoder, content_type), loop)
        try:
            return future.result(timeout=SCRAPE_TIMEOUT_S), content_type
        except FutureTimeout:
            future.cancel()
            return b"", content_type

    async def _encoded(self, encoder: Any, content_type: str) -> bytes:
        from ietop.export.families import families

        # The same bytes again while nothing changed (a scrape every second of an idle engine): the store's
        # version, the view's, the hardware sample and whether the read-back is done. Encoding is most of a
        # scrape's cost (prometheus-client's encoder, ~10 us a series).
        key = (self.store.version, self.view.version, id(self.hardware), self.caught_up)
        cached = self._cache.get(content_type)
        if cached is not None and cached[0] == key:
            return cached[1]
        built = families(self.store, self.view, self.hardware, counters=self.caught_up)
        body: bytes = encoder(_Families(built))
        self._cache[content_type] = (key, body)
        return body


class _Families:
    """A collector for the encoder: the families already built."""

    def __init__(self, built: list[Metric]) -> None:
        self.built = built

    def collect(self) -> list[Metric]:
        return self.built


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0  # a log named before it exists: nothing to read back


def _no_stdin() -> Any:
    return sys.stdin.buffer


def _http_server(exporter: Exporter, host: str, port: int) -> Any:
    """A threading WSGI server answering GET /metrics (and / with a pointer to it); nothing else."""
    import socket
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per scrape on stderr would drown the one line that matters

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        path = environ.get("PATH_INFO", "")
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Allow", "GET, HEAD")])
            return [b""]
        if path not in ("/metrics", "/"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"ietop export serves /metrics\n"]
        if path == "/":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ietop export: metrics at /metrics\n"]
        body, content_type = exporter.exposition(environ.get("HTTP_ACCEPT", ""))
        start_response("200 OK", [("Content-Type", content_type), ("Content-Length", str(len(body)))])
        return [body] if environ.get("REQUEST_METHOD") == "GET" else [b""]

    return make_server(host, port, app, Server, handler_class=Quiet)


def serve(exporter: Exporter, host: str, port: int) -> int:
    """Serve `/metrics` on host:port until SIGTERM/SIGINT; 0 on a clean stop."""
    server = _http_server(exporter, host, port)
    thread = threading.Thread(target=server.serve_forever, daemon=True, name="metrics")
    thread.start()
    bound = server.server_address[1]
    plan = exporter.plan
    sources = [*(f"{e} {u}" for e, u in plan.endpoints), *(f"log {p}" for _e, p in plan.logs),
               *(f"journal {u}" for _e, u in plan.journals), *(f"docker {c}" for _e, c in plan.dockers)]
    shown = f"[{host}]" if ":" in host else host
    print(f"ietop export: serving http://{shown}:{bound}/metrics ({'; '.join(sources) or 'no source'})",
          file=sys.stderr, flush=True)

    loop = asyncio.new_event_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, exporter.stop)
    try:
        loop.run_until_complete(exporter.run())
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        loop.close()
    return 0
