"""vLLM `/metrics` names: one canonical name per meaning across vLLM versions, and the metrics ietop reads.

vLLM renamed several series over its life (reference: vllm-formats.md §8.2). A deprecated name is exposed
next to its replacement for one release, hidden the next (unless `--show-hidden-metrics-for-version`), then
removed; so a scrape may carry the old name, the new name, or both with the same value. Everything past
the parser works on the canonical (newest) name only; `parsers.vllm.prometheus` drops an old-name sample when
the same series is also present under the new name.

Names here are *sample* names as `prometheus_client`'s text parser reports them: a counter's samples end
in `_total` (the parser appends it when an old exposition omitted it), a histogram's in `_bucket`, `_sum`,
`_count`, and `_created` is the client library's creation-time gauge (dropped by the parser).

Standard library only, like every module in `parsers`.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

# Old base name -> canonical base name. A base name is a sample name without its type suffix.
# Sources (vllm-formats.md §8.2): #18354 deprecated the `gpu_` spellings in 0.9.2/0.10 (removed ~0.12);
# #24110 deprecated time_per_output_token_seconds in 0.11 (removed ~0.14; identical buckets and meaning,
# not to be confused with vllm:request_time_per_output_token_seconds, a per-request mean that stays);
# vLLM's own metrics design notes call V0's time_in_queue_requests a duplicate of
# request_queue_time_seconds (both first-scheduled minus arrival), deprecated 0.8, removed ~0.10.
_RENAMES: Final = MappingProxyType(
    {
        "vllm:gpu_cache_usage_perc": "vllm:kv_cache_usage_perc",
        "vllm:gpu_prefix_cache_queries": "vllm:prefix_cache_queries",
        "vllm:gpu_prefix_cache_hits": "vllm:prefix_cache_hits",
        "vllm:time_per_output_token_seconds": "vllm:inter_token_latency_seconds",
        "vllm:time_in_queue_requests": "vllm:request_queue_time_seconds",
    }
)

# Removed without a successor of the same meaning: kept under their own names (no rename), listed so a
# reader knows they were considered. The hit-rate gauges were replaced by queries/hits *counters* (a rate
# over all time, not a windowed one), the throughput gauges by rates of the token counters.
LEGACY_WITHOUT_SUCCESSOR: Final = frozenset(
    {
        "vllm:num_requests_swapped",
        "vllm:cpu_cache_usage_perc",
        "vllm:cpu_prefix_cache_hit_rate",
        "vllm:gpu_prefix_cache_hit_rate",
        "vllm:avg_prompt_throughput_toks_per_s",
        "vllm:avg_generation_throughput_toks_per_s",
        "vllm:model_forward_time_milliseconds",
        "vllm:model_execute_time_milliseconds",
        "vllm:tokens_total",
        "vllm:request_params_best_of",
    }
)

# Suffixes a sample name can carry on top of its base name. `_total` is listed last so that a histogram
# whose base itself ends in `_total` (vllm:iteration_tokens_total) keeps it: `..._total_bucket` is split
# at `_bucket` first.
SUFFIXES: Final = ("_bucket", "_sum", "_count", "_created", "_total")

# The label that tells data-parallel engines apart (V1; V0 has none). Series are shown per engine and
# summed over it.
ENGINE_LABEL: Final = "engine"

# Histograms ietop reads: key -> canonical base name (samples are base + `_bucket`/`_sum`/`_count`).
HISTOGRAMS: Final = MappingProxyType(
    {
        "ttft": "vllm:time_to_first_token_seconds",
        "itl": "vllm:inter_token_latency_seconds",
        "e2e": "vllm:e2e_request_latency_seconds",
        "queue": "vllm:request_queue_time_seconds",
        "prefill": "vllm:request_prefill_time_seconds",
        "decode": "vllm:request_decode_time_seconds",
        "prompt_tokens": "vllm:request_prompt_tokens",
        "generation_tokens": "vllm:request_generation_tokens",
    }
)

# Counters ietop reads: key -> canonical sample name (with `_total`, as prometheus_client reports it).
COUNTERS: Final = MappingProxyType(
    {
        "prompt_tokens": "vllm:prompt_tokens_total",
        "generation_tokens": "vllm:generation_tokens_total",
        "preemptions": "vllm:num_preemptions_total",
        "prefix_cache_queries": "vllm:prefix_cache_queries_total",
        "prefix_cache_hits": "vllm:prefix_cache_hits_total",
        "request_success": "vllm:request_success_total",
    }
)

# Gauges ietop reads: key -> canonical sample name. kv_cache_usage_perc is a 0-1 fraction despite `_perc`.
GAUGES: Final = MappingProxyType(
    {
        "running": "vllm:num_requests_running",
        "waiting": "vllm:num_requests_waiting",
        "kv_cache_usage": "vllm:kv_cache_usage_perc",
    }
)

# Counter base names (without `_total`): a bare base seen in an untyped excerpt or a pre-`_total`
# exposition is the same series as the `_total` sample.
_COUNTER_BASES: Final = frozenset(name.removesuffix("_total") for name in COUNTERS.values())


def split_suffix(name: str) -> tuple[str, str]:
    """(base, suffix) of a sample name; suffix is one of SUFFIXES or ``""``."""
    for suffix in SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)], suffix
    return name, ""


def canonical(name: str) -> str:
    """The canonical sample name for ``name`` (any vLLM version); names ietop does not know pass through.

    The whole name is tried first, then its base with the suffix put back, so a renamed histogram keeps
    `_bucket`/`_sum`/`_count` and a renamed counter keeps `_total`.
    """
    whole = _RENAMES.get(name)
    if whole is not None:
        return _with_total(whole)
    base, suffix = split_suffix(name)
    if suffix:
        new_base = _RENAMES.get(base)
        if new_base is not None:
            return new_base + suffix
    return _with_total(name)


def _with_total(name: str) -> str:
    # A known counter without its suffix: prometheus_client only appends `_total` when the text has a
    # `# TYPE x counter` line, so an untyped excerpt would otherwise name the same series differently.
    return name + "_total" if name in _COUNTER_BASES else name


def is_renamed(name: str) -> bool:
    """True when ``name`` is a legacy spelling that :func:`canonical` maps to another name."""
    return canonical(name) != name
