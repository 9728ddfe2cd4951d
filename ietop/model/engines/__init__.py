"""Per-engine trackers the store hands an engine's events to: MLX requests rebuilt from a log without request
ids (`mlx`, with `mlx_episode`: what one request's lines may state), vLLM start-up facts, stats and request
logging (`vllm`, with `vllm_join`/`vllm_groups`: which logged request an access line answers). They import the
model's core, never the store, and never another engine's.
"""

from __future__ import annotations
