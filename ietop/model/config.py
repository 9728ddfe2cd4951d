"""Configured (the claim) versus effective (the evidence) settings.

A configured value comes from what the engine says it was told (Ollama's `server config env=map[…]`);
an effective value comes from what a runner actually did (its launch flags, its `load request`, the
llama.cpp context lines, the limit in a truncation line). Each effective value keeps the line that proves
it, and the newest evidence wins, because a reload with other options changes what is in effect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ietop.model.records import Ref
from parsers.events.sane import LIMIT

# Ollama env keys → the contract's configured names.
OLLAMA_KEYS = {
    "OLLAMA_CONTEXT_LENGTH": "context_length",
    "OLLAMA_NUM_PARALLEL": "num_parallel",
    "OLLAMA_MAX_LOADED_MODELS": "max_loaded_models",
    "OLLAMA_KEEP_ALIVE": "keep_alive",
    "OLLAMA_FLASH_ATTENTION": "flash_attention",
    "OLLAMA_KV_CACHE_TYPE": "kv_cache_type",
    "OLLAMA_MAX_QUEUE": "max_queue",
    "OLLAMA_LOAD_TIMEOUT": "load_timeout",
    "OLLAMA_HOST": "host",
    "OLLAMA_DEBUG": "debug",
    "OLLAMA_SCHED_SPREAD": "sched_spread",
    "OLLAMA_NEW_ENGINE": "new_engine",
}
_INT_KEYS = {"context_length", "num_parallel", "max_loaded_models", "max_queue"}


def configured_context(configured: dict[str, Any]) -> int | None:
    """The context the operator's settings ask for: OLLAMA_CONTEXT_LENGTH, or, when that is 0 ("use the VRAM
    tier", Ollama >= 0.15.5) or unset, the default the server logged it picked. None when neither says."""
    claim = configured.get("context_length") or configured.get("default_context_length")
    return claim if isinstance(claim, int) and claim > 0 else None


@dataclass(slots=True)
class Settings:
    configured: dict[str, Any] = field(default_factory=dict)
    configured_ref: dict[str, Ref] = field(default_factory=dict)
    effective: dict[str, Any] = field(default_factory=dict)
    effective_ref: dict[str, Ref] = field(default_factory=dict)

    def claim_env(self, env: tuple[tuple[str, str], ...], ref: Ref) -> None:
        """Record the engine's configured environment (only the keys that matter to ietop)."""
        for key, value in env:
            name = OLLAMA_KEYS.get(key)
            if name is None:
                continue
            parsed: Any = value
            if name in _INT_KEYS:
                try:
                    parsed = int(value)
                except ValueError:
                    parsed = value or None
                if isinstance(parsed, int) and abs(parsed) >= LIMIT:
                    parsed = value  # no engine runs with it: kept as the text it claimed, never as a number
                    # (`OLLAMA_NUM_PARALLEL:9999999999999999` became a JSON integer beyond 2**53; fuzz run 5)
            self.configured[name] = parsed
            self.configured_ref[name] = ref

    def claim(self, name: str, value: Any, ref: Ref) -> None:
        self.configured[name] = value
        self.configured_ref[name] = ref

    def observe(self, name: str, value: Any, ref: Ref) -> None:
        """Record effective evidence; None never overwrites a known value."""
        if value is None:
            return
        self.effective[name] = value
        self.effective_ref[name] = ref

    def as_dict(self, paths: Sequence[str]) -> dict[str, Any]:
        def refs(d: dict[str, Ref]) -> dict[str, dict[str, Any]]:
            return {k: {"path": paths[r.src], "line": r.line} for k, r in d.items()}

        return {
            "configured": dict(self.configured),
            "effective": dict(self.effective),
            "evidence": {"configured": refs(self.configured_ref), "effective": refs(self.effective_ref)},
        }
