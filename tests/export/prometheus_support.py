"""A real Prometheus (and any other server) as a child process on 127.0.0.1, for the `ietop export` tests.

`running_prometheus(workdir, targets)` starts Debian's `prometheus` on a free port with an empty TSDB in
`workdir`, scraping `targets` every second with `honor_labels: true` (the exporter sets `instance` itself), and
waits until `/-/ready`; its query helpers retry until a condition holds, because on CI's two busy cores a
scrape or a rule evaluation can lag by seconds. `running_child(argv, ready_url=...)` starts any command and
waits until a URL answers. Without `prometheus`/`promtool` on PATH the tests that need them skip and say why.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e_support.procs import free_port, stop_pid

HOST = "127.0.0.1"
DEADLINE_S = 120.0
"""Default wait for a server to come up or a query to hold: generous, CI runs the suite on two busy cores."""
MISSING = (
    "is not installed (Debian/Ubuntu: apt-get install --no-install-recommends prometheus; .ci/run "
    "installs it where it can)"
)
# Requests to 127.0.0.1 must not go through an http_proxy set in the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def tool(name: str) -> str:
    """The path of `name` (`prometheus` or `promtool`) on PATH; skips the calling test when it is absent."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} {MISSING}")
    return path


needs_prometheus = pytest.mark.skipif(shutil.which("prometheus") is None, reason=f"prometheus {MISSING}")
needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason=f"promtool {MISSING}")


def http_get(url: str, timeout: float = 5.0, headers: Mapping[str, str] | None = None) -> tuple[int, bytes]:
    """(status, body) of a GET; an HTTP error status is returned, not raised. Connection errors raise OSError."""
    request = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as error:
        with error:
            return int(error.code), error.read()


def tail(path: Path, lines: int = 40) -> str:
    """The last lines of a log file, for failure messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class Child:
    """A command started by `start_child`: its process, its argv and the files its stdout and stderr go to."""

    argv: list[str]
    process: subprocess.Popen[bytes]
    stdout_path: Path
    stderr_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def describe(self) -> str:
        """argv, exit status and the tails of both outputs, for assertion messages."""
        return (
            f"{' '.join(self.argv)} (exit status {self.process.poll()})\n--- stdout ---\n"
            f"{tail(self.stdout_path)}\n--- stderr ---\n{tail(self.stderr_path)}"
        )

    def stop(self, grace: float = 15.0) -> int:
        """SIGTERM, SIGKILL after `grace` seconds; the exit status (-15 if it died of the SIGTERM itself)."""
        return stop_pid(self.process, grace)


def wait_for_url(
    url: str, *, child: Child | None = None, status: int | None = 200, deadline_s: float = DEADLINE_S
) -> bytes:
    """Poll `url` until it answers with `status` (None: any HTTP answer); its body. Fails at once if `child`
    exits, and after `deadline_s` with the last answer or error (and the child's output)."""
    deadline = time.monotonic() + deadline_s
    last = "nothing tried"
    while True:
        if child is not None and child.process.poll() is not None:
            pytest.fail(f"exited before {url} answered: {child.describe()}")
        try:
            got, body = http_get(url, timeout=min(5.0, deadline_s))
        except OSError as error:
            last = repr(error)
        else:
            if status is None or got == status:
                return body
            last = f"HTTP {got}: {body[:300]!r}"
        if time.monotonic() > deadline:
            pytest.fail(
                f"{url} did not answer within {deadline_s:.0f} s (last: {last})"
                + (f"\n{child.describe()}" if child is not None else "")
            )
        time.sleep(0.2)


def start_child(
    argv: Sequence[str],
    *,
    ready_url: str,
    logs: Path,
    status: int | None = 200,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    deadline_s: float = DEADLINE_S,
) -> Child:
    """Start `argv` (stdin closed, stdout/stderr to `logs`/<name>.stdout|.stderr) and wait until `ready_url`
    answers with `status`. `env` replaces the environment when given. The child is stopped if it never does."""
    logs.mkdir(parents=True, exist_ok=True)
    name = Path(argv[0]).name
    out_path, err_path = logs / f"{name}.stdout", logs / f"{name}.stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=None if env is None else dict(env),
            cwd=cwd,
        )
    child = Child(list(argv), process, out_path, err_path)
    try:
        wait_for_url(ready_url, child=child, status=status, deadline_s=deadline_s)
    except BaseException:
        child.stop()
        raise
    return child


