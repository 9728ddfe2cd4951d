"""MLX engine state and residency beyond what the real logs show: RSS steps, the zombie, poll answers.

Poll answers are the recorded shapes of reference/mlx-formats.md §7 (`{"status": "ok"}`, the 503 of
0.32.2 after a thread death, the empty 200 of `/v1/models` without an HF cache); the RSS samples are
SYNTHETIC, sized like the run in RUN.md (95 MB idle, 1.53 GB with the 1.38 GB model).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ietop.model.store import ListSink, Store
from parsers import events as ev
from parsers.api.engine_api import mlx_health, mlx_models

MB = 1 << 20
T0 = datetime(2026, 11, 29, 15, 0, 0)


def store_with_mlx() -> tuple[Store, ListSink, int]:
    sink = ListSink()
    store = Store(sink)
    return store, sink, store.add_source("server.stderr", "mlx")


def test_health_answers_are_states() -> None:
    assert mlx_health("h", T0, 200, b'{"status": "ok"}', None).state == "up"
    assert mlx_health("h", T0, 503, b'{"status": "unavailable"}', None).state == "dead"
    assert mlx_health("h", T0, None, b"", "refused").state == "down"
    assert mlx_health("h", T0, None, b"", "timeout").detail == "timeout"
    assert mlx_health("h", T0, 200, b"\xff\xfe garbage", None).state == "unknown"
    assert mlx_health("h", T0, 200, b"", None).state == "unknown"


def test_models_empty_200_is_unknown_not_an_error() -> None:
    assert mlx_models("m", T0, 200, b"", None).models is None
    body = b'{"object":"list","data":[{"id":"/tmp/tinymlx","object":"model","created":1}]}'
    assert mlx_models("m", T0, 200, body, None).models == ("/tmp/tinymlx",)
    assert mlx_models("m", T0, None, b"", "refused").models is None


def test_zombie_generation_thread_died_but_health_ok_is_dead() -> None:
    store, sink, src = store_with_mlx()
    store.apply_poll(1.0, ev.EngineStatus(0, T0, "mlx", "http://127.0.0.1:8080/health", "up", "health ok"))
    assert store.engines["http://127.0.0.1:8080/health"].state == "up"
    store.apply(src, 2.0, ev.ErrorEvent(10, T0, "engine_dead", "generation thread died (Thread-2)"))
    store.apply_poll(3.0, ev.EngineStatus(0, T0, "mlx", "http://127.0.0.1:8080/health", "up", "health ok"))
    state = store.engines["http://127.0.0.1:8080/health"]
    assert state.state == "dead" and "generation thread died" in state.detail
    assert [u.reason for u in _flushed(store, sink, "unload")] == ["crashed"]


def test_rss_step_at_info_is_a_switch_to_an_unnamed_model() -> None:
    store, sink, src = store_with_mlx()
    store.process_sample(src, 10.0, 95 * MB, True)
    store.process_sample(src, 11.0, 100 * MB, True)  # noise, not a step
    store.process_sample(src, 12.0, 1530 * MB, True)  # a 1.38 GB model came in
    loads = _flushed(store, sink, "load")
    assert len(loads) == 1 and loads[0].model is None and loads[0].rss_step == 1430 * MB
    unloads = sink.records["unload"]
    assert unloads[0].reason == "switched" and unloads[0].model == "default"


def test_rss_step_confirms_a_logged_switch() -> None:
    store, sink, src = store_with_mlx()
    store.process_sample(src, 9.0, 1530 * MB, True)
    store.apply(src, 10.0, ev.RequestBody(1, T0, "/tmp/tinymlx2", False, 8))
    store.apply(src, 10.2, ev.Admission(2, T0, 0, 0.0))
    store.process_sample(src, 10.5, 130 * MB, True)  # the old model freed
    loads = _flushed(store, sink, "load")
    assert loads[0].model == "/tmp/tinymlx2" and loads[0].duration_s == 0.2
    assert loads[0].rss_step == -1400 * MB


def _flushed(store: Store, sink: ListSink, kind: str) -> list[Any]:
    store.flush()
    return list(sink.records.get(kind, []))
