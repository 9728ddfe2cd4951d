"""The one-regex reading of a GIN access line gives what splitting it on its bars gives.

`OllamaParser._gin` reads GIN's exact layout with one regex and hands every other line to `_gin_split`
(the bar-splitting reader it replaced on the hot path). For any line the regex takes, both must build the
same event; lines are spliced from real columns, odd spacing, Unicode whitespace and escapes.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.ollama.gin import _GIN_PLAIN_RE
from parsers.ollama.log import OllamaParser
from parsers.text.envelope import strip_envelope

ROOT = Path(__file__).resolve().parents[2]

STAMPS = ["2024/05/01 - 06:13:54", "2025/13/20 - 16:34:14", "2024/05/01 - 06:13:5x", "2024/05/01 -  6:13:54"]
# Well-formed values several times over, so that most lines are ones the regex takes.
PADS = ["", " ", "  ", "\t", "\u00a0", "\x85", "\u2003"]
STATUSES = ["200", "404", "500"] * 3 + ["2000", "20", "٢٠٠", "abc", ""]
LATENCIES = ["4.778643299s", "28.013µs", "28.013μs", "102.891375ms", "1m2.5s", "0s"] * 3 + ["5.", "junk", "1 s", ""]
CLIENTS = ["127.0.0.1", "::1", "172.18.0.6", ""] * 3 + ["a|b", "host name", "\u00a0x"]
METHODS = ["POST", "GET", "HEAD", "OPTIONS"] * 3 + ["post", ""]
PATHS = ['"/api/generate"', '"/"', '"/api/tags?x=1"'] * 4 + ['"/a\\"b"', '"/a|b"', '"/a b"', "/noquote", '"/x\u00a0"', '""']
ENDINGS = [""] * 8 + [" ", "\r"]


def gin_line(pick: Callable[[list[str]], str], odd: list[int]) -> str:
    """GIN's own layout (`| %3d | %13v | %15s | %-7s %q`) from picked fields, with the spacing around the
    columns in `odd` (0-5) replaced by a picked pad: mostly lines the regex takes, and near misses."""
    pads = [pick(PADS) if i in odd else None for i in range(6)]
    status, latency, client, method = pick(STATUSES), pick(LATENCIES), pick(CLIENTS), pick(METHODS)

    def pad(i: int, normal: str) -> str:
        odd_pad = pads[i]
        return normal if odd_pad is None else odd_pad

    return (
        f"[GIN] {pick(STAMPS)} |{pad(0, ' ')}{status}{pad(1, ' ')}|{pad(2, ' ' * max(1, 14 - len(latency)))}"
        f"{latency} |{pad(3, ' ' * max(1, 16 - len(client)))}{client} |{pad(4, ' ')}{method}"
        f"{pad(5, ' ' * max(1, 8 - len(method)))}{pick(PATHS)}{pick(ENDINGS)}"
    )


@st.composite
def gin_lines(draw: st.DrawFn) -> str:
    odd = draw(st.lists(st.integers(0, 5), max_size=2))
    return gin_line(lambda options: draw(st.sampled_from(options)), odd)


def _read(text: str, fast: bool) -> object:
    parser = OllamaParser()
    try:
        return parser._gin(7, text) if fast else parser._gin_split(7, text)
    except ValueError as exc:  # parse() turns these into Unparsed; both readers must raise alike
        return type(exc)


def _same(text: str) -> bool:
    fast, split = _read(text, True), _read(text, False)
    assert fast == split, (text, fast, split)
    return _GIN_PLAIN_RE.match(text) is not None


@settings(max_examples=1500, deadline=None)
@given(gin_lines())
def test_generated_lines_read_the_same(text: str) -> None:
    _same(text)


def test_seeded_lines_read_the_same_and_most_take_the_regex() -> None:
    rng = random.Random(11)
    taken = 0
    for _ in range(20_000):
        taken += _same(gin_line(rng.choice, rng.sample(range(6), rng.choice([0, 0, 1, 2]))))
    assert taken > 2_000, taken


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_any_text_after_the_tag_reads_the_same(tail: str) -> None:
    _same("[GIN] " + tail)


def test_real_access_lines_take_the_regex_and_read_the_same() -> None:
    taken = total = 0
    for path in sorted((ROOT / "fixtures" / "ollama").glob("*.log")):
        for raw in path.read_text(encoding="utf-8", errors="replace").split("\n"):
            inner = strip_envelope(raw).text
            if inner.startswith("[GIN] "):
                total += 1
                taken += _same(inner)
    assert total > 50 and taken >= 0.9 * total, (taken, total)
