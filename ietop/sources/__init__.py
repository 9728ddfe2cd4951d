"""Sources: everything that does I/O to obtain raw log bytes and engine data (files, tails, commands, HTTP,
psutil, NVML, the proxy); no parsing into facts, no model, no presentation. `samples` holds the plain data types
the dashboard may display.
"""

from __future__ import annotations
