"""The frozen view of the store that the dashboard draws: built on the main thread, read by widgets.

Times are `t` values (epoch seconds, the store's sortable key); `now` is the clock the view was built
at (wall time live, the replay's virtual time in replay), so countdowns and windows agree with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ietop.model.hints import Hint
from ietop.model.names import resolve
from ietop.model.records import Ref, Request

if TYPE_CHECKING:  # the budget's module imports Interval from here
    from ietop.model.budget import Budget, BudgetInputs

WINDOWS = (60.0, 300.0, 900.0)
"""The latency windows keys 1/2/3 switch between: 1m, 5m, 15m."""


@dataclass(frozen=True, slots=True)
class EngineRow:
    engine: str
    endpoint: str
    """The polled URL, or `log:<file name>` for an engine known only from its log."""
    state: str
    """up, down, dead, unknown, or `log` (no endpoint polled: the log is the only source)."""
    detail: str
    version: str | None
    up_since: float | None


@dataclass(frozen=True, slots=True)
class ResidentRow:
    engine: str
    model: str
    source: str
    """What says it is resident: `api/ps`, `log`, `process` (MLX: one model per process), `models`."""
    size_bytes: int | None = None
    vram_bytes: int | None = None
    ctx: int | None = None
    """Effective context (per slot where known): the evidence."""
    ctx_configured: int | None = None
    """The configured value (a claim); differs from `ctx` when the setting did not take effect."""
    parallel: int | None = None
    loaded_since: float | None = None
    expires_at: float | None = None
    loads: int = 0
    evictions: int = 0
    last_load_s: float | None = None
    ref: Ref | None = None
    host: str | None = None
    """`host:port` of the server holding it: the polled URL's, or the address its log said it listens on (this
    host's other names read 127.0.0.1); None when neither says (a log with no listen line, or a wildcard one)."""


@dataclass(frozen=True, slots=True)
class LatencyRow:
    metric: str
    """TTFT, ITL or E2E."""
    count: int
    p50: float | None
    p90: float | None
    p99: float | None
    spark: tuple[float, ...]
    """Median per bucket across the window, oldest first (0.0 for an empty bucket)."""
    source: str
    """`requests` (per-request facts from logs or the proxy) or `metrics` (vLLM histograms); with no figure
    (count 0), `earlier` (only before the window: a log read back, a quiet spell) or `none`."""


@dataclass(frozen=True, slots=True)
class EventRow:
    t: float
    time: datetime | None
    kind: str
    """load, load_failed, evict, expire, switch, unload, crash, truncation, error."""
    engine: str
    model: str | None
    text: str
    """Plain text, built from parsed fields: never markup."""
    refs: tuple[Ref, ...]


@dataclass(frozen=True, slots=True)
class Interval:
    """One residency of one model: from its load completing to its unload (or still resident)."""

    engine: str
    model: str
    start: float
    end: float | None
    load_s: float | None
    """What it cost to become resident (the load's duration)."""
    ended_by: str | None
    """evicted, expired, switched, crashed, unknown; None while resident."""
    for_model: str | None
    """The model it was evicted for."""
    ref: Ref


@dataclass(frozen=True, slots=True)
class SourceRow:
    path: str
    engine: str
    lines: int
    unparsed: int
    version: str | None
    failed: str | None = None
    """Why the source gave up for good (`exit 1`): see ietop.model.store_records.SourceFailed."""


@dataclass(frozen=True, slots=True)
class LogGpu:
    """A device as the engine's log described it: its memory in use at the last time the log said (at
    start-up, or before a load)."""

    name: str
    total_bytes: int | None
    used_bytes: int | None
    at: datetime | None
    """When the log gave that figure."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    version: int
    now: float
    window_s: float
    engines: tuple[EngineRow, ...]
    resident: tuple[ResidentRow, ...]
    latency: tuple[LatencyRow, ...]
    requests: tuple[Request, ...]
    """Newest first."""
    events: tuple[EventRow, ...]
    """Newest first."""
    hints: tuple[Hint, ...]
    timeline: tuple[Interval, ...]
    sources: tuple[SourceRow, ...]
    configured: dict[str, object]
    effective: dict[str, object]
    counts: dict[str, int]
    aliases: dict[str, str]
    """Blob (`sha256-…`) → model name, learned from DEBUG lines; records made earlier carry the blob."""
    log_gpus: tuple[LogGpu, ...] = ()
    budget: Budget | None = None
    """Which models fit together and what a swap costs (`ietop budget`), from the loads the view holds; its
    usable size is None when no log line names a device (the dashboard may then know this host's)."""
    budget_inputs: BudgetInputs | None = None
    """What `budget` was built from: rebuilt with this host's memory when the logs give none."""

    def model_name(self, model: str | None) -> str | None:
        return resolve(model, self.aliases)

    @property
    def failed_sources(self) -> tuple[SourceRow, ...]:
        return tuple(s for s in self.sources if s.failed)

    @property
    def requests_can_come(self) -> bool:
        """Whether anything followed can give requests: a log (file, journal, container, stdin) or the proxy
        that has not failed. Polled endpoints alone give residency and status, never a request."""
        return any(not s.failed for s in self.sources)
