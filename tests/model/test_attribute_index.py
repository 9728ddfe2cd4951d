"""Property: `LoadTracker.attribute` on its end-time index decides exactly what the old scan of every recent load did.

Hypothesis draws scripts of tracker events (preludes, launches, completions, failures, loads recorded whole as the
MLX tracker does, some without an end and some recorded twice, model names and blob aliases, `advance` past a
shortened horizon, a shortened MAX_RECENT so loads leave from the left) interleaved with requests: several engines,
overlapping lifetimes, times on a coarse grid (ties at the tolerance's edges) or arbitrary floats (rounding), end
times out of order; the index is asked from 0, 3 or SCAN_MAX kept loads up (below that the tracker gets them
all). The same script is played on a tracker with the new `attribute` and on one whose `attribute` is
the old scan, copied below; every request and every load must come out field for field the same, the trigger being
the same request, and the loads handed to the sink in the same order.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import ietop.model.load_index as index_mod
import ietop.model.loads as loads_mod
from ietop.model.loads import TOL_S, LoadTracker
from ietop.model.records import Load, Ref, Request

ENGINES = ("ollama", "vllm", "mlx")
MODELS = (None, "gemma3:1b", "/root/.ollama/models/blobs/sha256-abc", "sha256-abc", "qwen3:4b")
BLOB, NAMES = "sha256-abc", ("llama3.2:3b", "gemma3:1b")

# A load ending at END and a request starting at START: `START <= END + 1.0` holds, `START - 1.0 <= END` does not
# (float rounding), so an index that bisected on `t_start - TOL_S` would miss a load the scan matched.
END, START = 7.993576807085723, 8.993576807085724


class ScanTracker(LoadTracker):
    """The tracker with the attribution as it was: every recent load tested for every request."""

    def attribute(self, req: Request) -> None:
        if not req.inference:
            return
        engine, t_start, t_end = req.engine, req.t_start, req.t_end
        for load in self._recent:
            end = load.t_end
            if end is None or load.engine != engine or not (t_start <= end + TOL_S and t_end + TOL_S >= end):
                continue
            begin = load.t_begin if load.begin_known else t_start
            if t_start < begin - 2 * TOL_S:
                continue
            gap = abs(t_start - begin)
            waited = max(0.0, end - max(t_start, begin))
            if load.status == "ok":
                req.cold_load = True
                req.load_s = round(waited, 3)
                req.cite("load_s", load.done_ref or load.ref)
                req.waited_for = load
                if req.model is None:
                    req.model = load.model
            elif req.status >= 400 and (req.waited_for is None or not req.waited_for.ok):
                self._gave_up(req, load)
            if gap < load.trigger_gap and t_start <= begin + TOL_S:
                if load.trigger is not None:
                    load.waiters += 1
                load.trigger = req
                load.trigger_gap = gap
                if load.status == "ok":
                    req.load_s = load.duration_s if load.duration_s is not None else req.load_s
            else:
                load.waiters += 1
        for load in self._open.values():
            aborted = load.engine == req.engine and req.t_start <= load.t_begin + TOL_S and req.status >= 400
            if aborted and load.trigger is None:
                load.trigger = req
                load.trigger_gap = abs(req.t_start - load.t_begin)
            if aborted and req.waited_for is None:
                self._gave_up(req, load)


# -- the scripts -------------------------------------------------------------------------------------------------
grid = st.integers(0, 40).map(lambda n: n / 2)  # half seconds: ends, starts and gaps that tie at ± TOL_S
times = st.one_of(grid, st.floats(0, 20, allow_nan=False, allow_infinity=False), st.sampled_from([END, START]))
spans = st.one_of(st.integers(0, 12).map(lambda n: n / 2), st.floats(0, 8, allow_nan=False, allow_infinity=False))
# Now and then a NaN end or start: no comparison admits it, and it must not upset the index's order.
odd_spans = st.one_of(spans, spans, spans, st.just(math.nan))
srcs = st.integers(0, 2)
engines = st.sampled_from([*ENGINES, "ollama"])  # mostly one engine: more loads to choose among

events = st.one_of(
    st.tuples(st.just("prelude"), srcs, times),
    st.tuples(st.just("open"), srcs, times, engines),
    st.tuples(st.just("started"), srcs, times, engines),
    st.tuples(st.just("done"), srcs, times, engines, spans),
    st.tuples(st.just("failed"), srcs, times, engines, st.booleans()),
    st.tuples(st.just("model"), srcs, st.sampled_from(MODELS)),
    st.tuples(st.just("alias"), st.sampled_from(NAMES)),
    st.tuples(st.just("record"), times, st.one_of(st.none(), odd_spans), engines, st.sampled_from(["ok", "failed"]),
              st.booleans(), st.sampled_from(MODELS), st.one_of(st.none(), spans), st.booleans()),
    st.tuples(st.just("advance"), times),
)
requests = st.tuples(st.just("request"), times, odd_spans, engines, st.sampled_from([200, 200, 404, 499, 500]),
                     st.booleans(), st.sampled_from(MODELS))
loads = st.one_of(
    st.tuples(st.just("done"), srcs, times, engines, spans),
    st.tuples(st.just("record"), times, odd_spans, engines, st.sampled_from(["ok", "failed"]), st.just(True),
              st.sampled_from(MODELS), st.one_of(st.none(), spans), st.just(False)),
)
# Requests and finished loads drawn more often than the rest, so that requests meet several loads.
steps = st.one_of(events, requests, requests, loads)


def play(tracker: LoadTracker, script: list[tuple[Any, ...]]) -> list[Request]:
    """Run the script; the requests made, in order."""
    requests: list[Request] = []
    recorded: Load | None = None
    for line, (kind, *args) in enumerate(script, start=1):
        ref = Ref(0, line)
        if kind == "prelude":
            src, t = args
            tracker.prelude(src, t, None, ref)
        elif kind == "open":
            src, t, engine = args
            tracker.open(src, t, None, ref, engine)
        elif kind == "started":
            src, t, engine = args
            tracker.started(src, t, None, ref, engine)
        elif kind == "done":
            src, t, engine, duration = args
            tracker.done(src, t, None, ref, engine, duration)
        elif kind == "failed":
            src, t, engine, certain = args
            tracker.failed(src, t, None, ref, engine, certain)
        elif kind == "model":
            src, model = args
            load = tracker.current(src)
            if load is not None:
                tracker.set_model(src, load, model)
        elif kind == "alias":
            tracker.learn_alias(BLOB, args[0])
        elif kind == "record":
            t_begin, span, engine, status, begin_known, model, duration, again = args
            if again and recorded is not None:
                tracker.record(recorded)  # the same load twice: two entries, met twice, as in a deque
                continue
            recorded = Load(None, t_begin, engine, ref, model=model, status=status, begin_known=begin_known,
                            t_end=None if span is None else t_begin + span, duration_s=duration,
                            done_ref=Ref(1, line) if duration is not None else None)
            tracker.record(recorded)
        elif kind == "advance":
            tracker.advance(args[0])
        else:
            t_end, latency, engine, status, inference, model = args
            req = Request(None, t_end, t_end - latency, engine, "POST", "/api/chat", status, None, latency, ref,
                          model=model, inference=inference)
            requests.append(req)
            tracker.attribute(req)
    return requests


def _load_row(load: Load) -> tuple[Any, ...]:
    """A load's fields, its trigger named by its line (the same request, not merely an equal one)."""
    fields = {f.name: getattr(load, f.name) for f in dataclasses.fields(load) if f.name not in ("trigger", "retry_of")}
    return (tuple(sorted(fields.items())), None if load.trigger is None else load.trigger.ref.line)


