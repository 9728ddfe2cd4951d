"""One clear line per mistake on the command line (issue 22): a near-miss command or choice is named, a
refused address is explained once."""

from __future__ import annotations

import pytest

from ietop.cli import main


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    return err


@pytest.mark.parametrize(("argv", "suggestion"), [
    (["analyse", "x.log"], "(did you mean 'analyze'?)"),
    (["replya", "x.log"], "(did you mean 'replay'?)"),
    (["analyze", "--engine", "olama", "x.log"], "(did you mean 'ollama'?)"),
])
def test_a_near_miss_is_named(argv: list[str], suggestion: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert suggestion in _error(capsys, argv)


def test_no_suggestion_for_a_far_miss(capsys: pytest.CaptureFixture[str]) -> None:
    assert "did you mean" not in _error(capsys, ["frobnicate"])


def test_a_remote_listen_address_is_refused_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["proxy", "--upstream", "http://127.0.0.1:9", "--listen", "0.0.0.0:9999"]) == 2
    err = capsys.readouterr().err
    assert err == ("ietop: error: refusing to listen on 0.0.0.0: not a loopback address (use --allow-remote to "
                   "listen beyond this machine)\n")
