"""`ietop compare` (issue 23, item 3) end to end: two logs, `--by-run` on real Ollama start-ups, `--split-at` on the
demo incident, and usage errors as one line with exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ietop.cli import main
from tests.analyze.make_compare_pair import write
from tests.analyze.test_compare import direct

ROOT = Path(__file__).resolve().parents[2]

DEMO = ROOT / "ietop" / "demo" / "incident.log"
FIXTURES = ROOT / "fixtures" / "ollama"
# Three real Ollama start-ups (v0.3.6 Windows, v0.5.7 Windows, v0.5.11 macOS), oldest first: no fixture holds two
# starts of one server, so the test log is these real files one after the other, as one log that saw two restarts.
RUNS = ("028-v036-windows-startup-runners-dir.log", "022-v057-windows-startup-golog-config.log",
        "031-v0511-macos-startup-config.log")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["--no-config", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def as_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    rc, out, err = run(capsys, *argv, "--json")
    assert rc == 0, err
    return json.loads(out)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write(tmp_path_factory.mktemp("pair"))


def test_text_report_shows_loads_falling_and_the_keep_alive_change(pair: tuple[Path, Path],
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "compare", str(pair[0]), str(pair[1]))
    assert rc == 0 and err == ""
    assert "configured OLLAMA_KEEP_ALIVE 5m0s → 30m0s (before: line 1, after: line 1)" in out
    assert "configured OLLAMA_MAX_LOADED_MODELS 1 → 3 (before: line 1, after: line 1)" in out
    overall = out.split("\noverall\n", 1)[1].split("\n\n", 1)[0]
    rows = {line[2:22].strip(): line[22:].split() for line in overall.splitlines() if line.startswith("  ")}
    assert rows["cold loads"][:2] == ["14", "2"]
    assert rows["evictions"][:2] == ["12", "0"]
    assert "why: latency fell" in overall and "because cold loads fell" in overall
    assert "qwen3:8b (ollama): 8 → 8 requests" in out


def test_json_equals_a_computation_over_each_sides_analyze_json(pair: tuple[Path, Path],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    doc = as_json(capsys, "compare", str(pair[0]), str(pair[1]))
    assert doc["schema"] == "ietop.compare/1" and doc["mode"] == "paths"
    (comp,) = doc["comparisons"]
    for path, key in zip(pair, ("before", "after")):
        analyzed = as_json(capsys, "analyze", str(path))
        assert comp[key]["paths"] == [str(path)]
        assert comp[key]["config"] == analyzed["config"]
        for name, value in direct(analyzed).items():
            m = comp["overall"]["metrics"][name]
            assert (m[key], m[f"n_{key}"]) == pytest.approx(value), name
        for model in {r["model"] for r in analyzed["requests"] if r["inference"]}:
            got = next(m for m in comp["models"] if m["model"] == model)["metrics"]
            for name, value in direct(analyzed, model).items():
                assert (got[name][key], got[name][f"n_{key}"]) == pytest.approx(value), (model, name)
    m = comp["overall"]["metrics"]["e2e_p50_s"]
    assert m["delta"] == pytest.approx(m["after"] - m["before"])
    assert m["delta_pct"] == pytest.approx((m["after"] - m["before"]) / m["before"] * 100)


def test_by_run_compares_each_server_start_with_the_one_before(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "server.log"
    texts = [(FIXTURES / name).read_text() for name in RUNS]
    log.write_text("".join(texts))
    starts = [1, 1 + texts[0].count("\n"), 1 + texts[0].count("\n") + texts[1].count("\n")]
    doc = as_json(capsys, "compare", "--by-run", str(log))
    assert doc["mode"] == "by_run"
    comps = doc["comparisons"]
    assert [(c["before"]["run"], c["after"]["run"]) for c in comps] == [(1, 2), (2, 3)]
    sides = [comps[0]["before"], comps[0]["after"], comps[1]["after"]]
    assert [s["run_line"] for s in sides] == starts
    lines = log.read_text().splitlines()
    for s, first in zip(sides, starts):
        # The configuration each run ran with: its own `server config` line, and its own `Listening on` version.
        cfg = s["config"]
        assert cfg["evidence"]["configured"]["keep_alive"]["line"] == first
        assert "server config" in lines[first - 1]
        version_line = cfg["evidence"]["effective"]["version"]["line"]
        assert first <= version_line < first + 5
        assert f"(version {cfg['effective']['version']})" in lines[version_line - 1]
    assert [s["config"]["effective"]["version"] for s in sides] == ["0.3.6", "0.5.7", "0.5.11"]
    version = next(c for c in comps[0]["config"]["changed"] if c["key"] == "version")
    assert (version["before"], version["after"]) == ("0.3.6", "0.5.7")
    # v0.3.6 did not print OLLAMA_LOAD_TIMEOUT: stated on the later side only, not called a change.
    assert "OLLAMA_LOAD_TIMEOUT" in [c["name"] for c in comps[0]["config"]["only_after"]]
    assert sides[0]["end"] == sides[1]["start"]

    rc, out, _ = run(capsys, "compare", "--by-run", str(log))
    assert rc == 0
    assert f"in effect  version 0.3.6 → 0.5.7 (run 1: line 4, run 2: line {starts[1] + 3})" in out


def _inference(doc: dict[str, Any]) -> int:
    return sum(r["inference"] for r in doc["requests"])


def test_split_at_sides_equal_analyze_until_and_since(capsys: pytest.CaptureFixture[str]) -> None:
    at = "2026-11-28T14:03:30Z"
    doc = as_json(capsys, "compare", "--split-at", at, str(DEMO))
    (comp,) = doc["comparisons"]
    until = as_json(capsys, "analyze", "--until", at, str(DEMO))
    since = as_json(capsys, "analyze", "--since", at, str(DEMO))
    assert comp["before"]["requests"] == _inference(until) == 8
    assert comp["after"]["requests"] == _inference(since) == 11
    assert comp["before"]["requests"] + comp["after"]["requests"] == _inference(as_json(capsys, "analyze", str(DEMO)))
    assert comp["overall"]["metrics"]["e2e_p50_s"]["before"] == until["latency"]["e2e_s"]["p50"]
    assert comp["overall"]["metrics"]["e2e_p50_s"]["after"] == since["latency"]["e2e_s"]["p50"]
    assert doc["split_at"] == "2026-11-28T14:03:30+00:00"


@pytest.mark.parametrize(("argv", "message"), [
    (["compare", "missing-before.log", str(DEMO)], "missing-before.log: no such file"),
    (["compare", "--split-at", "2020-01-01T00:00:00Z", str(DEMO)], "is outside the log's span"),
    (["compare", "--split-at", "2026-11-28T14:03:30Z", str(DEMO), str(DEMO)], "give one PATH, not 2"),
    (["compare", "--by-run", str(DEMO), str(DEMO)], "give one PATH, not 2"),
    (["compare", str(DEMO)], "give two logs, BEFORE and AFTER"),
    (["compare", "--split-at", "half past two", str(DEMO)], "invalid time"),
    (["compare", "--by-run", str(DEMO)], "holds 1 server run(s): nothing to compare"),
    (["compare", "--by-run", "--split-at", "2026-11-28T14:03:30Z", str(DEMO)], "not allowed with argument"),
])
def test_usage_errors_are_one_line_and_exit_2(argv: list[str], message: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    try:
        rc = main(["--no-config", *argv])
    except SystemExit as exc:  # argparse's own checks (the two modes at once) exit through its error()
        rc = exc.code  # type: ignore[assignment]
    out, err = capsys.readouterr()
    assert rc == 2
    assert out == ""
    assert err.startswith("ietop: error: ") and err.count("\n") == 1, err
    assert message in err and "Traceback" not in err


def test_help_and_completion_know_compare(capsys: pytest.CaptureFixture[str]) -> None:
    rc, script, _ = run(capsys, "completion", "bash")
    assert rc == 0
    for word in ("compare", "--split-at", "--by-run"):
        assert word in script
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    assert "ietop compare before.log after.log" in capsys.readouterr().out
