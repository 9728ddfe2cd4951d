"""Numbers on the command line (issue 21): `replay --speed nan` used to reach the replay clock and kill the
dashboard; `--interval 0`, `-1` or `nan` were accepted (a poll loop with no pause). Each is now a usage error
of one line, and the clock itself refuses a speed it cannot divide by."""

from __future__ import annotations

import pytest

from ietop.cli import build_parser
from ietop.pipeline.clock import ReplayClock

BAD_SPEEDS = ["nan", "inf", "-inf", "-1", "fast"]
BAD_INTERVALS = ["0", "-1", "nan", "inf", "0.01", "soon"]


@pytest.mark.parametrize("value", BAD_SPEEDS)
@pytest.mark.parametrize("command", [["replay", "x.log"], ["demo"]], ids=["replay", "demo"])
def test_a_speed_that_is_not_a_finite_non_negative_number(command: list[str], value: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([*command, f"--speed={value}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"invalid speed {value!r}" in err


@pytest.mark.parametrize("value", BAD_INTERVALS)
def test_an_interval_too_short_or_not_a_number(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([f"--interval={value}"])
    assert exc.value.code == 2
    assert f"invalid interval {value!r}" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "0.5", "1", "100"])
def test_good_speeds_and_intervals_pass(value: str) -> None:
    assert build_parser().parse_args(["replay", "x.log", "--speed", value]).speed == float(value)
    if float(value) >= 0.1:
        assert build_parser().parse_args(["--interval", value]).interval == float(value)


@pytest.mark.parametrize("speed", [float("nan"), float("inf"), -1.0])
def test_the_clock_refuses_what_it_cannot_divide_by(speed: float) -> None:
    with pytest.raises(ValueError, match="finite number"):
        ReplayClock(speed)
    clock = ReplayClock(1.0)
    with pytest.raises(ValueError, match="finite number"):
        clock.set_speed(speed)
    assert clock.speed == 1.0