@contextlib.contextmanager
def running_child(
    argv: Sequence[str],
    *,
    ready_url: str,
    logs: Path,
    status: int | None = 200,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    deadline_s: float = DEADLINE_S,
) -> Iterator[Child]:
    """`start_child` for a `with` block; the child is stopped (SIGTERM, then SIGKILL) when the block ends."""
    child = start_child(argv, ready_url=ready_url, logs=logs, status=status, env=env, cwd=cwd, deadline_s=deadline_s)
    try:
        yield child
    finally:
        child.stop()


@dataclass(frozen=True)
class Sample:
    """One element of an instant vector: its labels (`__name__` included when the series keeps it) and value."""

    labels: dict[str, str]
    value: float

    @property
    def name(self) -> str:
        return self.labels.get("__name__", "")


class QueryError(AssertionError):
    """Prometheus answered a query with `status: error` (a parse or evaluation error)."""


def scrape_config(
    targets: Sequence[str], *, job: str = "ietop", interval: str = "1s", rule_files: Sequence[str] = ()
) -> str:
    """A Prometheus config scraping `targets` every `interval` with `honor_labels: true`, as JSON (which
    Prometheus reads as YAML). Rule files are evaluated every `interval` too."""
    config: dict[str, Any] = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval, "scrape_timeout": interval},
        "rule_files": list(rule_files),
        "scrape_configs": [
            {"job_name": job, "honor_labels": True, "static_configs": [{"targets": list(targets)}] if targets else []}
        ],
    }
    return json.dumps(config, indent=2)


@dataclass
class Prometheus:
    """A running Prometheus: its base URL, process and working folder (config, TSDB, log)."""

    url: str
    process: subprocess.Popen[bytes]
    workdir: Path
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = self.workdir / "prometheus.log"

    def api(self, path: str, **params: str) -> Any:
        """The `data` of a GET on /api/v1/<path>; raises QueryError on `status: error`."""
        query = urllib.parse.urlencode(params)
        status, body = http_get(f"{self.url}/api/v1/{path}" + (f"?{query}" if query else ""), timeout=30.0)
        try:
            doc = json.loads(body)
        except ValueError:
            raise QueryError(f"/api/v1/{path} {params}: HTTP {status}, not JSON: {body[:300]!r}") from None
        if doc.get("status") != "success":
            raise QueryError(f"/api/v1/{path} {params}: HTTP {status}: {doc.get('errorType')}: {doc.get('error')}")
        return doc["data"]

    def query(self, expr: str, at: float | None = None) -> dict[str, Any]:
        """The raw `data` ({resultType, result}) of an instant query; QueryError if it does not parse or
        evaluate."""
        params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        data: dict[str, Any] = self.api("query", **params)
        return data

    def vector(self, expr: str, at: float | None = None) -> list[Sample]:
        """An instant query's samples (a scalar result is one sample without labels)."""
        data = self.query(expr, at)
        if data["resultType"] == "scalar":
            return [Sample({}, float(data["result"][1]))]
        if data["resultType"] != "vector":
            raise QueryError(f"{expr}: a {data['resultType']}, not an instant vector")
        return [Sample(dict(item["metric"]), float(item["value"][1])) for item in data["result"]]

    def value(self, expr: str, at: float | None = None) -> float | None:
        """The value of a query that yields at most one sample (`sum(...)`); None when it yields none."""
        samples = self.vector(expr, at)
        if len(samples) > 1:
            raise QueryError(f"{expr}: {len(samples)} samples, expected at most one: {samples}")
        return samples[0].value if samples else None

    def wait_for(
        self, expr: str, until: Callable[[list[Sample]], bool], *, what: str = "", deadline_s: float = DEADLINE_S
    ) -> list[Sample]:
        """Query `expr` until `until(samples)` holds; those samples. A query error fails at once (retrying
        does not fix a typo); a condition still false after `deadline_s` fails with the last samples, the
        targets' scrape errors and the log's tail."""
        deadline = time.monotonic() + deadline_s
        while True:
            samples = self.vector(expr)
            if until(samples):
                return samples
            if time.monotonic() > deadline:
                pytest.fail(
                    f"{what or expr}: not true within {deadline_s:.0f} s; last {expr} = {samples}\n"
                    f"targets: {self.target_health()}\n--- prometheus log ---\n{tail(self.log_path)}"
                )
            time.sleep(0.5)

    def wait_for_value(self, expr: str, expected: float, *, deadline_s: float = DEADLINE_S) -> float:
        """Wait until the single-sample `expr` equals `expected` (floats within 1e-9 relative); its value."""
        samples = self.wait_for(
            expr,
            lambda s: len(s) == 1 and math.isclose(s[0].value, expected, rel_tol=1e-9),
            what=f"{expr} == {expected}",
            deadline_s=deadline_s,
        )
        return samples[0].value

    def targets(self) -> list[dict[str, Any]]:
        """/api/v1/targets' active targets (scrapeUrl, health, lastError, labels, …)."""
        data: dict[str, Any] = self.api("targets", state="active")
        active: list[dict[str, Any]] = data["activeTargets"]
        return active

    def target_health(self) -> list[tuple[str, str, str]]:
        return [(t["scrapeUrl"], t["health"], t["lastError"]) for t in self.targets()]

    def wait_for_scrapes(self, job: str = "ietop", scrapes: int = 2, *, deadline_s: float = DEADLINE_S) -> None:
        """Wait until every active target of `job` has been scraped `scrapes` times and is up (so `rate()` and
        `increase()` over its series have two samples to work with); fails with the targets' last errors.
        The job must have a target: Prometheus applies a new target list up to 5 s after it is ready."""
        deadline = time.monotonic() + deadline_s
        while (want := sum(1 for t in self.targets() if t["labels"].get("job") == job)) == 0:
            if time.monotonic() > deadline:
                pytest.fail(f"no {job} target within {deadline_s:.0f} s:\n{tail(self.log_path)}")
            time.sleep(0.5)
        self.wait_for(
            f'count_over_time(up{{job="{job}"}}[1h])',
            lambda s: len(s) == want and all(x.value >= scrapes for x in s),
            what=f"{want} {job} target(s) scraped {scrapes} times",
            deadline_s=deadline_s,
        )
        self.wait_for(
            f'up{{job="{job}"}}',
            lambda s: len(s) == want and all(x.value == 1 for x in s),
            what=f"every {job} target up",
            deadline_s=deadline_s,
        )

    def wait_for_rules(
        self, until: Callable[[list[dict[str, Any]]], bool], *, what: str, deadline_s: float = DEADLINE_S
    ) -> list[dict[str, Any]]:
        """Poll /api/v1/rules until `until(rules)` holds; those rules (see `rules`)."""
        deadline = time.monotonic() + deadline_s
        while True:
            rules = self.rules()
            if until(rules):
                return rules
            if time.monotonic() > deadline:
                pytest.fail(
                    f"{what}: not true within {deadline_s:.0f} s; rules: {json.dumps(rules)[:4000]}\n"
                    f"--- prometheus log ---\n{tail(self.log_path)}"
                )
            time.sleep(0.5)

    def rules(self) -> list[dict[str, Any]]:
        """Every rule of every group in /api/v1/rules (name, query, health, lastError, state, …)."""
        data: dict[str, Any] = self.api("rules")
        return [rule for group in data["groups"] for rule in group["rules"]]

    def stop(self, grace: float = 30.0) -> int:
        """SIGTERM (Prometheus flushes and exits 0), SIGKILL after `grace` seconds; the exit status."""
        return stop_pid(self.process, grace)


