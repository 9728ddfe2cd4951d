"""Engine-neutral text handling: line framing, envelopes (journald, docker, syslog), journald JSON records,
where a server run starts, a small memo cache. Stdlib only; imports nothing else from `parsers`.
"""

from __future__ import annotations
