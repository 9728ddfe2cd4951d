"""A megabyte of vLLM records glued on one line (lost newlines; found by bench/fuzz_campaign.py: 8,000 glued
DEBUG records took 16 s, 1,500 stats records overflowed the stack). Read as the same records one per line."""

from __future__ import annotations

import time

from parsers.events import EngineStats
from parsers.vllm.log import VllmParser

STATS = ("INFO 01-22 18:27:20 metrics.py:449] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
         "41.7 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 2.0%, "
         "CPU KV cache usage: 0.0%. ")
DEBUG = ("(Worker pid=27498) DEBUG 12-01 21:48:54 [v1/worker/gpu_model_runner.py:4064] ubatch_slices: None, "
         "ubatch_slices_padded: None")


def _stats(parser: VllmParser, lines: list[str]) -> list[EngineStats]:
    return [e for n, text in enumerate(lines, 1) for e in parser.parse(n, text) if isinstance(e, EngineStats)]


def test_glued_stats_are_every_record() -> None:
    glued = _stats(VllmParser(year=2025), [STATS * 1500])
    apart = _stats(VllmParser(year=2025), [STATS.strip()] * 1500)
    assert len(glued) == len(apart) == 1500
    assert [(e.running, e.kv_usage) for e in glued] == [(e.running, e.kv_usage) for e in apart]


def test_a_megabyte_of_glued_debug_records() -> None:
    parser = VllmParser(year=2025)
    line = DEBUG * 8500  # 1 MB; read record by record, each record's search scanned the rest of the line
    assert parser.parse(1, line) == []


def test_user_text_after_a_head_is_not_cut() -> None:
    """`Received request …`: the prompt is the user's text; a record head inside it is not a record."""
    prompt = "x" * 70_000 + " INFO 01-22 18:27:20 metrics.py:449] not a record"
    line = f"INFO 01-22 18:27:19 logger.py:39] Received request chatcmpl-1: prompt: '{prompt}', params: x"
    events = VllmParser(year=2025).parse(1, line)
    assert not any(isinstance(e, EngineStats) for e in events)


def test_a_megabyte_of_progress_bars_joined_by_carriage_returns() -> None:
    """tqdm redraws with \\r: a download is one line of thousands of bars. The noise pattern scanned to the end
    of the line and back from each `%|` (minutes for a megabyte; found by bench/fuzz_campaign.py)."""
    bar = "Fetching -" + "9" * 400 + " files: -" + "9" * 400 + "%|" + "_" * 130 + "| -" + "9" * 400 + "\r"
    line = bar * (1_000_000 // len(bar))
    from parsers.vllm.lines import noise_kind

    assert noise_kind(line) is None
    assert noise_kind("Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.2s/it]") == "noise"


def _seconds(line: str) -> float:
    t0 = time.perf_counter()
    VllmParser(year=2025).parse(1, line)
    return time.perf_counter() - t0


def test_init_engine_records_without_a_number_are_read_in_linear_time() -> None:
    """Found by bench/fuzz_campaign.py (run 5): `init engine \\(.*?\\) took N` scanned from every "init engine ("
    to the end of the line when no number followed, so a 1.1 MB line of them (digits mutated to `1_000`) took
    73 s. A ratio against the same line a quarter as long, measured here (a deadline would fail on a busy
    machine): a linear reader takes ~4x, the quadratic one ~16x."""
    record = ("INFO 1_0001_0001_000 1_000:1_000:1_000 core.py:1_000] init engine (profile, create kv cache, "
              "warmup model) took 1_000 seconds")
    small, large = record * 500, record * 2000
    best = [min(_seconds(line) for _ in range(3)) for line in (small, large)]
    assert best[1] < max(0.05, 8 * best[0]), best
    # The record as vLLM writes it still gives its figure.
    real = VllmParser(year=2025).parse(1, "INFO 11-29 15:51:49 [core.py:210] init engine (profile, create kv "
                                           "cache, warmup model) took 2.20 seconds")
    assert [(getattr(e, "key", None), getattr(e, "value", None)) for e in real][:1] == [("init_engine_s", 2.2)]
