"""Sources: everything that does I/O to obtain raw log bytes and engine data; no parsing."""

from __future__ import annotations
