"""`tracegrade worker --metrics-address` on a lake, against a real PostgreSQL catalog: the counters carry the rule's
tenant, the backlog is read from the catalog's job queue, a job taken over after its lease ran out counts as a
lease lost (the catalog's row count), and /healthz fails, saying the store is out of reach, while the catalog
refuses the worker's connections, then recovers once it takes them again."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.support import pg_cluster
from tests.support.pg_cluster import PgServer
from tests.support.store_records import make_span, trace_hex
from tests.support.waiting import wait_for_value, wait_until
from tests.support.worker_process import WorkerProcess, metric_samples, take_over_after_the_lease
from tracegrade.store.lake import LakeStore
from tracegrade.store.lake_location import catalog_conninfo

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)
W = "tracegrade_worker_"
TENANT = "acme"


@pytest.fixture
def lake(pg_server: PgServer, tmp_path: Path) -> tuple[str, Path]:
    return f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"


def _write_traces(store: LakeStore, traces: list[int], tenant: str) -> None:
    spans = []
    for trace in traces:
        attributes = {"gen_ai.operation.name": "invoke_agent", "output.value": "refund sent"}
        spans.append(make_span(trace, trace * 10, name="agent", attributes=attributes))
        spans.append(make_span(trace, trace * 10 + 1, parent=trace * 10, name="lookup"))
    store.write(spans, tenant=tenant)
    store.rebuild_trajectories([trace_hex(trace) for trace in traces], tenant)


def _catalog_connections(pg_server: PgServer, location: str, allowed: bool) -> None:
    """Let the lake's catalog database take connections, or refuse new ones and end those it has (the worker's
    DuckDB connection and its job queue's alike), as a catalog restarting or out of reach would."""
    database = catalog_conninfo(location).rsplit("dbname=", 1)[1].split()[0]
    pg_server.psql(f"ALTER DATABASE {database} ALLOW_CONNECTIONS {str(allowed).lower()}")
    if not allowed:
        pg_server.psql(f"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '{database}'")


def _wait_for_status(worker: WorkerProcess, status: int) -> dict:
    seen: list[tuple[int, dict]] = []

    def answered() -> bool:
        seen.append(worker.health())
        return seen[-1][0] == status

    wait_until(answered, f"/healthz to answer {status}", 120, interval=0.2)
    return seen[-1][1]


def test_a_lake_worker_counts_by_tenant_and_is_unhealthy_while_its_catalog_is_away(
    lake: tuple[str, Path], pg_server: PgServer, tmp_path: Path
) -> None:
    location, data = lake
    with LakeStore(location, data_path=data) as store:
        _write_traces(store, [1, 2, 3], TENANT)
    rules = tmp_path / "rules.yaml"
    rule = {"name": "answers", "tenant": TENANT, "settle_seconds": 0}
    rule["criteria"] = {"contains_keywords": {"keywords": ["refund"]}}
    # a long lease: only the catalog's outage, never a stall, may make the worker unhealthy here
    rules.write_text(yaml.safe_dump({"poll_seconds": 0.2, "lease_seconds": 120, "rules": [rule]}), encoding="utf-8")
    labels = {"tenant": TENANT, "rule": "answers"}
    with WorkerProcess(rules, location, tmp_path / "worker.log", "--lake-data", str(data)) as worker:
        wait_for_value(lambda: worker.metric(W + "jobs_graded_total", **labels, outcome="passed"), 3.0, "graded", 120)
        samples = metric_samples(worker.metrics_text())
        assert samples[W + "jobs_enqueued_total", frozenset(labels.items())] == 3
        assert samples[W + "jobs_claimed_total", frozenset(labels.items())] == 3
        assert samples[W + "backlog_jobs", frozenset({"tenant": TENANT, "status": "pending"}.items())] == 0
        assert worker.health()[0] == 200

        _catalog_connections(pg_server, location, allowed=False)
        try:
            health = _wait_for_status(worker, 503)
            assert health["reason"].startswith("the store is out of reach: "), health
            assert worker.metric(W + "store_reachable") == 0
            assert worker.metric(W + "cycle_failures_total") >= 1
        finally:
            _catalog_connections(pg_server, location, allowed=True)
        assert _wait_for_status(worker, 200)["reason"] is None
        assert worker.metric(W + "store_reachable") == 1
        assert worker.stop() == 0, worker.output()


def test_a_lake_job_taken_over_after_its_lease_ran_out_counts_as_a_lease_lost(lake: tuple[str, Path]) -> None:
    location, data = lake
    with LakeStore(location, data_path=data) as store:
        _write_traces(store, [1], "default")
        slow, quick = take_over_after_the_lease(store)
    rule = frozenset({"tenant": "default", "rule": "answered"}.items())
    assert metric_samples(slow.metrics.render())[W + "leases_lost_total", rule] == 1
    assert metric_samples(quick.metrics.render())[W + "leases_lost_total", rule] == 0
