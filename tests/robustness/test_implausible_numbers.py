"""A number no engine writes (400 digits, an overflow to inf) is counted as an unparsed line, never believed
(issue 21): no traceback, no `Infinity` in the JSON (it is not JSON), no "inf s" in the report, no table
writer refusing a value. The logs are real fixtures with one number replaced (labelled synthetic)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from ietop.cli import main
from ietop.model.store import Store
from parsers import events as ev
from parsers.events.sane import LIMIT, implausible, numeric_fields

ROOT = Path(__file__).resolve().parents[2]
BIG = "9" * 400


def strict(text: str) -> dict:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in the JSON report")

    doc: dict = json.loads(text, parse_constant=refuse)
    return doc


@pytest.fixture
def huge_load_time(tmp_path: Path) -> Path:
    real = (ROOT / "fixtures/ollama/004-v06-embeddings-truncation.log").read_text()
    log = tmp_path / "huge-load-time.log"
    changed, n = re.subn(r"started in [0-9.]+ seconds", f"started in {BIG}.5 seconds", real, count=1)
    assert n == 1
    log.write_text(changed)
    return log


def test_json_stays_json_and_the_line_is_counted_unparsed(huge_load_time: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "--json", str(huge_load_time)]) == 0
    doc = strict(capsys.readouterr().out)
    assert doc["counts"]["implausible_lines"] == 1
    assert doc["sources"][0]["unparsed_lines"] == 1
    assert all(load["load_s"] is None or load["load_s"] < LIMIT for load in doc["loads"])


def test_report_and_tables_take_it(huge_load_time: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(huge_load_time)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\binf\b", out) is None
    assert main(["analyze", "--csv", str(tmp_path / "csv"), str(huge_load_time)]) == 0
    assert BIG[:20] not in "".join(p.read_text() for p in (tmp_path / "csv").iterdir())


def test_a_token_count_too_large_for_a_float_does_not_reach_the_arithmetic() -> None:
    store = Store()
    src = store.add_source("x.log", "ollama")
    ts = datetime(2026, 1, 1, tzinfo=timezone.utc)
    # The decode timing's tokens divide its milliseconds: a 400-digit int cannot become a float.
    store.apply(src, 0.0, ev.Timing(1, ts, "eval", 120.0, int(BIG), 3))
    store.apply(src, 1.0, ev.Timing(2, ts, "total", 240.0, int(BIG), 3))
    store.facts.flush()
    assert store.sources[src].unparsed_lines == 2
    assert store.counts["implausible_lines"] == 2


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 2**53, -(2**53), 10**400])
def test_the_bound(value: float) -> None:
    assert implausible(ev.LoadDone(1, None, value)) == "duration_s"


def test_real_numbers_pass() -> None:
    assert implausible(ev.LoadDone(1, None, 12.4)) is None
    assert implausible(ev.LoadDone(1, None, None)) is None  # type: ignore[arg-type]
    assert implausible(ev.Timing(1, None, "eval", 1e6, 2**31)) is None


def test_every_event_type_has_its_numbers_checked() -> None:
    # The annotations are read as text: a field typed `int | None` and one typed `float` are both found,
    # a tuple of ints or a bool is not (one number each is what the guard bounds).
    assert numeric_fields(ev.Timing) == ("line", "ms", "tokens", "task")
    assert "co_resident" not in numeric_fields(ev.LoadDecision)
    counted = [t for t in ev.ALL_EVENT_TYPES if len(numeric_fields(t)) > 1]
    assert len(counted) > 20


def test_a_start_up_fact_is_checked_when_it_is_a_number() -> None:
    assert numeric_fields(ev.StartupFact) == ("line", "value")
    assert implausible(ev.StartupFact(1, None, "model_memory_gib", float("inf"))) == "value"
    assert implausible(ev.StartupFact(1, None, "model_memory_gib", 14.2)) is None
    assert implausible(ev.StartupFact(1, None, "listen", "http://0.0.0.0:8000")) is None


def test_json_never_carries_a_non_finite_number() -> None:
    from ietop.analyze.spool import json_dumps

    dumps = json_dumps()
    assert dumps({"a": [1.5, float("inf")], "b": {"c": float("nan")}}) == '{"a":[1.5,null],"b":{"c":null}}'
    assert dumps({"a": 1}) == '{"a":1}'


def test_a_vllm_start_up_number_too_large(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    real = (ROOT / "fixtures/vllm/010-v1-0.11-startup-custom-log-format.txt").read_text()
    log = tmp_path / "vllm-huge-memory.log"
    changed, n = re.subn(r"Model loading took [0-9.]+ GiB", f"Model loading took {BIG} GiB", real, count=1)
    assert n == 1
    log.write_text(changed)
    assert main(["analyze", "--json", str(log)]) == 0
    doc = strict(capsys.readouterr().out)
    assert doc["counts"]["implausible_lines"] == 1
    assert "model_memory_gib" not in doc["config"]["effective"]


def test_proxy_records_with_numbers_json_allows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """JSON allows `1e400` (inf as a float) and a 400-digit int; a record stamped at the end of year 9999
    leaves no room for its duration (found by bench/fuzz_campaign.py: OverflowError tracebacks)."""
    log = tmp_path / "proxy.jsonl"
    log.write_text(
        '{"method":"POST","path":"/api/chat","ttfb_s":' + BIG + ',"ttft_s":1e400,"e2e_s":0.5,"bytes_down":10,'
        '"status":200,"ts":"2026-11-29T12:00:00Z"}\n'
        '{"method":"POST","path":"/api/chat","ttft_s":0.1,"e2e_s":0.3,"bytes_down":0,"status":200,'
        '"ts":"9999-12-31T23:59:59.9"}\n')
    assert main(["analyze", "--json", "--engine", "proxy", str(log)]) == 0
    doc = strict(capsys.readouterr().out)
    assert [r["ttft_s"] for r in doc["requests"]] == [None, 0.1]
    assert doc["requests"][1]["time"].startswith("9999-12-31T23:59:59")


@pytest.mark.parametrize("body", [
    b'{"model":"m","done":true,"load_duration":' + b"9" * 309 + b',"eval_count":3}',
    b'{"model":"m","done":true,"load_duration":' + BIG.encode() + b'}',
])
def test_the_proxy_meter_takes_an_engine_answer_with_a_huge_duration(body: bytes) -> None:
    """What the proxy measures comes from the network too: a 309-digit load_duration overflowed the meter's
    float division at the end of the exchange (found by bench/fuzz_campaign.py)."""
    from parsers.api.stream import StreamMeter

    meter = StreamMeter("/api/chat", b'{"model":"m","stream":false}', "application/json", 0.0)
    meter.feed(0.1, body)
    measured = meter.finish(0.2, 200, None)
    assert measured.load_s is None


def test_a_scrape_engine_label_of_thousands_of_digits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """int() refuses a string of over 4,300 digits: a vLLM engine label that long crashed the metrics window."""
    for n, value in ((1, 0.1), (2, 0.2)):
        (tmp_path / f"metrics-{1795967000 + n * 10}.txt").write_text(
            "# TYPE vllm:kv_cache_usage_perc gauge\n"
            f'vllm:kv_cache_usage_perc{{engine="1{"0" * 5000}",model_name="m"}} {value}\n')
    assert main(["analyze", "--json", *map(str, sorted(tmp_path.iterdir()))]) == 0
    strict(capsys.readouterr().out)


def test_a_configured_number_beyond_the_bound_stays_the_claimed_text(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Fuzz run 5: `OLLAMA_NUM_PARALLEL:9999999999999999` in the server config line became a JSON integer beyond
    2**53 (not exact in a JavaScript reader). It is a claim no engine runs with: shown as the text it is."""
    log = tmp_path / "server.log"
    log.write_text('2024/08/17 14:11:10 routes.go:1125: INFO server config env="map[OLLAMA_NUM_PARALLEL:'
                   '9999999999999999 OLLAMA_MAX_LOADED_MODELS:3]"\n')
    assert main(["analyze", "--json", str(log)]) == 0
    configured = json.loads(capsys.readouterr().out)["config"]["configured"]
    assert configured["num_parallel"] == "9999999999999999"
    assert configured["max_loaded_models"] == 3
