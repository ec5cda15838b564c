"""deploy/prometheus/: the alerting rules load in promtool, pass their unit tests, and read only metrics and
labels that a real ``tracegrade serve`` (the receiver rules) or a real ``tracegrade worker --metrics-address`` (the
worker rules) exposes on /metrics (a rule on a metric that does not exist never fires); the worker rules but the
one on ``up`` also against a real ``tracegrade serve --worker-rules``, whose worker's series are on its /metrics.

Needs promtool (Debian's ``prometheus`` package): CI installs it, so its absence fails rather than skips.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import grpc
import pytest
import yaml
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tests.support.grading_traces import AgentRun, fill_store
from tests.support.server_otlp import get_text, post
from tests.support.server_process import ServerProcess
from tests.support.waiting import wait_for_value
from tests.support.worker_process import WorkerProcess, metric_samples
from tracegrade.evaluation.worker_metrics import OUTCOMES
from tracegrade.ingest.otlp_responses import Signal

ROOT = Path(__file__).resolve().parents[1]
RULES_DIR = ROOT / "deploy" / "prometheus"
RULES = RULES_DIR / "tracegrade-alerts.yaml"
RULE_TESTS = RULES_DIR / "tracegrade-alerts.test.yaml"
TOKEN = "alerts-test-token"
RULE_LABELS = {("tenant", "default"), ("rule", "answered")}
RECEIVER_GROUP, WORKER_GROUP = "tracegrade-receiver", "tracegrade-worker"  # whose /metrics each group reads

# a selector of a tracegrade metric: its name and, if any, the {...} matchers after it
_SELECTOR = re.compile(r"\b(tracegrade_[a-z0-9_]+)(\{[^}]*\})?")
_MATCHER = re.compile(r'(\w+)\s*(?:=~|!~|!=|=)\s*"([^"]*)"')
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s", re.MULTILINE)
_HTTP_STATUS = re.compile(r"[1-5][0-9][0-9]")


def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool is missing: apt-get install prometheus (Debian's package brings promtool)"
    return path


def rule_expressions(path: Path, group: str | None = None) -> dict[str, str]:
    """Every rule of a rules file (of its ``group`` only, if named): alert (or record) name -> its PromQL
    expression."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {
        rule.get("alert") or rule["record"]: rule["expr"]
        for found in document["groups"]
        if group is None or found["name"] == group
        for rule in found["rules"]
    }


def exposed_series(metrics_text: str) -> dict[str, set[str]]:
    """/metrics as sample name -> the label names its samples carry."""
    series: dict[str, set[str]] = {}
    for name, labels in _SAMPLE.findall(metrics_text):
        series.setdefault(name, set()).update(key for key, _ in _MATCHER.findall(labels))
    return series


def label_value_problems(label: str, pattern: str) -> list[str]:
    """Values a matcher on ``status`` or ``signal`` (the receiver's) or ``outcome`` (the worker's) names that
    tracegrade never writes there."""
    if label not in {"status", "signal", "outcome"}:
        return []
    problems = []
    for value in pattern.split("|"):
        if label == "outcome" and value not in OUTCOMES:
            problems.append(f'outcome="{value}" is not an outcome ({list(OUTCOMES)})')
        if label == "signal" and value not in {signal.value for signal in Signal}:
            problems.append(f'signal="{value}" is not a signal ({sorted(s.value for s in Signal)})')
        if label == "status" and not _HTTP_STATUS.fullmatch(value) and value not in grpc.StatusCode.__members__:
            problems.append(f'status="{value}" is neither an HTTP status nor a gRPC status code name')
    return problems


def unknown_metrics(rules: Path, metrics_text: str, group: str = RECEIVER_GROUP) -> list[str]:
    """What the rules of ``group`` read that the exposition lacks: metric names, label names, impossible label
    values."""
    series = exposed_series(metrics_text)
    problems = []
    for alert, expr in rule_expressions(rules, group).items():
        for name, matchers in _SELECTOR.findall(expr):
            if name not in series:
                problems.append(f"{alert}: {name} is not exposed on /metrics")
                continue
            for label, pattern in _MATCHER.findall(matchers):
                if label not in series[name]:
                    problems.append(f"{alert}: {name} has no label {label} (it has {sorted(series[name])})")
                problems += [f"{alert}: {problem}" for problem in label_value_problems(label, pattern)]
    return problems


