"""`ietop proxy` abused, at a small scale: a real proxy process (``run_proxy``) in front of a fake engine.

The scenarios are bench/proxy_abuse.py's (which runs them at a large scale and reports figures): slowloris
heads, stalled and slow bodies, a few hundred idle connections (more than the cap on waiting connections),
a 64 MB body, clients leaving mid-stream, the upstream resetting mid-stream, concurrent streams. After each,
what must hold:

- the proxy process is alive and a normal request is served correctly;
- its descriptors stayed bounded during the scenario (by what the scenario legitimately holds: the cap on
  waiting connections, two per stream in progress) and are back to the baseline afterwards;
- its peak RSS stays within a quarter of the huge body's size of the baseline (held whole, a body costs
  twice its size), both measured on the proxy process in this run.

Short limits (1 s head timeout and body idle time, 64 waiting connections) so the defences act within the
run; the whole module takes ~25 s.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.bench_support import load_script

BENCH = Path(__file__).resolve().parents[2] / "bench" / "proxy_abuse.py"
MB = 1 << 20

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="reads the proxy's /proc entries")


abuse = load_script(BENCH, "proxy_abuse")
SCALE = abuse.SMALL
SLACK_FDS = 4
"""Beyond what a scenario holds: the normal request's two connections, one being closed, one spare."""


@dataclasses.dataclass(frozen=True)
class Baseline:
    fds: int
    rss: int


@pytest.fixture(scope="module")
def engine() -> Iterator[Any]:
    with abuse.Engine() as fake:
        yield fake


@pytest.fixture(scope="module")
def proxy(engine: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    running = abuse.Proxy(engine.url, SCALE, tmp_path_factory.mktemp("abuse") / "proxy.jsonl")
    try:
        yield running
    finally:
        stderr = running.stop()
        assert "Traceback" not in stderr, stderr


@pytest.fixture(scope="module")
def baseline(proxy: Any) -> Baseline:
    import asyncio

    for _ in range(3):
        assert asyncio.run(abuse.normal_request(proxy.url))
    time.sleep(1.5)  # the engine closes idle kept connections after 1 s: the baseline is the idle proxy
    return Baseline(proxy.fds(), proxy.memory()["VmRSS"])


async def assert_healthy(proxy: Any, baseline: Baseline, sampler: Any, holds: int) -> None:
    """The invariants after a scenario that legitimately held ``holds`` descriptors at most."""
    assert proxy.alive()
    assert await abuse.normal_request(proxy.url), "a normal request after the abuse was not served correctly"
    assert sampler.peak_fds - baseline.fds <= holds + SLACK_FDS, (sampler.peak_fds, baseline)
    assert await abuse.settle(proxy, baseline.fds + 1) <= baseline.fds + 1
    assert proxy.memory()["VmHWM"] - baseline.rss < SCALE.body_mb * MB // 4


async def test_slowloris_heads_are_closed(proxy: Any, baseline: Baseline) -> None:
    with abuse.Sampler(proxy) as sampler:
        result = await abuse.slowloris(proxy.url, SCALE.slowloris, SCALE.head_timeout_s)
    assert result["closed_by_proxy"] == SCALE.slowloris and result["served_meanwhile"], result
    await assert_healthy(proxy, baseline, sampler, holds=SCALE.slowloris)


async def test_stalled_bodies_are_cut_and_slow_ones_served(proxy: Any, baseline: Baseline) -> None:
    with abuse.Sampler(proxy) as sampler:
        result = await abuse.slow_bodies(proxy.url, SCALE.slow_bodies, SCALE.body_idle_s)
    assert result["cut_by_proxy"] == SCALE.slow_bodies, result
    assert result["steady_served"] == SCALE.slow_bodies, result
    await assert_healthy(proxy, baseline, sampler, holds=2 * SCALE.slow_bodies)


async def test_idle_connections_are_capped_and_a_request_gets_through(proxy: Any, baseline: Baseline) -> None:
    assert SCALE.idle > 4 * SCALE.max_waiting  # enough to prove the cap
    with abuse.Sampler(proxy) as sampler:
        result = await abuse.idle_connections(proxy, SCALE.idle, 0)
    assert result["opened"] == SCALE.idle and result["served_meanwhile"], result
    assert result["proxy_fds_while_held"] - result["proxy_fds_before"] <= SCALE.max_waiting, result
    await assert_healthy(proxy, baseline, sampler, holds=SCALE.max_waiting)


async def test_huge_body_is_streamed_with_flat_memory(proxy: Any, baseline: Baseline) -> None:
    with abuse.Sampler(proxy) as sampler:
        result = await abuse.huge_body(proxy, SCALE.body_mb)
    assert result["served"], result
    assert result["peak_rss_growth_mb"] < SCALE.body_mb / 4, result
    await assert_healthy(proxy, baseline, sampler, holds=2)


async def test_clients_leaving_mid_stream_cancel_their_upstream_request(proxy: Any, engine: Any,
                                                                       baseline: Baseline) -> None:
    with abuse.Sampler(proxy) as sampler:
        result = await abuse.leaving_clients(proxy.url, engine, SCALE.leaving)
    assert result["left"] == result["cancelled_upstream"] == SCALE.leaving, result
    await assert_healthy(proxy, baseline, sampler, holds=2 * SCALE.leaving)


async def test_upstream_resets_mid_stream_cut_the_client_only(proxy: Any, baseline: Baseline) -> None:
    with abuse.Sampler(proxy) as sampler:
        result = await abuse.upstream_resets(proxy.url, SCALE.resets)
    assert result["cut"] == SCALE.resets, result
    await assert_healthy(proxy, baseline, sampler, holds=2 * SCALE.resets)


async def test_concurrent_streams_all_complete(proxy: Any, baseline: Baseline) -> None:
    with abuse.Sampler(proxy) as sampler:
        result = await abuse.concurrent_streams(proxy.url, SCALE.streams)
    assert result["complete"] == SCALE.streams, result
    await assert_healthy(proxy, baseline, sampler, holds=2 * SCALE.streams)


def test_no_exchange_failed_inside_the_proxy(proxy: Any, baseline: Baseline) -> None:
    """The proxy's own records (its JSONL file): failures are the clients' or the upstream's, never its own."""
    time.sleep(0.1)
    errors = [r["error"] for r in proxy.records() if r.get("error")]
    assert set(errors) <= {"client disconnected", "upstream error"}, errors
