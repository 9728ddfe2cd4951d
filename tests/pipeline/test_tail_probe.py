"""TailParse's health-check shortcut gives what the full path gives, less the events it only counts.

The dashboard's store keeps no successful non-inference request, so TailParse counts such lines (one
AccessCount per batch) instead of building their events. Against a TailParse whose store keeps them (the
full path), on the same lines and the same batches: every other item must be identical, times included;
each skipped item must be such a request; the counts must add up; and each AccessCount must carry the line
and time of the last request it counts.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ietop.model.live import LiveView
from ietop.model.records import is_inference
from ietop.model.store import ListSink, Store
from ietop.pipeline.feeds import Evidence, TailParse
from parsers.events import AccessCount, HttpAccess

ROOT = Path(__file__).resolve().parents[2]
OLLAMA_FIXTURES = sorted((ROOT / "fixtures" / "ollama").glob("*.log"))


def _parsers() -> tuple[TailParse, TailParse]:
    view = LiveView()
    counting = Store(view)
    view.attach(counting)
    assert counting.counts_ok_probes
    full = Store(ListSink())
    assert not full.counts_ok_probes
    return TailParse(counting, "x", "ollama", Evidence()), TailParse(full, "x", "ollama", Evidence())


def _compare(batches: list[list[str]]) -> int:
    """Feed both parsers the same batches and check them against each other; the number of lines counted."""
    short, full = _parsers()
    counted = 0
    for batch in batches:
        got = short.parse(batch)
        want = full.parse(batch)
        counts = [item for item in got if isinstance(item[2], AccessCount)]
        kept = [item for item in got if not isinstance(item[2], AccessCount)]
        skipped = []
        i = 0
        for item in want:
            if i < len(kept) and kept[i] == item:
                i += 1
                continue
            skipped.append(item)
        assert i == len(kept), (batch, kept[i:])
        for _, _, event in skipped:
            assert isinstance(event, HttpAccess), event
            assert event.status < 400 and not is_inference(event.method, event.path), event
        assert len(counts) == (1 if skipped else 0)
        if skipped:
            (_, t, count), last = counts[0], skipped[-1][2]
            assert isinstance(count, AccessCount)
            assert count.count == len(skipped)
            assert count.line == last.line
            assert count.ts == last.ts and count.ts is not None and last.ts is not None
            assert count.ts.tzinfo == last.ts.tzinfo
            assert t == full._last_t  # the newest time of the batch, probes included
            counted += count.count
        assert short._last_t == full._last_t
        assert short.n == full.n
    return counted


def test_synthetic_log_same_items_less_the_counted(tmp_path: Path) -> None:
    log = tmp_path / "synthetic.log"
    subprocess.run([sys.executable, str(ROOT / "bench" / "gen_ollama_log.py"), str(log), "--size", "2M",
                    "--seed", "5"], check=True, capture_output=True)
    lines = log.read_text(encoding="utf-8", errors="replace").split("\n")
    rng = random.Random(5)
    batches, i = [], 0
    while i < len(lines):
        k = rng.choice([1, 2, 7, 100, 2000])
        batches.append(lines[i : i + k])
        i += k
    counted = _compare(batches)
    assert counted > 0.4 * len(lines)  # most lines of a busy server are health checks, and they are taken


def test_real_fixtures_same_items_less_the_counted() -> None:
    counted = 0
    for path in OLLAMA_FIXTURES:
        lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
        counted += _compare([lines[i : i + 50] for i in range(0, len(lines), 50)])
    assert counted >= 12  # the real health-check polling in the excerpts (bare and journald)


PROBE = '[GIN] 2025/02/20 - 16:{m}:{s} | 200 |      52.021µs |       127.0.0.1 | GET      "/api/tags"'
LINES = st.one_of(
    st.builds(lambda m, s, env: env + PROBE.format(m=m, s=s),
              st.sampled_from(["34", "35", "59"]), st.sampled_from(["00", "14", "59", "61", "7x"]),
              st.sampled_from(["", "2025-02-20T16:34:14.172587575Z ", "Feb 20 16:34:14 host ollama[123]: ",
                               "ollama-1  | ", "2025-02-20  | ", "\x1b[0m"])),
    st.sampled_from([
        'time=2025-02-20T16:34:15.000+01:00 level=INFO source=x.go:1 msg="hello"',
        'time=2025-02-20T16:34:15.000-04:00 level=INFO source=x.go:1 msg="hello"',
        'time=2025-02-20T16:34:15.000Z level=INFO source=x.go:1 msg="hello"',
        '[GIN] 2025/02/20 - 16:34:16 | 200 |  2.1s |       127.0.0.1 | POST     "/api/chat"',
        '[GIN] 2025/02/20 - 16:33:10 | 500 |  2.1s |       127.0.0.1 | GET      "/api/tags"',
        '[GIN] 2025/13/20 - 16:34:14 | 200 |  2.1s |       127.0.0.1 | GET      "/api/tags"',
        # A 21-character stamp that is a date without a seconds field (a fraction of the minute instead).
        '[GIN] 2025/02/20 - 16:34.54 | 200 |      52.021µs |       127.0.0.1 | GET      "/api/tags"',
        "slot launch_slot_: id  0 | task 5 | processing task",
        # An escape sequence whose final byte is a bar: the full path removes it and reads no access line.
        '[GIN] 2025/02/20 - 16:34:14 | 200 |       1.5s \x1b[|       127.0.0.1 | GET      "/api/tags"',
        '[GIN] 2025/02/20 - 16:34:14 | 200 |     **1.5s** |       127.0.0.1 | GET      "/api/tags"',
        '[GIN] 2025/02/20 - 16:34:15 |\x1b[97;42m 200 \x1b[0m|      43.47µs |       127.0.0.1 |\x1b[97;45m HEAD    \x1b[0m "/"',
        'ollama-1  | [GIN] 2025/02/20 - 16:34:15 |\x1b[97;42m 200 \x1b[0m|  1.5s |  127.0.0.1 |\x1b[97;46m POST    \x1b[0m "/"',
        '[GIN] 2025/02/20 - 16:34:15 |\x1b[97;42m 200 \x1b[0m|  1.5s |  127.0.0.1 |\x1b]0;title\x07 GET "/"',
        "",
    ]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(LINES, max_size=8), min_size=1, max_size=5))
def test_mixed_streams_same_items_less_the_counted(batches: list[list[str]]) -> None:
    # Offsets learned mid-batch, a stamp repeated across an offset change, seconds 61 and garbage, a minute
    # going backwards, envelopes the shortcut does not take: all must come out as the full path has them.
    _compare(batches)


def test_offset_learnt_between_probes_of_one_minute() -> None:
    # The minute's epoch is reused only under the offset it was read with: here an offset is learnt, then a
    # stamp that is a date without a seconds field is read in full, then the minute's next second comes.
    plain = PROBE.format(m="34", s="10")
    odd = '[GIN] 2025/02/20 - 16:34.54 | 200 |      52.021µs |       127.0.0.1 | GET      "/api/tags"'
    slog = 'time=2025-02-20T16:34:15.000+01:00 level=INFO source=x.go:1 msg="hello"'
    _compare([[plain, slog, odd, PROBE.format(m="34", s="20")]])
    _compare([[plain], [slog], [odd], [PROBE.format(m="34", s="20")]])