@pytest.fixture(scope="module")
def metrics_after_traffic(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real receiver's /metrics after spans over OTLP/gRPC and OTLP/HTTP and a request with a wrong token."""
    store = tmp_path_factory.mktemp("alerts") / "traces.duckdb"
    with ServerProcess(store, extra_args=("--token", TOKEN)) as server:
        provider = TracerProvider()
        headers = {"authorization": f"Bearer {TOKEN}"}
        provider.add_span_processor(
            SimpleSpanProcessor(GrpcSpanExporter(endpoint=server.grpc_target, insecure=True, headers=headers))
        )
        provider.add_span_processor(
            SimpleSpanProcessor(HttpSpanExporter(endpoint=f"{server.http_url}/v1/traces", headers=headers))
        )
        with provider.get_tracer("alerts").start_as_current_span("invoke_agent"):
            pass
        provider.shutdown()
        assert post(f"{server.http_url}/v1/traces", b"", token="wrong-token").status == 401
        status, text = get_text(f"{server.http_url}/metrics")
    assert status == 200
    return text


@pytest.fixture(scope="module")
def worker_metrics_after_grading(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real worker's /metrics after it graded traces of a DuckDB file (one passed, one failed)."""
    directory = tmp_path_factory.mktemp("worker-alerts")
    store = directory / "traces.duckdb"
    fill_store(store, [AgentRun(1, "q1", "refund sent", start_offset_s=1), AgentRun(2, "q2", "no")]).close()
    rules = directory / "rules.yaml"
    rule = {"name": "answered", "settle_seconds": 0, "criteria": {"contains_keywords": {"keywords": ["refund"]}}}
    rules.write_text(yaml.safe_dump({"poll_seconds": 0.2, "rules": [rule]}), encoding="utf-8")
    with WorkerProcess(rules, store, directory / "worker.log") as worker:
        labels = {"tenant": "default", "rule": "answered"}
        graded = "tracegrade_worker_jobs_graded_total"
        wait_for_value(lambda: worker.metric(graded, **labels, outcome="failed"), 1.0, "a failed verdict", 120)
        return worker.metrics_text()


@pytest.fixture(scope="module")
def grading_receiver_metrics(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real receiver grading in-process (``--worker-rules``): its /metrics once a span sent over OTLP/HTTP is
    graded."""
    directory = tmp_path_factory.mktemp("receiver-worker-alerts")
    rules = directory / "rules.yaml"
    rule = {"name": "answered", "settle_seconds": 0, "criteria": {"contains_keywords": {"keywords": ["refund"]}}}
    rules.write_text(yaml.safe_dump({"poll_seconds": 0.2, "rules": [rule]}), encoding="utf-8")
    with ServerProcess(directory / "traces.duckdb", extra_args=("--worker-rules", str(rules))) as server:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(HttpSpanExporter(endpoint=f"{server.http_url}/v1/traces")))
        turn = {"tracegrade.turn.input": "q", "tracegrade.turn.output": "refund sent"}
        with provider.get_tracer("alerts").start_as_current_span("tracegrade.turn prod", attributes=turn):
            pass
        provider.shutdown()
        graded = ("tracegrade_worker_jobs_graded_total", frozenset(RULE_LABELS | {("outcome", "passed")}))
        wait_for_value(
            lambda: metric_samples(get_text(f"{server.http_url}/metrics")[1]).get(graded), 1.0, "grading", 120
        )
        status, text = get_text(f"{server.http_url}/metrics")
    assert status == 200
    return text


def test_promtool_checks_the_rules_and_their_unit_tests_pass() -> None:
    checked = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [promtool(), "test", "rules", RULE_TESTS.name], capture_output=True, text=True, cwd=RULES_DIR
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_unit_tests_fail_when_a_rule_reads_a_misspelt_metric(tmp_path: Path) -> None:
    shutil.copy(RULE_TESTS, tmp_path)
    text = RULES.read_text(encoding="utf-8")
    assert "tracegrade_store_journal_dead_letters" in text
    (tmp_path / RULES.name).write_text(text.replace("tracegrade_store_journal_dead_letters", "tracegrade_dead_letters"))
    tested = subprocess.run(
        [promtool(), "test", "rules", RULE_TESTS.name], capture_output=True, text=True, cwd=tmp_path
    )
    assert tested.returncode != 0
    assert "TracegradeJournalDeadLetters" in tested.stdout + tested.stderr


def test_every_metric_and_label_the_rules_read_is_exposed_by_a_real_receiver(metrics_after_traffic: str) -> None:
    assert rule_expressions(RULES, RECEIVER_GROUP)  # not vacuous
    assert unknown_metrics(RULES, metrics_after_traffic) == []


def test_every_metric_and_label_the_worker_rules_read_is_exposed_by_a_real_worker(
    worker_metrics_after_grading: str,
) -> None:
    assert {"TracegradeWorkerDown", "TracegradeWorkerStalled", "TracegradeWorkerJobsFailing"} <= set(
        rule_expressions(RULES, WORKER_GROUP)
    )
    assert unknown_metrics(RULES, worker_metrics_after_grading, WORKER_GROUP) == []


def test_the_cross_check_names_a_worker_metric_label_and_outcome_the_worker_does_not_have(
    tmp_path: Path, worker_metrics_after_grading: str
) -> None:
    text = RULES.read_text(encoding="utf-8")
    broken = tmp_path / RULES.name
    broken.write_text(
        text.replace("tracegrade_worker_stall_seconds", "tracegrade_worker_stall_limit_seconds")
        .replace('outcome="error"', 'outcome="errored"')
        .replace(
            "sum by (tenant, rule) (rate(tracegrade_worker_jobs_graded_total[15m]))",
            'sum by (tenant, rule) (rate(tracegrade_worker_jobs_graded_total{kind="x"}[15m]))',
        )
    )
    problems = unknown_metrics(broken, worker_metrics_after_grading, WORKER_GROUP)
    assert any("TracegradeWorkerStalled: tracegrade_worker_stall_limit_seconds is not exposed" in p for p in problems)
    assert any('outcome="errored" is not an outcome' in p for p in problems), problems
    assert any("tracegrade_worker_jobs_graded_total has no label kind" in p for p in problems), problems


def test_the_cross_check_names_a_metric_a_label_and_a_status_the_receiver_does_not_have(
    tmp_path: Path, metrics_after_traffic: str
) -> None:
    text = RULES.read_text(encoding="utf-8")
    broken = tmp_path / RULES.name
    broken.write_text(
        text.replace("tracegrade_store_queue_capacity", "tracegrade_store_queue_size")
        .replace('signal=~"traces|logs"', 'kind=~"traces|logs"')
        .replace("RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTION")
    )
    problems = unknown_metrics(broken, metrics_after_traffic)
    assert any("TracegradeWriteQueueFull: tracegrade_store_queue_size is not exposed" in p for p in problems), problems
    assert any("has no label kind" in p for p in problems), problems
    assert any('status="RESOURCE_EXHAUSTION"' in p for p in problems), problems


def test_the_worker_rules_read_only_what_a_receiver_grading_in_process_exposes(grading_receiver_metrics: str) -> None:
    rules = rule_expressions(RULES, WORKER_GROUP)
    # only TracegradeWorkerDown names a scrape job (the workers'): a grading receiver is scraped as `tracegrade`, and
    # TracegradeReceiverDown covers it; the others read the worker's series wherever they are exposed
    assert 'job="tracegrade-worker"' in rules.pop("TracegradeWorkerDown")
    assert rules and all("job=" not in expr for expr in rules.values()), rules
    assert unknown_metrics(RULES, grading_receiver_metrics, WORKER_GROUP) == []
