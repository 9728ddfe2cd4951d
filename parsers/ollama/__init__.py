"""Ollama's log: the server's Go log and slog lines (`log`, `messages`, `gofmt`), GIN access lines (`gin`) and the
llama.cpp runner it embeds (`llamacpp`). May import `parsers.text` and `parsers.events`, no other engine.
"""

from __future__ import annotations
