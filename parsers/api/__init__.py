"""Engine endpoints and the proxy: `/api/ps`, `/v1/models`, `/health` answers (`engine_api`, `events`), request
and response shapes (`shapes`), streamed answers measured by the proxy (`stream`) and its JSONL (`proxy_log`).
May import `parsers.text` and `parsers.events`, no engine's log parser.
"""

from __future__ import annotations
