"""Pure, stdlib-only parsers: engine log lines and API bodies to typed events."""

from __future__ import annotations
