"""examples/ (Prometheus scrape config, alert rules, Grafana dashboard) against Debian's real Prometheus 2.x.

promtool checks the config and the rules and runs the rules' unit tests (ietop-alerts.test.yml: each alert
fires on its series with its rendered annotations, and stays quiet on a healthy neighbour). A real Prometheus,
started with the example's own scrape job (only the intervals and targets changed), scrapes a stand-in of the
exporter (contract_sample.py: every contract metric, made-up values) and must answer every dashboard query and
template variable with data, load and evaluate every alert rule, and keep the engines' own `instance`.
The real exporter's output is checked by tests/export/test_prometheus_real.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e_support.procs import free_port
from tests.export import contract_sample
from tests.export.prometheus_support import (
    Prometheus,
    QueryError,
    needs_prometheus,
    needs_promtool,
    running_child,
    running_prometheus,
    tool,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DASHBOARD = EXAMPLES / "grafana-ietop.json"
ALERTS = EXAMPLES / "ietop-alerts.yml"
ALERT_TESTS = Path(__file__).with_name("ietop-alerts.test.yml")
SAMPLE = Path(__file__).with_name("contract_sample.py")
ENGINE_INSTANCES = {contract_sample.OLLAMA[1], contract_sample.VLLM[1]}
# Grafana's interval macros, as Grafana would expand them for a 1 s scrape interval.
MACROS = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1m"}
LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.+),\s*(?P<label>\w+)\)$")


def promtool(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("promtool"), *args],
        cwd=ROOT,
        input=None if stdin is None else stdin.decode(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@needs_promtool
def test_alert_rules_pass_promtool_check() -> None:
    done = promtool("check", "rules", str(ALERTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 6 rules found" in done.stdout


@needs_promtool
def test_alert_rules_fire_as_their_unit_tests_say() -> None:
    done = promtool("test", "rules", str(ALERT_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_scrape_config_passes_promtool_check() -> None:
    # promtool also checks the rule file the config names, relative to the config.
    done = promtool("check", "config", str(EXAMPLES / "prometheus.yml"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 1 rule files found" in done.stdout


@needs_promtool
def test_contract_sample_passes_promtool_check_metrics() -> None:
    # Names, types and label names as the contract gives them, exposed by prometheus-client as the exporter is:
    # promtool's lint (counter suffixes, units, help text) accepts them. The real exporter's output:
    # tests/export/test_prometheus_real.py.
    done = promtool("check", "metrics", stdin=contract_sample.exposition())
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout + done.stderr == ""


# --- the Grafana dashboard ---------------------------------------------------------------------------------


def dashboard() -> dict[str, Any]:
    import json

    doc: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return doc


def all_panels(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows included."""
    out = []
    for panel in doc["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def variables(doc: dict[str, Any]) -> dict[str, str]:
    """Template variable name → its query."""
    out = {}
    for var in doc["templating"]["list"]:
        query = var["query"]
        out[var["name"]] = query["query"] if isinstance(query, dict) else query
    return out


def promql(expr: str, names: list[str]) -> str:
    """`expr` as Grafana would send it with every variable set to All (`.*`) and a 1 m interval."""
    for macro, value in MACROS.items():
        expr = expr.replace(macro, value)
    for name in names:
        expr = re.sub(rf"\$\{{{name}(?::\w+)?\}}|\$\[\[{name}\]\]|\${name}\b", ".*", expr)
    assert "$" not in expr, f"a variable the dashboard does not define: {expr}"
    return expr


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, expr) of every target of every panel."""
    return [
        (panel["title"], target["expr"]) for panel in all_panels(dashboard()) for target in panel.get("targets", [])
    ]


def test_dashboard_is_importable_with_a_prometheus_input() -> None:
    doc = dashboard()
    assert doc["schemaVersion"] >= 36
    assert [(i["name"], i["type"], i["pluginId"]) for i in doc["__inputs"]] == [
        ("DS_PROMETHEUS", "datasource", "prometheus")
    ]
    datasource = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
    names = variables(doc)
    assert names["instance"].startswith("label_values(ietop_engine_up") and names["instance"].endswith(", instance)")
    assert all(var["datasource"] == datasource for var in doc["templating"]["list"])
    panels = all_panels(doc)
    assert len({p["id"] for p in panels}) == len(panels), "panel ids must be unique"
    for panel in panels:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == datasource, panel["title"]
        assert panel["targets"], f"{panel['title']}: no query"
        for target in panel["targets"]:
            assert target["expr"].strip(), f"{panel['title']}: a target without expr"
            assert target["datasource"] == datasource, panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]


def test_dashboard_panels_do_not_overlap() -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in all_panels(dashboard()):
        grid = panel["gridPos"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = panel["title"]


def test_dashboard_covers_the_issue_metrics() -> None:
    # Issue 24's list: residency, loads and evictions with cause, TTFT/ITL/duration percentiles, truncations,
    # hints, engine up, GPU and host memory.
    exprs = "\n".join(expr for _, expr in dashboard_queries())
    for needle in (
        "ietop_model_resident",
        "ietop_model_loads_total",
        "(le, host, instance, model)",
        "by (host, instance, model, for_model) (increase(ietop_evictions_total",
        "ietop_time_to_first_token_seconds_bucket",
        "ietop_inter_token_latency_seconds_bucket",
        "ietop_request_duration_seconds_bucket",
        "ietop_prompt_truncations_total",
        "ietop_hint_active",
        "ietop_engine_up",
        "ietop_gpu_memory_used_bytes",
        "ietop_host_memory_used_bytes",
    ):
        assert needle in exprs, needle
    for quantile in ("0.5", "0.9", "0.99"):
        assert (
            f"histogram_quantile({quantile}, sum by (le, host, instance, model) (rate(ietop_time_to_first_token_seconds_bucket"
            in exprs
        )


# --- against a real Prometheus ------------------------------------------------------------------------------


def example_config(target: str) -> str:
    """examples/prometheus.yml with 1 s intervals and `target` instead of the two example hosts: the job
    itself (honor_labels, the `host` relabelling, the rule file) is the example's."""
    text = (EXAMPLES / "prometheus.yml").read_text(encoding="utf-8")
    hosts = "          - gpu-box-1.example.internal:9464\n          - gpu-box-2.example.internal:9464\n"
    assert hosts in text and text.count("interval: 15s") == 3, "examples/prometheus.yml changed: update this test"
    return text.replace(hosts, f"          - {target}\n").replace("interval: 15s", "interval: 1s")


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    tool("prometheus")
    workdir = tmp_path_factory.mktemp("prometheus")
    port = free_port()
    with running_child(
        [sys.executable, str(SAMPLE), str(port)], ready_url=f"http://127.0.0.1:{port}/metrics", logs=workdir / "logs"
    ):
        shutil.copy(ALERTS, workdir / ALERTS.name)
        with running_prometheus(workdir, config=example_config(f"127.0.0.1:{port}")) as prom:
            # Three scrapes: every rate()/increase() over a 1 m window has two samples.
            prom.wait_for_scrapes("ietop", scrapes=3)
            yield prom


