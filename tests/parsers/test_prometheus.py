"""Prometheus text -> Scrape: the format's corners, vLLM's renames, malformed input, and a round trip through
prometheus_client's own exposition."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary, generate_latest

from parsers.events import MetricSample, Scrape
from parsers.vllm.metrics import COUNTERS, GAUGES, HISTOGRAMS, canonical, is_renamed, split_suffix
from parsers.vllm.prometheus import ScrapeError, parse_scrape, parse_scrape_counted

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "vllm" / "metrics"
TS = datetime(2026, 11, 29, 15, 51, 58, tzinfo=timezone.utc)
EP = "http://127.0.0.1:8000/metrics"


def values(scrape: Scrape) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, s.labels): s.value for s in scrape.samples}


def test_counter_gauge_histogram_summary() -> None:
    text = """\
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 1427.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m",engine="0"} 3
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.75
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 2.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 2.0
# TYPE rpc_seconds summary
rpc_seconds{quantile="0.5"} 0.25
rpc_seconds_sum 7.5
rpc_seconds_count 30
"""
    scrape = parse_scrape(text, EP, TS)
    assert scrape == Scrape(0, TS, EP, scrape.samples)
    got = values(scrape)
    lab = (("engine", "0"), ("model_name", "m"))
    assert got[("vllm:prompt_tokens_total", lab)] == 1427.0
    assert got[("vllm:num_requests_running", lab)] == 3.0  # labels sorted whatever the text order
    assert got[("vllm:time_to_first_token_seconds_bucket", (("engine", "0"), ("le", "+Inf"), ("model_name", "m")))] == 2
    assert got[("vllm:time_to_first_token_seconds_sum", lab)] == 0.75
    assert got[("rpc_seconds", (("quantile", "0.5"),))] == 0.25
    assert got[("rpc_seconds_count", ())] == 30.0
    assert all(isinstance(s.value, float) and s.ts == TS and s.line == 0 for s in scrape.samples)
    assert len(scrape.samples) == 9


def test_label_escapes_and_scientific_notation() -> None:
    text = (
        'vllm:kv_cache_usage_perc{engine="0",model_name="zai-org/GLM-4.5"} 9.75010481363281e-06\n'
        'odd{path="C:\\\\models\\\\x",quote="say \\"hi\\"",nl="a\\nb"} 1.5E+3\n'
        "big 1.7537953269352946e+09\n"
        "nan_gauge NaN\n"
        "inf_gauge +Inf\n"
    )
    got = values(parse_scrape(text, EP, None))
    assert got[("vllm:kv_cache_usage_perc", (("engine", "0"), ("model_name", "zai-org/GLM-4.5")))] == 9.75010481363281e-06
    assert got[("odd", (("nl", "a\nb"), ("path", "C:\\models\\x"), ("quote", 'say "hi"')))] == 1500.0
    assert got[("big", ())] == 1753795326.9352946
    assert math.isnan(got[("nan_gauge", ())])
    assert got[("inf_gauge", ())] == math.inf


def test_created_samples_are_dropped() -> None:
    text = """\
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0"} 2.0
# TYPE vllm:num_preemptions_created gauge
vllm:num_preemptions_created{engine="0"} 1.7959675136678367e+09
vllm:request_prompt_tokens_created{engine="0"} 1.7959675136678367e+09
"""
    scrape = parse_scrape(text, EP, TS)
    assert [s.name for s in scrape.samples] == ["vllm:num_preemptions_total"]


def test_counter_without_total_gets_it_as_prometheus_client_reports() -> None:
    typed = parse_scrape("# TYPE vllm:num_preemptions counter\nvllm:num_preemptions 4\n", EP, None)
    untyped = parse_scrape("vllm:num_preemptions 4\n", EP, None)  # an excerpt without its TYPE line
    assert [s.name for s in typed.samples] == [s.name for s in untyped.samples] == ["vllm:num_preemptions_total"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"),
        ("vllm:gpu_prefix_cache_queries_total", "vllm:prefix_cache_queries_total"),
        ("vllm:gpu_prefix_cache_hits_total", "vllm:prefix_cache_hits_total"),
        ("vllm:gpu_prefix_cache_hits", "vllm:prefix_cache_hits_total"),
        ("vllm:gpu_prefix_cache_queries_created", "vllm:prefix_cache_queries_created"),
        ("vllm:time_per_output_token_seconds_bucket", "vllm:inter_token_latency_seconds_bucket"),
        ("vllm:time_per_output_token_seconds_sum", "vllm:inter_token_latency_seconds_sum"),
        ("vllm:time_per_output_token_seconds_count", "vllm:inter_token_latency_seconds_count"),
        ("vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds"),
        ("vllm:time_in_queue_requests_bucket", "vllm:request_queue_time_seconds_bucket"),
    ],
)
def test_canonical_renames(old: str, new: str) -> None:
    assert canonical(old) == new
    assert is_renamed(old)
    assert canonical(new) == new  # idempotent


@pytest.mark.parametrize(
    "name",
    [
        "vllm:request_time_per_output_token_seconds_bucket",  # a different metric, must not be renamed
        "vllm:iteration_tokens_total_bucket",  # a histogram whose base ends in _total
        "vllm:iteration_tokens_total_count",
        "vllm:prompt_tokens_total",
        "vllm:gpu_prefix_cache_hit_rate",  # removed gauge without a successor of the same meaning
        "process_cpu_seconds_total",
        "http_requests_total",
    ],
)
def test_canonical_leaves_other_names(name: str) -> None:
    assert canonical(name) == name
    assert not is_renamed(name)


def test_split_suffix() -> None:
    assert split_suffix("vllm:iteration_tokens_total_bucket") == ("vllm:iteration_tokens_total", "_bucket")
    assert split_suffix("vllm:prompt_tokens_total") == ("vllm:prompt_tokens", "_total")
    assert split_suffix("vllm:kv_cache_usage_perc") == ("vllm:kv_cache_usage_perc", "")


def test_tables_use_canonical_names() -> None:
    for name in (*COUNTERS.values(), *GAUGES.values(), *HISTOGRAMS.values()):
        assert canonical(name) == name


def test_old_names_parse_to_canonical_names() -> None:
    text = """\
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.25
# TYPE vllm:gpu_prefix_cache_queries counter
vllm:gpu_prefix_cache_queries{engine="0",model_name="m"} 32
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{engine="1",le="0.01",model_name="m"} 229.0
vllm:time_per_output_token_seconds_bucket{engine="1",le="+Inf",model_name="m"} 243.0
vllm:time_per_output_token_seconds_sum{engine="1",model_name="m"} 3.5
vllm:time_per_output_token_seconds_count{engine="1",model_name="m"} 243.0
"""
    got = values(parse_scrape(text, EP, None))
    lab = (("engine", "1"), ("model_name", "m"))
    assert got == {
        ("vllm:kv_cache_usage_perc", (("model_name", "m"),)): 0.25,
        ("vllm:prefix_cache_queries_total", (("engine", "0"), ("model_name", "m"))): 32.0,
        ("vllm:inter_token_latency_seconds_bucket", (("engine", "1"), ("le", "0.01"), ("model_name", "m"))): 229.0,
        ("vllm:inter_token_latency_seconds_bucket", (("engine", "1"), ("le", "+Inf"), ("model_name", "m"))): 243.0,
        ("vllm:inter_token_latency_seconds_sum", lab): 3.5,
        ("vllm:inter_token_latency_seconds_count", lab): 243.0,
    }


@pytest.mark.parametrize("new_first", [True, False])
def test_new_name_wins_when_both_are_exposed(new_first: bool) -> None:
    old = 'vllm:gpu_prefix_cache_hits_total{engine="0"} 1.0'
    new = 'vllm:prefix_cache_hits_total{engine="0"} 2.0'
    lines = [new, old] if new_first else [old, new]
    scrape, errors = parse_scrape_counted("\n".join(lines) + "\n", EP, None)
    assert errors == 0  # a deprecated twin is expected, not an error
    assert values(scrape) == {("vllm:prefix_cache_hits_total", (("engine", "0"),)): 2.0}


def test_true_duplicate_counts_as_an_error_and_keeps_the_first() -> None:
    scrape, errors = parse_scrape_counted("x 1\nx 2\n", EP, None)
    assert errors == 1
    assert values(scrape) == {("x", ()): 1.0}


GOOD = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n"


@pytest.mark.parametrize(
    ("bad", "errors"),
    [
        ("foo{", 1),
        ('foo{a="b} 1', 1),
        ("foo abc", 1),
        ("foo", 1),
        ("NaN", 1),  # no name/value split: the library alone would read metric "Na" = NaN
        ('foo{a="b"}', 1),
        ("foo 1_0", 1),
        ('x{a="1",a="2"} 1', 1),  # duplicate label name
        ("9foo 1", 1),
        ("foo{a=b} 1", 1),  # unquoted label value
        ("{} 1", 1),
        ("\x00\xff garbage", 1),
        ("# TYPE foo", 1),  # TYPE without a type: the header fails, its samples are still read untyped
        ("foo 1\nbar\nbaz 2", 1),
        ("<html><body>502 Bad Gateway</body></html>", 1),
    ],
)
def test_malformed_lines_are_counted_not_raised(bad: str, errors: int) -> None:
    text = GOOD + bad + "\n" + 'vllm:num_requests_waiting{engine="0"} 5\n'
    scrape, n = parse_scrape_counted(text, EP, TS)
    assert n == errors
    got = values(scrape)
    assert got[("vllm:num_requests_running", ())] == 3.0
    assert got[("vllm:num_requests_waiting", (("engine", "0"),))] == 5.0
    assert parse_scrape(text, EP, TS) == scrape  # something parsed: no exception


def test_bad_line_inside_a_family_keeps_its_other_samples_and_type() -> None:
    text = """\
