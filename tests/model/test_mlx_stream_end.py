"""A stream that asked for no usage block has no end line in mlx_lm.server's log: the last token is all
there is. Followed live (no end-of-input flush), such a request waited for the next request, or a minute,
before it reached the Requests panel. When it has produced the max_tokens its body asked for, it ends at
its last token, at once: a stream can write no more, and mlx_lm logs no usage line after a stream's.

The log is our own real run (fixtures/mlx/README.md): three non-stream chats, then a streamed chat to a
second model with max_tokens 8 and no stream_options."""

from __future__ import annotations

from pathlib import Path

from ietop.pipeline.feeds import Evidence, TailParse
from ietop.pipeline.setup import new_store
from tests.tui.support import ROOT

LOG = ROOT / "fixtures" / "mlx" / "real-stream-no-usage-server.log"


def _followed(lines: list[str]) -> list[tuple[str | None, int | None, float | None]]:
    """The requests the dashboard's store has emitted after these lines, followed live (no flush)."""
    store, view, _evidence = new_store()
    tail = TailParse(store, str(LOG), "mlx", Evidence())
    store.apply_all(tail.parse(lines))
    return [(Path(r.model).name if r.model else None, r.output_tokens, r.latency_s) for r in view.requests]


def test_a_full_stream_ends_at_its_last_token() -> None:
    lines = LOG.read_text().splitlines()
    last_token = max(i for i, line in enumerate(lines) if line.endswith("DEBUG -  errors"))
    # Up to its 7th token it may still write more; its 8th, the max_tokens it asked for, ends it.
    assert [m for m, _n, _l in _followed(lines[:last_token])] == ["default"] * 3
    got = _followed(lines[:last_token + 1])
    assert len(got) == 4
    model, tokens, latency = got[-1]
    assert (model, tokens) == ("tiny-b", 8)
    assert latency is not None and 0 < latency < 1.0  # arrival 14:52:24.225 → last token 14:52:24.356


def test_the_model_asked_for_by_path_is_named_as_the_events_name_it() -> None:
    # The body named `/root/.cache/…/tiny-b`: a Residency column that wide pushed the resident-for and
    # keep-alive columns off a 120-column screen. Events say `tiny-b`; so does the row now.
    store, view, _evidence = new_store()
    tail = TailParse(store, str(LOG), "mlx", Evidence())
    store.apply_all(tail.parse(LOG.read_text().splitlines()))
    snap = view.snapshot(store.now, 10**6)
    assert [(r.engine, r.model) for r in snap.resident] == [("mlx", "tiny-b")]
    assert "loaded tiny-b in 0.1s" in [e.text for e in snap.events]
