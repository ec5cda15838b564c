"""`tracegrade serve --worker-rules`: the in-process grading worker's ``tracegrade_worker_*`` series are on the
receiver's own /metrics, and its health on /healthz/worker (503 while stalled) and in /healthz's body, while
/healthz and /readyz stay 200 for a receiver that ingests fine. Before, the in-process worker counted what it
did and nothing served it: a stalled worker inside a receiver looked the same as an idle one.

A real ``tracegrade serve`` process, spans sent by the OpenTelemetry SDK's OTLP exporters (gRPC and HTTP)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tests.support.grading_slow_criterion import write_slow_rules
from tests.support.server_otlp import get_text, post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import span_json, traces_json, unique_trace_id
from tests.support.small_fs import fill, free, small_filesystem
from tests.support.waiting import wait_for_value, wait_until
from tests.support.worker_process import metric_samples
from tracegrade.evaluation.worker_metrics import stall_seconds

W = "tracegrade_worker_"
RULE = {"tenant": "default", "rule": "answered"}


def _send_answers(server: ServerProcess, answers: list[str]) -> None:
    """One trace per answer, a turn span alone, exported alternately over OTLP/gRPC and OTLP/HTTP."""
    exporters = [
        GrpcSpanExporter(endpoint=server.grpc_target, insecure=True),
        HttpSpanExporter(endpoint=f"{server.http_url}/v1/traces"),
    ]
    providers = []
    for exporter in exporters:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        providers.append(provider)
    for n, answer in enumerate(answers):
        turn = {"tracegrade.turn.input": f"question {n}", "tracegrade.turn.output": answer}
        with providers[n % 2].get_tracer("test").start_as_current_span("tracegrade.turn prod", attributes=turn):
            pass
    for provider in providers:
        provider.shutdown()


def _request() -> bytes:
    """About 40 kB of spans: a journal left a few hundred kB takes it; the store writes them in larger blocks."""
    trace_id = unique_trace_id()
    attributes = [{"key": "x", "value": {"stringValue": "y" * 4000}}]
    return json.dumps(traces_json([span_json(trace_id, i, attributes=attributes) for i in range(10)])).encode()


def _rules(path: Path) -> Path:
    rule = {"name": "answered", "settle_seconds": 0, "criteria": {"contains_keywords": {"keywords": ["refund"]}}}
    # metrics_address is `tracegrade worker`'s: inside the receiver, the receiver's port serves the worker's metrics
    rules = {"poll_seconds": 0.2, "metrics_address": "127.0.0.1:1", "rules": [rule]}
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    return path


def _metric(server: ServerProcess, name: str, **labels: str) -> float:
    status, text = get_text(f"{server.http_url}/metrics")
    assert status == 200, text
    return metric_samples(text).get((name, frozenset(labels.items())), -1.0)


def _json(server: ServerProcess, path: str) -> tuple[int, dict]:
    status, text = get_text(server.http_url + path)
    return status, json.loads(text)


def test_the_receivers_metrics_carry_its_workers_series_as_it_grades_what_arrives(tmp_path: Path) -> None:
    rules = _rules(tmp_path / "rules.yaml")
    with ServerProcess(tmp_path / "store.duckdb", extra_args=("--worker-rules", str(rules))) as server:
        _send_answers(server, ["refund sent", "no idea", "refund sent"])
        graded = W + "jobs_graded_total"
        wait_for_value(
            lambda: sum(_metric(server, graded, **RULE, outcome=o) for o in ("passed", "failed")),
            3.0,
            "jobs graded",
            120,
        )
        status, text = get_text(f"{server.http_url}/metrics")
        samples = metric_samples(text)

        def value(name: str, **labels: str) -> float:
            return samples[name, frozenset(labels.items())]

        assert value(graded, **RULE, outcome="passed") == 2
        assert value(graded, **RULE, outcome="failed") == 1
        assert value(graded, **RULE, outcome="error") == 0
        assert value(W + "jobs_enqueued_total", **RULE) == 3
        assert value(W + "store_reachable") == 1
        assert value(W + "stall_seconds") == stall_seconds(0.2, 60.0)
        # the receiver's own series are still there, beside the worker's, in one exposition
        assert value("tracegrade_receiver_spans_stored_total") == 3
        assert text.count(f"# TYPE {graded} counter") == 1
        # the backlog is read every few seconds by the worker serving its metrics
        wait_for_value(lambda: _metric(server, W + "backlog_jobs", tenant="default", status="pending"), 0.0, "backlog")

        status, health = _json(server, "/healthz/worker")
        assert status == 200 and health["status"] == "ok" and health["reason"] is None, health
        status, health = _json(server, "/healthz")
        assert status == 200 and health["status"] == "ok" and health["worker"]["status"] == "ok", health
        assert "serves nothing there" not in server.log()  # the old warning, untrue now
        assert server.terminate() == 0, server.log()


def test_a_stalled_in_process_worker_fails_healthz_worker_and_not_the_receivers_health(tmp_path: Path) -> None:
    markers, release = tmp_path / "markers", tmp_path / "release"
    markers.mkdir()
    # lease 2 s: stalled after 4 s without a completed cycle; the criterion holds the worker's loop until released
    rules = write_slow_rules(tmp_path / "rules.yaml", markers, seconds=300, lease_seconds=2, release=release)
    with ServerProcess(tmp_path / "store.duckdb", extra_args=("--worker-rules", str(rules))) as server:
        try:
            _send_answers(server, ["refund sent"])
            wait_until(lambda: any(markers.iterdir()), "the job to start", 120)
            wait_for_value(lambda: _json(server, "/healthz/worker")[0], 503, "/healthz/worker to answer 503", 120)
            _, health = _json(server, "/healthz/worker")
            assert health["status"] == "unhealthy" and "no grading cycle completed for" in health["reason"], health
            assert _metric(server, W + "last_cycle_age_seconds") > _metric(server, W + "stall_seconds")
            # ingestion works: the probes that restart a receiver or take it out of a load balancer stay 200
            status, health = _json(server, "/healthz")
            assert status == 200 and health["status"] == "ok", health
            assert health["worker"]["status"] == "unhealthy", health
            _send_answers(server, ["refund again"])
            wait_for_value(lambda: _metric(server, "tracegrade_receiver_spans_stored_total"), 2.0, "spans stored")
            assert _json(server, "/readyz")[0] == 200
        finally:
            release.touch()
        wait_for_value(lambda: _json(server, "/healthz/worker")[0], 200, "/healthz/worker to answer 200", 120)
        assert server.terminate() == 0, server.log()


def test_a_receiver_without_a_worker_says_so_on_healthz_worker(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "store.duckdb") as server:
        status, health = _json(server, "/healthz/worker")
        assert status == 404 and "--worker-rules" in health["reason"], health
        status, health = _json(server, "/healthz")
        assert (status, health) == (200, {"status": "ok", "server": "tracegrade"})
        assert W not in get_text(f"{server.http_url}/metrics")[1]


@pytest.mark.slow
def test_the_workers_series_go_on_counting_through_a_store_reopened_after_a_full_disk(tmp_path: Path) -> None:
    rules = _rules(tmp_path / "rules.yaml")
    with small_filesystem(tmp_path / "fs", "64m") as mount:
        server = ServerProcess(mount / "store.duckdb", extra_args=("--worker-rules", str(rules)))
        server.log_path = tmp_path / "serve.log"  # off the full disk, so the receiver's log stays readable
        with server:
            passed = lambda: _metric(server, W + "jobs_graded_total", **RULE, outcome="passed")  # noqa: E731
            _send_answers(server, ["refund sent", "refund sent"])
            wait_for_value(passed, 2.0, "jobs graded before the disk fills", 120)
            # room for the journal to take a request, not for the store to write its spans: the store fails
            fill(mount, leave=256 * 1024)
            statuses = [post(f"{server.http_url}/v1/traces", _request(), "application/json").status for _ in range(3)]
            assert 200 in statuses, statuses

            def store_failed() -> bool:
                # a checkpoint may fit blocks the file had free: more spans, until the store needs room it lacks
                if "the store failed" in server.log():
                    return True
                post(f"{server.http_url}/v1/traces", _request(), "application/json")
                return False

            wait_until(store_failed, "the store to fail on the full disk", 120, interval=0.5)
            reopened = "the store is open again"
            wait_until(lambda: reopened in server.log(), "the store opened again (to fail again while full)", 120)
            # whichever worker the store opened last runs, the receiver's series are there and count on
            assert passed() == 2
            free(mount)
            wait_until(lambda: _json(server, "/readyz")[0] == 200, "the store open again", 120)
            # the worker of the store opened again counts on from where the one before stopped
            _send_answers(server, ["refund again"])
            wait_for_value(passed, 3.0, "a job graded after the reopening", 120)
            # the cycle that graded it ends after counting it: then the store reads reachable (0 while grading
            # waited for room on the full disk) and the worker healthy
            wait_for_value(lambda: _metric(server, W + "store_reachable"), 1.0, "the store reachable again", 120)
            assert _json(server, "/healthz/worker")[0] == 200
            assert server.terminate() == 0, server.log()
