"""Pure parsers: engine log lines and API bodies to typed events. Stdlib only (prometheus-client for the
Prometheus text format); no I/O, no clock, nothing from `ietop`.

One package per engine (`ollama`, `vllm`, `mlx`), none importing another's; `text` (framing, envelopes,
journald JSON, run starts) and `events` (the vocabulary) are shared by all; `api` parses endpoint answers and
proxied streams; `detect` (which engine wrote a log) is the one module that knows every engine.
"""

from __future__ import annotations
