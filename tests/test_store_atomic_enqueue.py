"""How many grading jobs an enqueue added is the count of the rows its INSERT added, on a DuckDB file and on a
lake: a trace that has its job already is not counted, nor are the jobs another enqueue of the same rule adds
at the same time.

The file's queue used to count the rule's jobs before and after its INSERT: two enqueues of one rule at once
(two workers on one store) both counted the jobs only one of them had added, and the worker metrics said twice
as many jobs were queued as there were.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.store_kinds import STORE_KINDS, open_store
from tests.support.store_records import make_span, trace_hex
from tracegrade.store import TraceStore
from tracegrade.store.grading_jobs import JobQueue

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture), for the lake runs

ALL = (["true"], [])  # an enqueue's predicates and their parameters: every trace
ROUNDS = 8  # rounds of two enqueues at once, each on new traces
TRACES_PER_ROUND = 5


@pytest.fixture
def store(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[TraceStore]:
    with open_store(store_kind, tmp_path, request) as opened:
        yield opened


def _add_traces(store: TraceStore, traces: range, tenant: str = "default") -> None:
    store.write([make_span(trace, trace * 10, name="agent") for trace in traces], tenant=tenant)
    store.rebuild_trajectories([trace_hex(trace) for trace in traces], tenant=tenant)


def _jobs(store: TraceStore, rule: str) -> int:
    return int(store.query("SELECT count(*) FROM grading_jobs WHERE rule = ?", [rule]).rows[0][0])


@STORE_KINDS
def test_enqueue_counts_only_the_jobs_it_added(store: TraceStore) -> None:
    queue = store.job_queue()
    _add_traces(store, range(1, 6))
    assert queue.enqueue("rule", *ALL) == 5
    assert queue.enqueue("rule", *ALL) == 0  # every trace has its job
    _add_traces(store, range(6, 8))
    assert queue.enqueue("rule", *ALL) == 2  # the new traces only
    assert queue.enqueue("other", ["trace_id <> ?"], [trace_hex(1)]) == 6  # another rule's jobs are its own
    _add_traces(store, range(1, 4), tenant="acme")  # the same trace ids, another tenant's
    assert queue.enqueue("rule", *ALL, "acme") == 3
    assert queue.enqueue("rule", *ALL) == 0
    assert _jobs(store, "rule") == 10


def _enqueue_at_once(queue: JobQueue, rule: str) -> list[int]:
    """What two enqueues of ``rule`` that start together (two workers' threads) each said they added."""
    start = threading.Barrier(2)

    def enqueue() -> int:
        start.wait(30)
        return queue.enqueue(rule, *ALL)

    with ThreadPoolExecutor(2) as pool:
        running = [pool.submit(enqueue) for _ in range(2)]
        return [future.result(60) for future in running]


@STORE_KINDS
def test_two_enqueues_of_one_rule_at_once_count_each_job_once(store: TraceStore) -> None:
    queue = store.job_queue()
    for round_ in range(ROUNDS):
        first = round_ * TRACES_PER_ROUND + 1
        _add_traces(store, range(first, first + TRACES_PER_ROUND))
        counts = _enqueue_at_once(queue, "rule")
        assert sorted(counts) == [0, TRACES_PER_ROUND], f"round {round_}: the two enqueues counted {counts}"
    assert _jobs(store, "rule") == ROUNDS * TRACES_PER_ROUND
