"""The live tailer under torture, end to end: every numbered line seen exactly once, in order, whole.

bench/tail_torture.py does the work (writer processes; FileTailer.follow(texts=True) as the dashboard's TailFeed
drives it; a check of every line), here at sizes CI affords (about 1.5 million lines in all, ~15 s on 2 cores;
the bench runs a million per scenario). Only what a tailer following a name could have seen is asked for, so
the writers wait at exactly two places, and race everywhere else: a storm's writer does not rotate away from a
file the tailer has not opened yet (renamed away unseen, no follow-by-name reader could read it), and a
copytruncate waits until the tailer has seen every line written (what logrotate's copy-then-truncate loses,
or leaves only in the copy, is logrotate's loss, not the tailer's).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench_support import load_bench

BENCH = Path(__file__).resolve().parents[2] / "bench"


torture = load_bench("tail_torture")

# (scenario, lines, rotations or truncations)
CASES = [
    ("storm", 100_000, 400),  # a rotation every 250 lines on average, as fast as the tailer takes them
    ("copytruncate", 100_000, 60),
    ("copytruncate-nul", 60_000, 20),  # holes up to 8 MB: past max_line (1 MB), as a real log's are
    ("interleaved", 200_000, 0),
    ("burst", 1_000_000, 0),
]


@pytest.mark.parametrize(("scenario", "lines", "rotations"), CASES, ids=[c[0] for c in CASES])
def test_every_line_once(tmp_path: Path, scenario: str, lines: int, rotations: int) -> None:
    res = torture.run(scenario, tmp_path, lines, seed=7, timeout=120, rotations=rotations)
    assert res.ended == "done", res
    assert (res.lost, res.duplicated, res.disordered, res.garbled) == (0, 0, 0, 0), res
    assert res.lines == lines
    if scenario == "storm":
        assert res.rotations == res.writer_rotations >= rotations // 2
    elif scenario.startswith("copytruncate"):
        assert res.truncations == res.writer_rotations >= rotations // 2
    else:
        assert res.rotations == res.truncations == 0
    if scenario == "copytruncate-nul":
        assert res.padding_bytes > 8 * (1 << 20)  # the holes were read, and skipped
    else:
        assert res.padding_bytes == 0
    assert res.ok
