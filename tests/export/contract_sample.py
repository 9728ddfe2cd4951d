"""A SYNTHETIC exposition of every metric in the `ietop export` contract (/tmp/w/export_contract.md, DESIGN.md
"Metrics for fleets"), built with prometheus-client as the exporter will be, for checking the examples
(examples/) before the exporter exists: names, types and label names are the contract's; the values are made up.

tests/export/test_prometheus_real.py checks the real exporter's output; this file only stands in for it.
Run as a script (`python contract_sample.py PORT`) it serves the sample on 127.0.0.1:PORT/metrics until SIGTERM.
"""

from __future__ import annotations

import signal
import sys
import time
from types import FrameType

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, start_http_server

OLLAMA = ("ollama", "127.0.0.1:11434")
VLLM = ("vllm", "127.0.0.1:8000")
CHAT, EMBED, VLLM_MODEL = "qwen3:8b", "nomic-embed-text:latest", "Qwen/Qwen3-0.6B"
TOKEN_BUCKETS = (16, 64, 256, 1024, 4096, 16384, 65536, 262144)


def build() -> CollectorRegistry:
    """A registry holding one or more series of every contract metric."""
    reg = CollectorRegistry()
    engine = ["engine", "instance"]
    model = [*engine, "model"]

    up = Gauge("ietop_engine_up", "1 when the engine answers", engine, registry=reg)
    up.labels(*OLLAMA).set(1)
    up.labels(*VLLM).set(1)
    resident = Gauge("ietop_model_resident", "1 per resident model", model, registry=reg)
    size = Gauge("ietop_model_size_bytes", "resident model's size", model, registry=reg)
    for eng, name, nbytes in (
        (OLLAMA, CHAT, 6_300_000_000),
        (OLLAMA, EMBED, 850_000_000),
        (VLLM, VLLM_MODEL, 1_200_000_000),
    ):
        resident.labels(*eng, name).set(1)
        size.labels(*eng, name).set(nbytes)

    loads = Counter("ietop_model_loads", "loads", [*model, "outcome"], registry=reg)
    loads.labels(*OLLAMA, CHAT, "ok").inc(3)
    loads.labels(*OLLAMA, EMBED, "ok").inc(2)
    loads.labels(*OLLAMA, CHAT, "failed").inc()
    load_seconds = Histogram(
        "ietop_model_load_seconds",
        "ok load durations",
        model,
        registry=reg,
        buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300),
    )
    for seconds in (4.2, 3.9, 5.1):
        load_seconds.labels(*OLLAMA, CHAT).observe(seconds)
    unloads = Counter("ietop_model_unloads", "unloads", [*model, "reason"], registry=reg)
    unloads.labels(*OLLAMA, CHAT, "evicted").inc(2)
    unloads.labels(*OLLAMA, EMBED, "expired").inc()
    evictions = Counter("ietop_evictions", "unloads that made room", [*model, "for_model"], registry=reg)
    evictions.labels(*OLLAMA, CHAT, EMBED).inc(2)
    evictions.labels(*OLLAMA, EMBED, "").inc()

    requests = Counter("ietop_requests", "inference requests", [*model, "status"], registry=reg)
    requests.labels(*OLLAMA, CHAT, "200").inc(40)
    requests.labels(*OLLAMA, CHAT, "499").inc()
    requests.labels(*VLLM, VLLM_MODEL, "200").inc(25)
    Counter("ietop_cold_load_requests", "requests that waited for a load", model, registry=reg).labels(
        *OLLAMA, CHAT
    ).inc(3)
    Counter("ietop_prompt_truncations", "prompts cut to fit", model, registry=reg).labels(*OLLAMA, CHAT).inc(2)
    histograms = (
        ("ietop_request_prompt_tokens", TOKEN_BUCKETS, (1200, 4096, 350)),
        ("ietop_request_output_tokens", TOKEN_BUCKETS, (80, 512, 33)),
        ("ietop_request_duration_seconds", Histogram.DEFAULT_BUCKETS, (1.4, 7.5, 0.6)),
        ("ietop_time_to_first_token_seconds", Histogram.DEFAULT_BUCKETS, (0.08, 4.4, 0.12)),
        ("ietop_inter_token_latency_seconds", (0.005, 0.01, 0.02, 0.05, 0.1, 0.25), (0.012, 0.018, 0.011)),
    )
    for name, buckets, values in histograms:
        hist = Histogram(name, name, model, buckets=buckets, registry=reg)
        for value in values:
            hist.labels(*OLLAMA, CHAT).observe(value)
            hist.labels(*VLLM, VLLM_MODEL).observe(value)

    errors = Counter("ietop_errors", "errors by kind", [*engine, "kind"], registry=reg)
    errors.labels(*OLLAMA, "client_abort").inc()
    Gauge("ietop_setting_mismatch", "configured value not in effect", [*engine, "setting"], registry=reg).labels(
        *OLLAMA, "context_length"
    ).set(1)
    hints = Gauge("ietop_hint_active", "1 per active hint", ["id", "severity", *engine], registry=reg)
    hints.labels("eviction-thrash", "warn", *OLLAMA).set(1)
    hints.labels("prompt-truncated", "warn", *OLLAMA).set(1)
    Gauge("ietop_requests_waiting", "queue depth", engine, registry=reg).labels(*VLLM).set(2)

    gpu_total = Gauge("ietop_gpu_memory_total_bytes", "GPU memory", ["gpu", "name"], registry=reg)
    gpu_used = Gauge("ietop_gpu_memory_used_bytes", "GPU memory in use", ["gpu", "name"], registry=reg)
    gpu_total.labels("0", "NVIDIA GeForce RTX 4090").set(25_757_220_864)
    gpu_used.labels("0", "NVIDIA GeForce RTX 4090").set(8_400_000_000)
    Gauge("ietop_host_memory_total_bytes", "host memory", registry=reg).set(67_108_864_000)
    Gauge("ietop_host_memory_used_bytes", "host memory in use", registry=reg).set(21_474_836_480)
    Counter("ietop_log_lines", "lines read", ["source"], registry=reg).labels("journal:ollama").inc(5000)
    Counter("ietop_log_unparsed_lines", "lines not parsed", ["source"], registry=reg).labels("journal:ollama").inc(12)
    return reg


def exposition() -> bytes:
    """The sample in the Prometheus text format (what `promtool check metrics` reads)."""
    return generate_latest(build())


def _stop(_signum: int, _frame: FrameType | None) -> None:
    sys.exit(0)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, _stop)
    server, thread = start_http_server(int(argv[1]), addr="127.0.0.1", registry=build())
    try:
        while thread.is_alive():
            time.sleep(0.5)
    finally:
        server.shutdown()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
