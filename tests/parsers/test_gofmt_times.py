"""The fast time paths of parsers.ollama.gofmt equal the obvious ones they replaced (datetime.replace is slow on
CPython 3.11, so the hot paths build aware times another way): same instant, same offset, same failures."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.ollama.gofmt import parse_slog_time, with_offset


def obvious_slog_time(text: str) -> datetime | None:
    try:
        if text.endswith("Z"):
            return datetime.fromisoformat(text[:-1]).replace(tzinfo=timezone.utc)
        return datetime.fromisoformat(text)
    except ValueError:
        return None


_chars = st.sampled_from(list("0123456789-T:.+Z "))
_stamps = st.one_of(
    st.builds(lambda d, suffix, fmt, cut: d.strftime(fmt)[:cut] + suffix, st.datetimes(),
              st.sampled_from(["Z", "+01:00Z", "", "+0100Z", "ZZ", "+05:30"]),
              st.sampled_from(["%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d", "%Y%m%dT%H%M"]),
              st.integers(0, 26)),
    # slog's own 24-character shape, and that shape with any one character changed
    st.lists(_chars, min_size=23, max_size=23).map(lambda c: "".join(c) + "Z"),
    st.builds(lambda d, i, c: (lambda s: s[:i] + c + s[i + 1:])(d.strftime("%Y-%m-%dT%H:%M:%S.%f")[:23] + "Z"),
              st.datetimes(), st.integers(0, 23), _chars),
)


@settings(max_examples=1500, deadline=None)
@given(_stamps)
def test_slog_time_is_the_obvious_parse(text: str) -> None:
    want, got = obvious_slog_time(text), parse_slog_time(text)
    assert got == want
    if want is not None and got is not None:
        assert got.utcoffset() == want.utcoffset()


def test_slog_time_real_shapes() -> None:
    assert parse_slog_time("2024-05-01T06:00:00.087Z") == datetime(2024, 5, 1, 6, 0, 0, 87000, tzinfo=timezone.utc)
    aware = parse_slog_time("2025-02-28T01:25:01.793+01:00")
    assert aware is not None and aware.utcoffset() == timedelta(hours=1)


@settings(max_examples=1000, deadline=None)
@given(st.datetimes(), st.integers(-14 * 60, 14 * 60), st.sampled_from([0, 1]))
def test_with_offset_is_replace(naive: datetime, minutes: int, fold: int) -> None:
    naive = naive.replace(fold=fold)
    offset = timedelta(minutes=minutes)
    want = naive.replace(tzinfo=timezone(offset))
    got = with_offset(naive, offset)
    assert got == want and got.utcoffset() == want.utcoffset() and got.fold == want.fold
    assert with_offset(naive, None) is naive


def obvious_gin_time(stamp: str, offset: timedelta | None) -> datetime | None:
    try:
        naive = datetime.fromisoformat(stamp.replace("/", "-").replace(" - ", "T"))
    except ValueError:
        return None
    if naive.tzinfo is not None:
        return None
    return naive if offset is None else naive.replace(tzinfo=timezone(offset))


_gin_stamps = st.one_of(
    st.builds(lambda d: d.strftime("%Y/%m/%d - %H:%M:%S"), st.datetimes(min_value=datetime(2000, 1, 1))),
    st.builds(lambda d, i, c: (lambda s: s[:i] + c + s[i + 1:])(d.strftime("%Y/%m/%d - %H:%M:%S")),
              st.datetimes(min_value=datetime(2000, 1, 1)), st.integers(0, 20), st.sampled_from(list("0169:/ -.x"))),
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.tuples(_gin_stamps, st.sampled_from([None, 0, 60, -330])), min_size=1, max_size=20),
       st.randoms(use_true_random=False))
def test_gin_time_is_the_obvious_parse(steps: list[tuple[str, int | None]], rnd: Any) -> None:
    """The parser reuses a minute's parse for its other seconds; every answer equals a fresh parse."""
    from parsers.ollama.log import OllamaParser

    parser = OllamaParser()
    for stamp, minutes in steps:
        # runs of stamps in one minute, as a log has them, exercise the reuse
        for s in (stamp, stamp[:19] + f"{rnd.randrange(60):02d}" if len(stamp) == 21 else stamp):
            parser.offset = None if minutes is None else timedelta(minutes=minutes)
            got = parser._gin_time(s, parser.offset)
            want = obvious_gin_time(s, parser.offset)
            assert got == want, (s, got, want)
            if got is not None and want is not None:
                assert got.utcoffset() == want.utcoffset() and got.tzinfo == want.tzinfo