def start_prometheus(
    workdir: Path, targets: Sequence[str] = (), *, config: str | None = None, deadline_s: float = DEADLINE_S
) -> Prometheus:
    """Start Prometheus on a free 127.0.0.1 port with `config` (default: `scrape_config(targets)`) written to
    `workdir`/prometheus.yml (relative rule_files resolve from there), its TSDB in `workdir`/data, its log
    in `workdir`/prometheus.log; wait until /-/ready. Skips the test when prometheus is not installed."""
    binary = tool("prometheus")
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "prometheus.yml"
    config_path.write_text(scrape_config(targets) if config is None else config)
    log_path = workdir / "prometheus.log"
    for _attempt in range(3):
        port = free_port()
        argv = [
            binary,
            f"--config.file={config_path}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address={HOST}:{port}",
            "--log.level=info",
        ]
        with open(log_path, "wb") as log:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        child = Child(argv, process, log_path, log_path)
        try:
            wait_for_url(f"http://{HOST}:{port}/-/ready", child=child, deadline_s=deadline_s)
        except pytest.fail.Exception:
            child.stop()
            # Another process took the port between free_port() and the bind: try another one.
            if "address already in use" in tail(log_path):
                continue
            raise
        return Prometheus(f"http://{HOST}:{port}", process, workdir)
    pytest.fail(f"prometheus found no free port in 3 tries:\n{tail(log_path)}")


@contextlib.contextmanager
def running_prometheus(
    workdir: Path, targets: Sequence[str] = (), *, config: str | None = None, deadline_s: float = DEADLINE_S
) -> Iterator[Prometheus]:
    """`start_prometheus` for a `with` block; Prometheus is stopped when it ends, and must exit 0."""
    prometheus = start_prometheus(workdir, targets, config=config, deadline_s=deadline_s)
    try:
        yield prometheus
    finally:
        code = prometheus.stop()
    assert code == 0, f"prometheus exited with {code}:\n{tail(prometheus.log_path)}"
