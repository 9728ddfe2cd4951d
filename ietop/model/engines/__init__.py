"""Per-engine trackers the store hands an engine's events to: MLX requests rebuilt from a log without request
ids (`mlx`), vLLM start-up facts, stats and request logging (`vllm`). They import the model's core, never the
store, and never each other.
"""

from __future__ import annotations
