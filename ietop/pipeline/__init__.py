"""The wiring: sources → parsers → store, for every command. `ingest` reads whole files (analyze, replay);
`feeds` tail logs, journals, containers and the proxy, and `setup` builds them from `discover`'s plan;
`polling` polls endpoints and samples host, GPUs and processes (`hardware`: what it posts); `clock`, `rewind`,
`livelog`. May import sources, parsers and the model; never Textual, Rich or `ietop.tui`: the dashboard only
receives what the wiring posts.
"""

from __future__ import annotations
