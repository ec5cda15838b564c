"""Retention on a real DuckDB file and a real lake: ``expire`` deletes every row of the traces quiet since before
the cutoff, and nothing written after it, checked row by row, tenant by tenant."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.reporters_samples import sample_report
from tests.support.store_kinds import open_store
from tests.support.store_records import make_log, make_span, trace_hex
from tracegrade.errors import InvalidValueError
from tracegrade.evaluation.run_records import record_cases, record_report
from tracegrade.store import TraceStore
from tracegrade.store.retention import RetentionPolicy, TenantScope
from tracegrade.store.rows import utc_now
from tracegrade.store.trace_deletion import Deleted
from tracegrade.store.trajectories import TRAJECTORY_TABLES

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture), for the lake runs


@pytest.fixture(params=["file", "lake"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TraceStore]:
    """A new read-write store of each kind (a DuckDB file, a lake on the session's PostgreSQL)."""
    with open_store(request.param, tmp_path, request) as opened:
        yield opened


SpanKey = tuple[str, str, str]
_TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}


def _agent_trace(trace: int, first_span: int, tools: int = 2) -> list:
    """An agent span with ``tools`` tool spans under it."""
    root = make_span(trace, first_span, name="agent", attributes={"gen_ai.operation.name": "invoke_agent"})
    return [root] + [
        make_span(trace, first_span + n, parent=first_span, name="search", attributes=_TOOL)
        for n in range(1, tools + 1)
    ]


def _cutoff() -> datetime:
    """A cutoff strictly between what was written before and what is written after it."""
    time.sleep(0.01)
    cutoff = utc_now()
    time.sleep(0.01)
    return cutoff


def _spans(store: TraceStore) -> set[SpanKey]:
    return {(t, tr, s) for t, tr, s in store.query("SELECT tenant, trace_id, span_id FROM spans").rows}


def _per_trace(store: TraceStore, table: str) -> dict[tuple[str, str], int]:
    sql = f"SELECT tenant, trace_id, count(*) FROM {table} WHERE trace_id IS NOT NULL GROUP BY ALL"
    return {(t, tr): n for t, tr, n in store.query(sql).rows}


def _keys(spans: list, tenant: str = "default") -> set[SpanKey]:
    return {(tenant, s.trace_id, s.span_id) for s in spans}


def test_a_quiet_trace_goes_whole_and_whatever_came_after_the_cutoff_stays(store: TraceStore) -> None:
    quiet = _agent_trace(1, 100)
    long_running = _agent_trace(2, 200)
    store.write(quiet, [make_log(1, 1), make_log(1, 2, evaluation=True), make_log(None, 3, evaluation=True)])
    store.write(long_running[:2])
    store.rebuild_trajectories([trace_hex(1), trace_hex(2)])
    store.job_queue().enqueue("rule", ["true"], [])
    cutoff = _cutoff()
    store.write(long_running[2:])  # the long-running trace goes on after the cutoff: it is not quiet
    recent = _agent_trace(3, 300)
    store.write(recent, [make_log(None, 4)])
    other_tenant = _agent_trace(1, 400)  # the quiet trace's id, another tenant's, sent after the cutoff
    store.write(other_tenant, tenant="acme")
    store.rebuild_trajectories([trace_hex(2), trace_hex(3)])
    store.rebuild_trajectories([trace_hex(1)], tenant="acme")
    store.job_queue().enqueue("rule", ["true"], [])
    jobs_before = {row[0] for row in store.query("SELECT trace_id FROM grading_jobs").rows}
    assert jobs_before == {trace_hex(1), trace_hex(2), trace_hex(3)}

    mapped = {table: _per_trace(store, table).get(("default", trace_hex(1)), 0) for table in TRAJECTORY_TABLES}
    assert mapped["traces"] == 1 and mapped["tool_calls"] == 2

    expired = store.expire(cutoff)

    assert expired == Deleted(traces=1, spans=3, logs=3, evaluations=2, trajectory_rows=sum(mapped.values()), jobs=1)
    assert _spans(store) == _keys(long_running) | _keys(recent) | _keys(other_tenant, "acme")
    assert _per_trace(store, "logs") == {}
    assert store.query("SELECT body FROM logs").rows == [('"record 4"',)]
    assert store.query("SELECT count(*) FROM evaluations").rows == [(0,)]
    kept = {("default", trace_hex(2)), ("default", trace_hex(3)), ("acme", trace_hex(1))}
    assert set(_per_trace(store, "traces")) == kept
    assert set(_per_trace(store, "tool_calls")) == set(_per_trace(store, "traces"))
    assert {row[0] for row in store.query("SELECT trace_id FROM grading_jobs").rows} == {trace_hex(2), trace_hex(3)}
    # the trace that went on keeps its early spans, and its trajectory counts all of them
    assert store.query("SELECT span_count FROM traces WHERE trace_id = ?", [trace_hex(2)]).rows == [(3,)]

    assert store.expire(cutoff) == Deleted()  # a second pass finds nothing left to do


