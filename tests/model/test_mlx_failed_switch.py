"""A switch that fails: mlx_lm lets go of its model before it loads the next one (ModelProvider.load), so a
request for a model that does not exist (404) leaves nothing loaded. The model goes when the failed load
begins (reason `switch_failed`, not a later "switched"); it is not an eviction, so loading it again is not
eviction thrash; and the hint names the cause, a name not found, not the memory budget.

The log is our own real DEBUG run (fixtures/mlx/README.md): … → mlx-community/Tiny-Llama-Test-4bit →
mlx-community/DoesNotExist-4bit (404, line 784) → the default model."""

from __future__ import annotations

from typing import Any

from ietop.model.hints import HintContext, HintEngine
from ietop.model.live import LiveView
from ietop.model.store import ListSink, Store
from ietop.pipeline.feeds import Evidence, TailParse
from ietop.pipeline.setup import new_store
from tests.tui.support import ROOT

LOG = ROOT / "fixtures" / "mlx" / "debug-server.stderr"
TINY = "mlx-community/Tiny-Llama-Test-4bit"


def _records(lines: list[str]) -> tuple[ListSink, Store]:
    sink = ListSink()
    store = Store(sink)
    parse = TailParse(store, str(LOG), "mlx", Evidence())
    store.apply_all(parse.parse(lines))
    store.flush()
    return sink, store


def _hints(sink: ListSink) -> dict[str, Any]:
    engine = HintEngine()
    for kind, records in sink.records.items():
        for record in records:
            engine.observe(kind, record)
    return {h.id: h for h in engine.evaluate(HintContext({}, {}, {}, {}))}


def test_the_failed_switch_drops_the_model_where_the_load_began() -> None:
    sink, _store = _records(LOG.read_text().splitlines())
    unloads = [(u.model, u.reason, u.for_model, u.ref.line) for u in sink.records["unload"]]
    assert (TINY, "switch_failed", "mlx-community/DoesNotExist-4bit", 774) in unloads
    assert not any(u[0] == TINY and u[1] == "switched" for u in unloads)  # not later, as a switch to default
    hint = _hints(sink)["load-failure"]
    assert "model not found (name/path/hub)" in hint.detail and "memory budget" not in hint.next
    assert [r.line for r in hint.evidence] == [774]


def test_loading_the_dropped_model_again_is_not_eviction_thrash() -> None:
    # SYNTHETIC variant of the real log: the request after the failure (line 798) names the model that the
    # failed switch dropped, so the next load is a forced reload of it.
    lines = LOG.read_text().splitlines()
    assert lines[797].endswith("Incoming Request Body: {")
    lines.insert(798, f'\t"model": "{TINY}",')
    sink, _store = _records(lines)
    loads = [(ld.model, ld.status) for ld in sink.records["load"]]
    assert loads[-1] == (TINY, "ok")
    thrash = _hints(sink).get("eviction-thrash")
    # default's two switch-backs are thrash; the reload of the model the failure dropped is not.
    assert thrash is not None and TINY not in thrash.detail and "1 reload(s)" in thrash.detail, thrash


def test_residency_and_hints_count_evictions_alike() -> None:
    store, view, _evidence = new_store()
    parse = TailParse(store, str(LOG), "mlx", Evidence())
    store.apply_all(parse.parse(LOG.read_text().splitlines()))
    snap = view.snapshot(store.now, 10**6)
    assert isinstance(view, LiveView)
    evicted = {r.model: r.evictions for r in snap.resident}
    assert evicted == {"default": 2}, evicted  # switched away from twice; the failed switch is no eviction
