"""Model names as the logs give them (blob paths, registry paths, tags) reduced to one form."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache


# Called several times per scheduler line with the same few blob paths: remembered (a hash, no splitting).
@lru_cache(maxsize=4096)
def model_name(model: str | None) -> str | None:
    """Blob paths are shortened to their digest (`sha256-0800cbac9c20`); names are kept."""
    if not model:
        return None
    tail = model.replace("\\", "/").rsplit("/", 1)[-1]
    if tail.startswith(("sha256-", "sha256:")):
        return "sha256-" + tail[7:19]
    if "/" in model and model.startswith("registry.ollama.ai/library/"):
        return model[len("registry.ollama.ai/library/") :]
    return model if "/" not in model or ":" in tail else tail


def resolve(model: str | None, aliases: Mapping[str, str]) -> str | None:
    """The name to show for a recorded model. Ollama's records carry the blob (`sha256-…`) when the line that
    names it comes later (the DEBUG scheduler lines give both) or in another file; `aliases` is every
    blob → name pair the logs gave (LoadTracker.aliases). The dashboard and `analyze` both call this, late,
    so a name learned anywhere in the logs reaches every record and both agree."""
    return aliases.get(model, model) if model else model
