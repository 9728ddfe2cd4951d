"""The Latency panel's rows when nothing finished inside the window: a log read back on a live dashboard (the
server's run began hours ago) has timed requests, only older than the window. That is `earlier`, not
"no timings in these sources". The log is the bundled incident (Ollama 0.32.13, real lines)."""

from __future__ import annotations

from ietop.pipeline import run_files
from ietop.tui.run import new_store
from tests.tui.support import INCIDENT


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
