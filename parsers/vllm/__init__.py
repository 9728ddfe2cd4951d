"""vLLM's log: start-up facts (`startup`), request and stats lines (`lines`), tracebacks (`errors`), the parser
that joins them (`log`), and its `/metrics` names and Prometheus scrapes (`metrics`, `prometheus`). May import
`parsers.text` and `parsers.events`, no other engine.
"""

from __future__ import annotations