# TYPE c counter
c{k="a"} 1
c{k="b"} oops
c{k="c"} 3
# TYPE g gauge
g 7
"""
    scrape, errors = parse_scrape_counted(text, EP, None, line=10)
    assert errors == 1
    assert [(s.line, s.name, s.value) for s in scrape.samples] == [(11, "c_total", 1.0), (13, "c_total", 3.0),
                                                                   (15, "g", 7.0)]


@pytest.mark.parametrize("text", ["garbage", "foo bar baz\nqux", "<html>\n<body>oops</body>\n</html>", "{}{}{"])
def test_nothing_parsed_raises_one_line_scrape_error(text: str) -> None:
    with pytest.raises(ScrapeError) as info:
        parse_scrape(text, EP, TS)
    message = str(info.value)
    assert "\n" not in message
    assert EP in message
    assert isinstance(info.value, ValueError)
    scrape, errors = parse_scrape_counted(text, EP, TS)  # the counted form never raises
    assert scrape.samples == ()
    assert errors >= 1


SCRAPE_ALPHABET = st.sampled_from([*'abc_:{}="\\, #\n\t019.eE+-', "le", "+Inf", "NaN", "# TYPE ", " counter", "\x00"])


@given(st.lists(SCRAPE_ALPHABET, max_size=80).map("".join) | st.text(max_size=200))
def test_arbitrary_text_never_raises_anything_but_scrape_error(text: str) -> None:
    scrape, errors = parse_scrape_counted(text, EP, TS)
    assert errors >= 0
    raised: ScrapeError | None = None
    try:
        result = parse_scrape(text, EP, TS)
    except ScrapeError as exc:  # only when nothing parsed (a text of _created samples alone does not raise)
        raised = exc
    if raised is None:
        assert repr(result) == repr(scrape)  # repr: NaN != NaN
    else:
        assert not scrape.samples and errors and "\n" not in str(raised)


@pytest.mark.parametrize("text", ["", "\n\n", "# HELP x y\n# TYPE x gauge\n", "x_created 1.7e9\n"])
def test_empty_or_comment_only_text_is_an_empty_scrape(text: str) -> None:
    assert parse_scrape(text, EP, TS) == Scrape(0, TS, EP, ())


def test_line_numbers_in_a_saved_file() -> None:
    text = "# HELP a x\n# TYPE a gauge\na 1\n\nb 2\n"
    scrape = parse_scrape(text, EP, None, line=100)
    assert scrape.line == 100
    assert [(s.name, s.line) for s in scrape.samples] == [("a", 102), ("b", 104)]


def test_round_trip_through_generate_latest() -> None:
    registry = CollectorRegistry()
    counter = Counter("vllm:prompt_tokens", "prompt tokens", ["model_name", "engine"], registry=registry)
    counter.labels(model_name='we"ird\\name\n', engine="0").inc(1427)
    hist = Histogram("vllm:time_to_first_token_seconds", "ttft", ["engine"], buckets=(0.001, 0.04, 2560.0),
                     registry=registry)
    for value in (0.0005, 0.02, 0.03, 0.05, 3000.0):
        hist.labels(engine="1").observe(value)
    Gauge("vllm:kv_cache_usage_perc", "kv", registry=registry).set(9.75010481363281e-06)
    summary = Summary("rpc_seconds", "rpc", registry=registry)
    summary.observe(1.25)
    text = generate_latest(registry).decode()

    got = values(parse_scrape(text, EP, TS))
    assert got[("vllm:prompt_tokens_total", (("engine", "0"), ("model_name", 'we"ird\\name\n')))] == 1427.0
    bucket = "vllm:time_to_first_token_seconds_bucket"
    assert [got[(bucket, (("engine", "1"), ("le", le)))] for le in ("0.001", "0.04", "2560.0", "+Inf")] == [1, 3, 4, 5]
    assert got[("vllm:time_to_first_token_seconds_count", (("engine", "1"),))] == 5.0
    assert got[("vllm:time_to_first_token_seconds_sum", (("engine", "1"),))] == pytest.approx(3000.1005)
    assert got[("vllm:kv_cache_usage_perc", ())] == 9.75010481363281e-06
    assert got[("rpc_seconds_sum", ())] == 1.25
    assert not [k for k in got if k[0].endswith("_created")]
    # Every sample the library wrote came back (the _created gauges aside), with its value.
    written = [line for line in text.splitlines() if line and not line.startswith("#") and "_created" not in line]
    assert len(got) == len(written)


@pytest.mark.parametrize("path", sorted(FIX.glob("*.txt")), ids=lambda p: p.name)
def test_fixtures_parse_without_errors(path: Path) -> None:
    scrape, errors = parse_scrape_counted(path.read_text(), EP, TS, line=1)
    assert errors == 0
    assert scrape.samples
    assert all(isinstance(s, MetricSample) and not s.name.endswith("_created") for s in scrape.samples)
    lines = path.read_text().split("\n")
    for sample in scrape.samples:  # each sample points at its own line in the file
        assert lines[sample.line - 1].split("{")[0].split(" ")[0] in (sample.name, _raw_names(sample.name))


def _raw_names(name: str) -> str:
    # The legacy spellings that appear in the fixtures (samples 024 and 025).
    return {
        "vllm:inter_token_latency_seconds_bucket": "vllm:time_per_output_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_count": "vllm:time_per_output_token_seconds_count",
        "vllm:prefix_cache_hits_total": "vllm:gpu_prefix_cache_hits_total",
    }.get(name, name)


def test_sample_024_deprecated_gpu_prefix_and_scientific_kv() -> None:
    path = FIX / "024-metrics-v1-0.10.0-engine-label-deprecated-gpu-prefix.txt"
    got = values(parse_scrape(path.read_text(), EP, TS))
    lab = (("engine", "0"), ("model_name", "zai-org/GLM-4.5"))
    assert got == {
        ("vllm:prefix_cache_hits_total", lab): 0.0,
        ("vllm:kv_cache_usage_perc", lab): 9.75010481363281e-06,
        ("vllm:prefix_cache_queries_total", lab): 32.0,
    }