def obvious_learning_slog_time(text: str, offset: timedelta | None) -> tuple[datetime | None, timedelta | None]:
    """An slog time as the parser reads it, and the offset it leaves learnt: an aware time teaches its offset,
    a naive one takes the learnt offset."""
    ts = obvious_slog_time(text)
    if ts is None:
        return None, offset
    if ts.tzinfo is not None:
        return ts, ts.utcoffset()
    return (ts if offset is None else ts.replace(tzinfo=timezone(offset))), offset


_ZONES = ["Z", "+00:00", "-04:00", "+01:00", "+0100", "+05:30", "", "-04:00x"]
_slog_minute_runs = st.lists(
    st.tuples(st.sampled_from(["2024-05-10T23:29", "2024-05-10T23:30", "2024-13-10T23:29", "2024-05-10T23:2x"]),
              st.sampled_from([":00", ":17", ":59", ":60", ":7x", ""]),
              st.sampled_from([".000", ".347", ".999", ".34", ".3470", "", ".x47"]),
              st.sampled_from(_ZONES)).map("".join),
    min_size=1, max_size=25,
)


@settings(max_examples=1500, deadline=None)
@given(_slog_minute_runs)
def test_slog_time_of_the_parser_is_the_obvious_parse(texts: list[str]) -> None:
    """The parser adds a table's seconds and milliseconds to a minute it read before; every answer, and the
    offset it leaves learnt, equals a fresh parse of the whole text."""
    from parsers.ollama.log import OllamaParser

    parser = OllamaParser()
    offset: timedelta | None = None
    for text in texts:
        got = parser._slog_time(text)
        want, offset = obvious_learning_slog_time(text, offset)
        assert got == want, (text, got, want)
        assert parser.offset == offset, text
        if got is not None and want is not None:
            assert got.utcoffset() == want.utcoffset()


@settings(max_examples=1000, deadline=None)
@given(st.datetimes(), st.sampled_from([None, 0, 60, -240, 330, -59]), st.booleans())
def test_epoch_is_timestamp(naive: datetime, minutes: int | None, shared_zone: bool) -> None:
    """epoch() subtracts a per-zone epoch for the parsers' shared zone objects; the same seconds as
    timestamp() (or, naive, as UTC), for those and for any other zone object."""
    from parsers.ollama.gofmt import epoch, zone

    if minutes is None:
        assert epoch(naive) == naive.replace(tzinfo=timezone.utc).timestamp()
        return
    offset = timedelta(minutes=minutes)
    tz = zone(offset) if shared_zone else timezone(offset)
    aware = naive.replace(tzinfo=tz)
    assert epoch(aware) == aware.timestamp()


def test_gin_minute_is_not_reused_under_another_offset() -> None:
    """Found by the test above: a stamp read in full without a seconds field (`00:00.00`) moved the offset
    the minute was checked against, and the next second of the minute came back naive."""
    from parsers.ollama.log import OllamaParser

    parser = OllamaParser()
    for stamp, offset in [("2000/01/01 - 00:00:00", None), ("2000/01/01 - 00:00.00", timedelta(0)),
                          ("2000/01/01 - 00:00:00", timedelta(0))]:
        parser.offset = offset
        got = parser._gin_time(stamp, offset)
        want = obvious_gin_time(stamp, offset)
        assert got == want and (got is None or want is None or got.tzinfo == want.tzinfo), (stamp, got, want)