def test_a_span_of_an_expired_trace_sent_again_is_stored_and_mapped_again(store: TraceStore) -> None:
    spans = _agent_trace(5, 500)
    store.write(spans)
    store.rebuild_trajectories([trace_hex(5)])
    assert store.expire(_cutoff()).traces == 1
    assert _spans(store) == set()

    again = store.write(spans[:1])  # an exporter's late retry: no longer a duplicate of anything stored
    assert (again.spans_inserted, again.spans_duplicate) == (1, 0)
    store.rebuild_trajectories([trace_hex(5)])
    assert store.query("SELECT trace_id, span_count FROM traces").rows == [(trace_hex(5), 1)]


def test_batches_go_past_traces_that_are_not_quiet(tmp_path: Path) -> None:
    """Small batches over traces whose keys come first but that went on after the cutoff: every quiet trace
    still goes, the others stay whole."""
    with TraceStore(tmp_path / "store.duckdb") as store:
        traces = {n: _agent_trace(n, n * 100, tools=1) for n in range(1, 11)}
        for spans in traces.values():
            store.write(spans[:1])
        cutoff = _cutoff()
        going_on = {1, 2, 3, 7}  # the first keys: a batch of 2 finds nothing quiet among its first candidates
        for n in going_on:
            store.write(traces[n][1:])

        expired = store.expire(cutoff, batch=2)

        assert expired.traces == len(traces) - len(going_on)
        assert _spans(store) == set().union(*(_keys(traces[n]) for n in going_on))


def test_a_file_store_keeps_the_expiry_after_it_is_reopened(tmp_path: Path) -> None:
    """Without a WAL (under the receiver's journal) the expiry is checkpointed before ``expire`` returns."""
    path = tmp_path / "store.duckdb"
    with TraceStore(path, wal=False) as store:
        store.write(_agent_trace(1, 100))
        cutoff = _cutoff()
        store.write(_agent_trace(2, 200))
        store.checkpoint()
        assert store.expire(cutoff).traces == 1
    with TraceStore(path, read_only=True) as reopened:
        assert {row[0] for row in reopened.query("SELECT DISTINCT trace_id FROM spans").rows} == {trace_hex(2)}


def test_an_online_workers_runs_expire_and_recorded_runs_stay(store: TraceStore) -> None:
    report = sample_report()
    record_cases(store, report, "worker", "rule-old-window", {"rule": "r"})
    record_report(store, report, "eval_set", "ci-run")
    cutoff = _cutoff()
    record_cases(store, report, "worker", "rule-new-window", {"rule": "r"})
    record_cases(store, report, "worker", "rule-old-window", {"rule": "r"}, tenant="acme")  # another tenant's

    def rows() -> dict[str, set[tuple[str, str]]]:
        return {
            table: set(store.query(f"SELECT DISTINCT tenant, run_id FROM {table}").rows)
            for table in ("eval_runs", "eval_case_results", "eval_results", "eval_run_cases")
        }

    before = rows()
    assert ("default", "rule-old-window") in before["eval_results"]

    assert store.expire(cutoff) == Deleted(worker_runs=1)

    gone = {("default", "rule-old-window")}
    assert rows() == {table: runs - gone for table, runs in before.items()}
    assert ("default", "ci-run") in rows()["eval_runs"]


