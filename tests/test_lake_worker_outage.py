"""A grading worker on a lake whose data path or catalog goes away for a moment, against a real PostgreSQL:
the jobs it holds are handed back without using an attempt, so an outage never fails a job for good.

Before, each job that met the outage counted it as an attempt, and since the queue (in PostgreSQL) still
answered, the worker claimed the next jobs at once and failed them too: a few seconds without the data path
marked every job in reach ``failed`` after ``max_attempts`` (3) tries, and those traces were never graded.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.pg_cluster import PgServer
from tests.support.store_records import make_span, trace_hex
from tracegrade.errors import StoreError
from tracegrade.evaluation.worker import GradingWorker, WorkerRules
from tracegrade.store.lake import LakeStore
from tracegrade.store.lake_location import catalog_conninfo

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)
TRACES = [1, 2, 3]


@pytest.fixture
def lake(pg_server: PgServer, tmp_path: Path) -> tuple[str, Path]:
    return f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"


def _rules(max_attempts: int) -> WorkerRules:
    return WorkerRules.model_validate(
        {
            "max_attempts": max_attempts,
            "poll_seconds": 3600,  # the worker looked for settled traces before the outage, and not again
            "rules": [
                {"name": "answers", "settle_seconds": 0, "criteria": {"contains_keywords": {"keywords": ["refund"]}}}
            ],
        }
    )


def _write_traces(store: LakeStore) -> None:
    spans = []
    for trace in TRACES:
        attributes = {"gen_ai.operation.name": "invoke_agent", "output.value": "refund sent"}
        spans.append(make_span(trace, trace * 10, name="agent", attributes=attributes))
        spans.append(make_span(trace, trace * 10 + 1, parent=trace * 10, name="lookup"))
    store.write(spans)
    store.rebuild_trajectories([trace_hex(trace) for trace in TRACES])


def _jobs(location: str) -> list[tuple[str, int]]:
    """(status, attempts) of every job, read by a reader of its own (a writer that met an outage is failed)."""
    with LakeStore(location, read_only=True) as reader:
        rows = reader.query("SELECT status, attempts FROM grading_jobs ORDER BY job_id").rows
    return [(status, attempts) for status, attempts in rows]


def _grade_the_rest(worker: GradingWorker, store: LakeStore, location: str, data: Path) -> None:
    """Once the outage is over: the store opened again if it failed (as `tracegrade worker` does), and every
    job graded, once."""
    if store.failure is not None:
        store.close()
        store = LakeStore(location, data_path=data)
        worker.use_store(store)
    with store:
        assert asyncio.run(worker.run_once()) == len(TRACES)
        graded = store.query("SELECT trace_id, count(*) FROM eval_case_results GROUP BY ALL ORDER BY ALL").rows
        assert graded == [(trace_hex(trace), 1) for trace in TRACES]
    assert _jobs(location) == [("done", 1)] * len(TRACES)


def test_a_data_path_outage_hands_the_jobs_back_and_they_are_graded_once_it_is_back(
    lake: tuple[str, Path],
) -> None:
    location, data = lake
    store = LakeStore(location, data_path=data)
    _write_traces(store)
    store.maintain(keep=timedelta(0))  # the rows in Parquet files (not inlined in the catalog), as under load
    # one attempt each: an outage counted as one would fail every job for good
    worker = GradingWorker(store, _rules(max_attempts=1))
    assert worker.enqueue() == len(TRACES)
    away = data.with_name("lake-data.away")
    data.rename(away)  # the shared file system is gone: every read of a Parquet file fails
    try:
        with pytest.raises(StoreError, match=r"out of reach: .*IO Error.* 3 job\(s\) handed back without"):
            asyncio.run(worker.run_once())
        assert _jobs(location) == [("pending", 0)] * len(TRACES)
        if store.failure is None:  # and again, for as long as it lasts
            with pytest.raises(StoreError, match="handed back"):
                asyncio.run(worker.run_once())
            assert _jobs(location) == [("pending", 0)] * len(TRACES)
    finally:
        away.rename(data)
    _grade_the_rest(worker, store, location, data)


def test_the_catalog_refusing_the_lakes_connections_hands_the_jobs_back(
    lake: tuple[str, Path], pg_server: PgServer
) -> None:
    location, data = lake
    database = catalog_conninfo(location).rsplit("dbname=", 1)[1].split()[0]
    store = LakeStore(location, data_path=data)
    _write_traces(store)
    worker = GradingWorker(store, _rules(max_attempts=1))
    worker.hold_id()  # as `tracegrade worker` does when it starts: its id's connection is open before the outage
    assert worker.enqueue() == len(TRACES)
    # DuckDB's connections to the catalog end, and new ones are refused; the job queue's and the worker id's
    # (application_name tracegrade) live on, as when PostgreSQL drops some connections under load
    pg_server.psql(f"ALTER DATABASE {database} ALLOW_CONNECTIONS false")
    try:
        pg_server.psql(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            f"WHERE datname = '{database}' AND application_name <> 'tracegrade'"
        )
        with pytest.raises(StoreError, match="handed back without counting an attempt"):
            asyncio.run(worker.run_once())
    finally:
        pg_server.psql(f"ALTER DATABASE {database} ALLOW_CONNECTIONS true")
    assert _jobs(location) == [("pending", 0)] * len(TRACES)
    _grade_the_rest(worker, store, location, data)


def test_a_worker_whose_clock_runs_ahead_waits_for_traces_to_settle_by_the_catalogs_clock(
    lake: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers run on other machines than the receivers, and ``updated_at`` is the catalog's clock: a trace
    settles by that clock. A machine whose clock runs an hour ahead (a stopped NTP) took every trace for settled
    at once, and graded it half received (a job is added once per trace, so never again with the rest)."""
    import tracegrade.evaluation.worker as worker_module

    location, data = lake
    this_machine = worker_module.utc_now
    monkeypatch.setattr(worker_module, "utc_now", lambda: this_machine() + timedelta(hours=1))
    rules = WorkerRules.model_validate(
        {"rules": [{"name": "answers", "settle_seconds": 600, "criteria": {"contains_keywords": {"keywords": ["x"]}}}]}
    )
    with LakeStore(location, data_path=data) as store:
        _write_traces(store)  # built just now: settled in 10 minutes
        worker = GradingWorker(store, rules)
        assert worker.enqueue() == 0
        assert _jobs(location) == []
