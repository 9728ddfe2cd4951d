"""mlx_lm.server's log: the parser (`log`) and the multi-line records it rebuilds (`records`: request bodies,
usage blocks). May import `parsers.text` and `parsers.events`, no other engine.
"""

from __future__ import annotations