def _request_row(req: Request) -> tuple[Any, ...]:
    """A request's fields, the load it waited for named by its first line (it points back to its trigger)."""
    fields = tuple(getattr(req, f.name) for f in dataclasses.fields(req) if f.name != "waited_for")
    load = req.waited_for
    return (fields, None if load is None else (load.ref.line, load.t_begin, load.status))


def _outcome(tracker: LoadTracker, requests: list[Request], emitted: list[tuple[str, object]]) -> Any:
    pending, _ = tracker.pending()
    tracker.flush()
    return (
        [_request_row(r) for r in requests],
        [(kind, _load_row(x)) for kind, x in emitted if isinstance(x, Load)],
        [_load_row(ld) for ld in pending],
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    script=st.lists(steps, min_size=20, max_size=100),
    max_recent=st.sampled_from([2, 5, 256]),
    horizon=st.sampled_from([3.0, 4 * 3600.0]),
    scan_max=st.sampled_from([0, 3, index_mod.SCAN_MAX]),
)
@example(script=[("record", END, 0.0, "ollama", "ok", True, None, None, False),
                 ("request", START, 0.0, "ollama", 200, True, None)], max_recent=256, horizon=4 * 3600.0, scan_max=0)
# Two loads met by one request, recorded in the other order than they ended: the first recorded names the model,
# the last recorded gives load_s and its citation, as the scan's order had it.
@example(script=[("record", 5.0, 3.0, "ollama", "ok", True, "gemma3:1b", 3.0, False),
                 ("record", 4.0, 2.0, "ollama", "ok", True, "qwen3:4b", 2.0, False),
                 ("request", 9.0, 5.0, "ollama", 200, True, None)], max_recent=256, horizon=4 * 3600.0, scan_max=0)
def test_attribute_index_matches_scan(
    script: list[tuple[Any, ...]], max_recent: int, horizon: float, scan_max: int
) -> None:
    # scan_max 0: the index answers every request; 3: it does once more than three loads are kept.
    with mock.patch.object(loads_mod, "MAX_RECENT", max_recent), \
            mock.patch.object(loads_mod, "ATTRIBUTION_HORIZON_S", horizon), \
            mock.patch.object(index_mod, "SCAN_MAX", scan_max):
        new_out: list[tuple[str, object]] = []
        old_out: list[tuple[str, object]] = []
        new, old = LoadTracker(lambda k, x: new_out.append((k, x))), ScanTracker(lambda k, x: old_out.append((k, x)))
        new_reqs, old_reqs = play(new, script), play(old, script)
        # Compared as text: NaN is not equal to itself, its repr is.
        assert repr(_outcome(new, new_reqs, new_out)) == repr(_outcome(old, old_reqs, old_out))


def test_rounding_edge_is_matched() -> None:
    """The load of the rounding example above is one the request waited for (the scan's condition, not its
    rearrangement, decides)."""
    assert START <= END + TOL_S and not START - TOL_S <= END
    tracker = LoadTracker(lambda k, x: None)
    for line in range(index_mod.SCAN_MAX):  # enough loads, elsewhere, that the index is asked
        tracker.record(Load(None, 100.0 + line, "ollama", Ref(0, 10 + line), status="ok", t_end=101.0 + line))
    tracker.record(Load(None, START - 0.5, "ollama", Ref(0, 1), status="ok", t_end=END, duration_s=0.5))
    req = Request(None, START + 2.0, START, "ollama", "POST", "/api/chat", 200, None, 2.0, Ref(0, 2), inference=True)
    tracker.attribute(req)
    assert req.cold_load and req.load_s == 0.5