def test_on_a_lake_a_pass_waits_at_the_write_gate_only_when_something_can_expire(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Another process holding the gate (a stuck ``maintain``, say) holds up a pass with work to do, never one
    with nothing old enough to go."""
    import psycopg

    from tracegrade.store.lake_location import catalog_conninfo
    from tracegrade.store.lake_write_gate import GATE_KEY

    with open_store("lake", tmp_path, request) as store:
        store.write(_agent_trace(1, 100))
        before_everything = datetime(2000, 1, 1)
        cutoff = _cutoff()
        passes: list[Deleted] = []
        with psycopg.connect(catalog_conninfo(str(store.location)), autocommit=True) as holder:
            holder.execute("SELECT pg_advisory_lock(%s)", [GATE_KEY])
            quick = threading.Thread(target=lambda: passes.append(store.expire(before_everything)))
            quick.start()
            quick.join(30)
            assert passes == [Deleted()], "a pass with nothing to do waited at the closed gate"
            passes.clear()
            waiting = threading.Thread(target=lambda: passes.append(store.expire(cutoff)))
            waiting.start()
            waiting.join(1.0)
            assert waiting.is_alive() and not passes, "a pass with work to do went past a closed gate"
            holder.execute("SELECT pg_advisory_unlock(%s)", [GATE_KEY])
            waiting.join(60)
        assert [p.traces for p in passes] == [1]


def test_each_tenant_expires_by_the_cutoff_of_its_own_scope(store: TraceStore) -> None:
    for tenant in ("default", "acme", "umbrella"):
        store.write(_agent_trace(1, 100), [make_log(None, 1)], tenant=tenant)  # the same ids, each tenant's own
        record_cases(store, sample_report(), "worker", "rule-window", {"rule": "r"}, tenant=tenant)
    cutoff = _cutoff()

    def tenants_with(sql: str) -> set[str]:
        return {row[0] for row in store.query(sql).rows}

    acme = store.expire(cutoff, scope=TenantScope(only="acme"))
    assert acme == Deleted(traces=1, spans=3, logs=1, worker_runs=1)
    assert tenants_with("SELECT DISTINCT tenant FROM spans") == {"default", "umbrella"}

    others = store.expire(cutoff, scope=TenantScope(others=("acme", "umbrella")))  # every tenant but those
    assert others == Deleted(traces=1, spans=3, logs=1, worker_runs=1)
    for table in ("spans", "logs", "eval_runs", "eval_case_results"):
        assert tenants_with(f"SELECT DISTINCT tenant FROM {table}") == {"umbrella"}, table


def test_a_policy_makes_one_expiry_per_tenant_of_its_own_and_one_for_the_others() -> None:
    now = datetime(2026, 12, 3, 12, 0)
    policy = RetentionPolicy(timedelta(days=30), {"umbrella": None, "acme": timedelta(days=7)})
    assert policy.passes(now) == [
        (now - timedelta(days=7), TenantScope(only="acme")),
        (now - timedelta(days=30), TenantScope(others=("acme", "umbrella"))),
    ]
    assert policy.shortest == timedelta(days=7)
    assert policy.describe() == (
        "traces quiet for 30 days, 0:00:00 are deleted (acme's after 7 days, 0:00:00; umbrella's kept)"
    )
    only_acme = RetentionPolicy(None, {"acme": timedelta(hours=1)})
    assert only_acme.passes(now) == [(now - timedelta(hours=1), TenantScope(only="acme"))]
    assert RetentionPolicy(None, {"acme": None}).shortest is None  # nothing ever expires


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("acme", "'acme' is not TENANT=DURATION"),
        ("acme=", "'acme=' is not TENANT=DURATION"),
        (",", "',' names no tenant; give TENANT=DURATION pairs"),
        ("acme=7x", "acme's retention '7x' is not a duration"),
        ("acme=1d,acme=2d", "tenant 'acme' is given twice"),
        ("Bad Name=1d", "'Bad Name' is not a valid tenant name"),
    ],
)
def test_tenant_retentions_that_do_not_parse_are_refused_with_the_pair_at_fault(text: str, message: str) -> None:
    with pytest.raises(InvalidValueError, match=re.escape(message)):
        RetentionPolicy.parse_tenants(text, "--retain-tenants")
    assert RetentionPolicy.parse_tenants(" acme=7d , umbrella=forever,", "x") == {
        "acme": timedelta(days=7),
        "umbrella": None,
    }