@needs_prometheus
def test_scrape_keeps_the_engines_instance_and_adds_the_host(prometheus: Prometheus) -> None:
    samples = prometheus.vector("ietop_engine_up")
    assert {s.labels["instance"] for s in samples} == ENGINE_INSTANCES
    assert all(s.labels["host"] == "127.0.0.1" and "exported_instance" not in s.labels for s in samples)
    # The exporter sets no `instance` on its host's gauges: they keep the target's address.
    target = {s.labels["instance"] for s in prometheus.vector("up")}
    assert {s.labels["instance"] for s in prometheus.vector("ietop_host_memory_used_bytes")} == target


@needs_prometheus
def test_every_dashboard_query_evaluates_with_data(prometheus: Prometheus) -> None:
    names = list(variables(dashboard()))
    failures = []
    for title, expr in dashboard_queries():
        try:
            samples = prometheus.vector(promql(expr, names))
        except QueryError as error:
            failures.append(f"{title}: {error}")
            continue
        if not samples:
            failures.append(f"{title}: no data for {promql(expr, names)}")
    assert not failures, "\n".join(failures)


@needs_prometheus
def test_dashboard_variables_list_hosts_and_engines(prometheus: Prometheus) -> None:
    found = {}
    names = list(variables(dashboard()))
    for name, query in variables(dashboard()).items():
        m = LABEL_VALUES.match(query)
        assert m is not None, f"${name}: {query}"
        found[name] = {s.labels.get(m["label"]) for s in prometheus.vector(promql(m["selector"], names))}
    assert found == {"host": {"127.0.0.1"}, "instance": ENGINE_INSTANCES}


@needs_prometheus
def test_alert_rules_load_and_evaluate_on_the_contract_metrics(prometheus: Prometheus) -> None:
    rules = prometheus.wait_for_rules(
        lambda rules: len(rules) == 6 and all(r["lastEvaluation"] > "0001-01-01T00:00:00Z" for r in rules),
        what="every rule evaluated once",
    )
    for rule in rules:
        assert rule["type"] == "alerting" and rule["health"] == "ok", rule
        assert rule["duration"] > 0, f"{rule['name']}: no `for:`"
        assert rule["labels"]["severity"] in {"warning", "critical"}, rule["name"]
        assert set(rule["annotations"]) == {"summary", "description"}, rule["name"]
    # The sample has a setting not in effect: its rule matches it (pending for 5 min before it would fire);
    # every engine is up, so the engine-down rule matches nothing.
    states = {r["name"]: r["state"] for r in prometheus.rules()}
    assert states["IetopSettingNotInEffect"] == "pending"
    assert states["IetopEngineDown"] == "inactive"
    assert states["IetopExporterDown"] == "inactive"
