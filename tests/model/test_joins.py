"""The joins of reference/ollama-summary.md ("Load ↔ request"): a load names the request that triggered
it, requests queued behind a load are `cold_load`, an eviction names the model it made room for, and a
truncation or cache-slot line gives the next request its real prompt size.

Real fixtures where the corpus has the case (015, 016, 051); otherwise SYNTHETIC logs written here,
built from real line shapes (012's eviction chain, 015's runner launch) and labelled as synthetic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ietop.analyze.report import Analysis

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ollama"


def analyze(*paths: Path) -> dict[str, list[dict[str, Any]]]:
    an = Analysis([str(p) for p in paths], all_requests=True)  # the probes listed too, as the joins saw them
    try:
        return {key: list(an.spool.records(kind)) for key, kind in
                (("requests", "request"), ("loads", "load"), ("unloads", "unload"), ("truncations", "truncation"))}
    finally:
        an.close()


def test_load_attributed_to_its_trigger_real_015() -> None:
    """S015: `llama runner started in 6.50 seconds`, then the 7.59 s /v1 request that waited for it."""
    doc = analyze(FIXTURES / "015-v011-docker-embeddinggemma-second-load-v1-chat.log")
    first, second = doc["requests"]
    load = doc["loads"][0]
    assert load["ok"] and load["duration_s"] == 6.50
    assert load["trigger_request"]["source"]["line"] == first["source"]["line"]
    assert first["cold_load"] and first["load_s"] == 6.50
    # The second request (343 ms) arrived while the load was finishing: it queued behind it.
    assert second["cold_load"] and 0 < second["load_s"] < 1.0
    assert load["queued_requests"] == 1


def test_load_dominates_real_016() -> None:
    """S016: a 9.40 s generate whose 8.98 s is the runner load."""
    doc = analyze(FIXTURES / "016-v02x-journald-gemma4-vulkan-runner-start.log")
    (req,) = doc["requests"]
    ok = [ld for ld in doc["loads"] if ld["ok"]]
    assert ok[0]["trigger_request"]["source"]["line"] == req["source"]["line"]
    assert req["cold_load"] and req["load_s"] == 8.98


def test_client_abort_during_load_real_051() -> None:
    """S051: the client closed after ~7 s while the model was loading: the failed load names the 499."""
    doc = analyze(FIXTURES / "051-v05-journald-nohost-markdown-bold-abort-499.log")
    (req,) = doc["requests"]
    assert req["status"] == 499
    assert req["cold_load"] is False  # it never got the model
    (load,) = doc["loads"]  # the WARN and the ERROR describe one failed load
    assert load["status"] == "failed" and load["duration_s"] is None
    assert load["trigger_request"]["source"]["line"] == req["source"]["line"]


SYNTH_EVICT = """\
time=2026-08-29T08:18:30.000Z level=INFO source=bench msg="SYNTHETIC ietop test log: 012's eviction chain followed by the load it made room for"
time=2026-08-29T08:18:37.149Z level=INFO source=sched.go:1332 msg="updated VRAM based on existing loaded models" gpu=0 library=Vulkan total="32.3 GiB" available="31.7 GiB"
time=2026-08-29T08:18:37.236Z level=INFO source=sched.go:551 msg="llama-server model predicted to exceed available memory, evicting" predicted="22.1 GiB" predicted_num_ctx=131072 num_batch=512 available="14.8 GiB" gpu_free="31.7 GiB" system_free="14.8 GiB" system_limited=true
time=2026-08-29T08:18:37.236Z level=DEBUG source=sched.go:1686 msg="found an idle runner to unload" runner.name=registry.ollama.ai/library/embeddinggemma:latest runner.size="641.8 MiB" runner.vram="641.8 MiB" runner.parallel=1 runner.pid=80 runner.model=/m/blobs/sha256-0800cbac9c2064dde519420e75e512a83cb360de3ad5df176185dc69652fc515 runner.num_ctx=2048
time=2026-08-29T08:18:37.236Z level=DEBUG source=sched.go:339 msg="resetting model to expire immediately to make room" runner.name=registry.ollama.ai/library/embeddinggemma:latest runner.num_ctx=2048 refCount=0
time=2026-08-29T08:18:37.300Z level=DEBUG source=sched.go:402 msg="sending an unloaded event" runner.name=registry.ollama.ai/library/embeddinggemma:latest
time=2026-08-29T08:18:37.500Z level=INFO source=llama_server.go:433 msg="starting llama-server" cmd="/usr/lib/ollama/llama-server --model /m/blobs/sha256-6540411d9e4ca638983e905959188e1be74db7ff62151c69d71a6f2748584f68 --port 36183 -c 131072 -np 1 --log-verbosity 4"
time=2026-08-29T08:18:52.700Z level=INFO source=llama_server.go:600 msg="llama-server started in 15.20 seconds"
[GIN] 2026/08/29 - 08:18:58 | 200 |   21.123456s |       127.0.0.1 | POST     "/api/chat"
[GIN] 2026/08/29 - 08:18:59 | 200 |   14.500000s |       127.0.0.1 | POST     "/api/chat"
[GIN] 2026/08/29 - 08:19:30 | 200 |    1.000000s |       127.0.0.1 | POST     "/api/chat"
"""


def test_eviction_names_the_model_it_made_room_for(tmp_path: Path) -> None:
    log = tmp_path / "evict.log"
    log.write_text(SYNTH_EVICT)
    doc = analyze(log)
    (unload,) = doc["unloads"]
    assert unload["reason"] == "evicted"
    assert unload["model"] == "embeddinggemma:latest"
    assert unload["num_ctx"] == 2048
    assert unload["for_model"] == "sha256-6540411d9e4c"
    (load,) = doc["loads"]
    assert load["model"] == "sha256-6540411d9e4c" and load["ctx"] == 131072 and load["parallel"] == 1
    # The episode starts at its first line (updated VRAM), so the eviction is part of the load.
    assert load["time"].startswith("2026-08-29T08:18:37.149")
    trigger, queued, warm = doc["requests"]
    assert load["trigger_request"]["source"]["line"] == trigger["source"]["line"]
    assert trigger["cold_load"] and trigger["load_s"] == 15.2
    assert queued["cold_load"] and queued["load_s"] is not None and queued["load_s"] < 15.2
    assert not warm["cold_load"] and warm["load_s"] is None


SYNTH_TRUNC = """\
time=2025-06-10T21:00:00.000+02:00 level=INFO source=bench msg="SYNTHETIC ietop test log: truncations then the requests they belong to"
time=2025-06-10T21:00:01.000+02:00 level=WARN source=runner.go:128 msg="truncating input prompt" limit=512 prompt=617 keep=4 new=512
time=2025-06-10T21:00:01.100+02:00 level=DEBUG source=cache.go:104 msg="loading cache slot" id=0 cache=0 prompt=512 used=100 remaining=412
[GIN] 2025/06/10 - 21:00:09 | 200 |  8.500000s |       127.0.0.1 | POST     "/api/chat"
[GIN] 2025/06/10 - 21:00:10 | 200 |   1.000000ms |       127.0.0.1 | GET      "/api/tags"
time=2025-06-10T21:00:20.000+02:00 level=DEBUG source=cache.go:104 msg="loading cache slot" id=0 cache=0 prompt=300 used=0 remaining=300
[GIN] 2025/06/10 - 21:00:25 | 200 |  5.000000s |       127.0.0.1 | POST     "/api/chat"
"""


def test_truncation_and_cache_slot_give_real_prompt_size(tmp_path: Path) -> None:
    log = tmp_path / "trunc.log"
    log.write_text(SYNTH_TRUNC)
    doc = analyze(log)
    first, tags, second = doc["requests"]
    assert first["truncated"] and first["prompt_tokens"] == 617 and first["prompt_tokens_source"] == "truncation"
    assert first["cached_tokens"] == 100 and first["prefill_tokens"] == 412
    assert first["time"] == "2025-06-10T21:00:09+02:00"  # GIN's zone-less clock took the slog offset
    assert not tags["inference"] and tags["prompt_tokens"] is None
    assert not second["truncated"] and second["prompt_tokens"] == 300 and second["prompt_tokens_source"] == "log"
