"""Forgetting traces on a real DuckDB file and a real lake: ``forget`` deletes every row of the traces asked for
and nothing else, and their records written later (a retry, a journal replay, a rebuild that was mapping them)
are dropped, checked row by row, tenant by tenant."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support import pg_cluster
from tests.support.reporters_samples import failing_case, passing_case
from tests.support.store_kinds import location, open_store
from tests.support.store_records import make_log, make_span, trace_hex
from tracegrade.cli.main import cli
from tracegrade.evaluation.run_records import record_cases, record_report
from tracegrade.models.results import EvalReport
from tracegrade.store import TraceStore
from tracegrade.store.lake import LakeStore
from tracegrade.store.trace_deletion import Deleted, checked_trace_ids
from tracegrade.store.trajectories import TRAJECTORY_TABLES

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture), for the lake runs

_TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}


@pytest.fixture(params=["file", "lake"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TraceStore]:
    """A new read-write store of each kind (a DuckDB file, a lake on the session's PostgreSQL)."""
    with open_store(request.param, tmp_path, request) as opened:
        yield opened


def _agent_trace(trace: int, tools: int = 2) -> list:
    root = make_span(trace, trace * 100, name="agent", attributes={"gen_ai.operation.name": "invoke_agent"})
    return [root] + [
        make_span(trace, trace * 100 + n, parent=trace * 100, name="search", attributes=_TOOL)
        for n in range(1, tools + 1)
    ]


def _rows_by_trace(store: TraceStore) -> dict[str, set[tuple[str, str]]]:
    """For each table holding trace rows, the (tenant, trace_id) pairs it has rows of."""
    tables = ("spans", "logs", "evaluations", *TRAJECTORY_TABLES)
    return {
        table: {
            (t, tr)
            for t, tr in store.query(f"SELECT DISTINCT tenant, trace_id FROM {table} WHERE trace_id IS NOT NULL").rows
        }
        for table in tables
    }


def test_a_tenants_forget_deletes_and_counts_its_own_orphaned_jobs_only(store: TraceStore) -> None:
    """The jobs left without a trajectory by a forget are cleaned up after its commit: another tenant's orphans (a
    forget of theirs cut off before that step) are not this tenant's to delete, nor to count in its answer."""
    store.write(_agent_trace(1), tenant="acme")
    store.write(_agent_trace(2), tenant="globex")
    store.rebuild_trajectories([trace_hex(1)], tenant="acme")
    store.rebuild_trajectories([trace_hex(2)], tenant="globex")
    queue = store.job_queue()
    assert (
        queue.enqueue("rule", ["true"], [], tenant="acme") == queue.enqueue("rule", ["true"], [], tenant="globex") == 1
    )
    for table in TRAJECTORY_TABLES:  # globex's trajectory gone, its job not: what a forget cut off leaves
        store.execute_write(f"DELETE FROM {table} WHERE tenant = 'globex'")

    forgotten = store.forget([trace_hex(1)], "acme")
    assert (forgotten.traces, forgotten.spans, forgotten.jobs) == (1, 3, 1)  # acme's own job, not globex's orphan
    assert store.query("SELECT tenant, trace_id FROM grading_jobs").rows == [("globex", trace_hex(2))]


def test_forget_deletes_every_row_of_the_traces_asked_for_and_nothing_else(store: TraceStore) -> None:
    store.write(_agent_trace(1), [make_log(1, 1), make_log(1, 2, evaluation=True), make_log(None, 3)])
    store.write(_agent_trace(2), [make_log(2, 4, evaluation=True)])
    store.write(_agent_trace(1), [make_log(1, 5)], tenant="acme")  # the same trace id, another tenant's
    store.rebuild_trajectories([trace_hex(1), trace_hex(2)])
    store.rebuild_trajectories([trace_hex(1)], tenant="acme")
    store.job_queue().enqueue("rule", ["true"], [])
    before = _rows_by_trace(store)
    of_trace = "WHERE tenant = 'default' AND trace_id = ?"
    mapped = sum(
        store.query(f"SELECT count(*) FROM {t} {of_trace}", [trace_hex(1)]).rows[0][0] for t in TRAJECTORY_TABLES
    )
    assert mapped >= 4 and ("default", trace_hex(1)) in before["tool_calls"]

    forgotten = store.forget([trace_hex(1), trace_hex(9)])  # 9 was never stored: it is forgotten all the same

    assert forgotten == Deleted(traces=1, spans=3, logs=2, evaluations=1, trajectory_rows=mapped, jobs=1)
    after = _rows_by_trace(store)
    for table, keys in before.items():
        assert after[table] == keys - {("default", trace_hex(1))}, table
    assert store.query("SELECT body FROM logs WHERE trace_id IS NULL").rows == [('"record 3"',)]
    assert {row[0] for row in store.query("SELECT trace_id FROM grading_jobs").rows} == {trace_hex(2)}
    tombstones = store.query("SELECT tenant, trace_id FROM forgotten_traces ORDER BY ALL").rows
    assert tombstones == [("default", trace_hex(1)), ("default", trace_hex(9))]

    again = store.forget([trace_hex(1)])  # twice does no harm
    assert again == Deleted() and store.query("SELECT count(*) FROM forgotten_traces").rows == [(2,)]


def test_records_of_a_forgotten_trace_written_later_are_dropped(store: TraceStore) -> None:
    spans = _agent_trace(3)
    store.write(spans[:2])
    store.forget([trace_hex(3)])

    late = store.write(spans, [make_log(3, 1, evaluation=True), make_log(4, 2)])  # a retry, with a span never stored
    assert (late.spans_inserted, late.spans_forgotten, late.spans_duplicate) == (0, 3, 0)
    assert (late.logs_inserted, late.logs_forgotten) == (1, 1)
    assert late.trace_ids == {trace_hex(4)}
    kept = store.write(spans, tenant="acme")  # another tenant's trace with that id is not forgotten
    assert kept.spans_inserted == 3
    store.rebuild_trajectories([trace_hex(3)])
    store.rebuild_trajectories([trace_hex(3)], tenant="acme")

    rows = _rows_by_trace(store)
    assert rows["spans"] == {("acme", trace_hex(3))}
    assert rows["logs"] == {("default", trace_hex(4))} and rows["evaluations"] == set()
    assert rows["traces"] == {("acme", trace_hex(3))}


def test_a_rebuild_that_mapped_a_trace_before_it_was_forgotten_stores_none_of_it(
    store: TraceStore, tmp_path: Path
) -> None:
    """The builder reads a trace's spans, then replaces its rows in a transaction of its own: a forget in
    between must not be undone by the replacement."""
    spans = _agent_trace(5)
    store.write(spans)
    with TraceStore(tmp_path / "scratch.duckdb") as scratch:  # the rows a builder mapped from those spans
        scratch.write(spans)
        scratch.rebuild_trajectories([trace_hex(5)])
        mapped = {table: scratch.query_arrow(f"SELECT * EXCLUDE (tenant) FROM {table}") for table in TRAJECTORY_TABLES}
    assert mapped["traces"].num_rows == 1 and mapped["tool_calls"].num_rows == 2

    store.forget([trace_hex(5)])
    store.replace_trajectories(mapped, clear=[trace_hex(5)])

    assert _rows_by_trace(store) == {table: set() for table in ("spans", "logs", "evaluations", *TRAJECTORY_TABLES)}
    store.replace_trajectories(mapped, clear=[trace_hex(5)], tenant="acme")  # acme's trace 5 is not forgotten
    assert store.query("SELECT tenant, trace_id FROM traces").rows == [("acme", trace_hex(5))]


def test_a_forgotten_trace_stays_forgotten_after_the_file_is_opened_again(tmp_path: Path) -> None:
    path = tmp_path / "store.duckdb"
    spans = _agent_trace(6)
    with TraceStore(path, wal=False) as store:  # as under a receiver: durable once checkpointed
        store.write(spans)
        assert not store.holds_forgotten  # a store with no tombstone looks none up on its writes
        store.forget([trace_hex(6)])
    with TraceStore(path) as store:
        assert store.holds_forgotten
        assert store.query("SELECT count(*) FROM spans").rows == [(0,)]
        assert store.write(spans).spans_forgotten == 3  # a journal replay of the spans, say
        assert store.query("SELECT count(*) FROM spans").rows == [(0,)]


def _graded(*traces: int) -> EvalReport:
    """An online worker's report: one case per trace, the first passing, the others failing."""
    cases = []
    for n, trace in enumerate(traces):
        case = (passing_case if n == 0 else failing_case)()
        case.eval_id, case.trace_ids = trace_hex(trace), [trace_hex(trace)]
        cases.append(case)
    return EvalReport.create("online", cases)


def test_the_cases_an_online_worker_graded_of_a_forgotten_trace_go_and_recorded_runs_keep_theirs(
    store: TraceStore,
) -> None:
    record_cases(store, _graded(1, 2, 3), "worker", "rule-window", {"rule": "r"})
    record_cases(store, _graded(1), "worker", "rule-window", {"rule": "r"}, tenant="acme")  # acme's trace 1
    record_report(store, _graded(1, 2), "eval_set", "ci-run")  # a run people recorded: it keeps its copy
    counts = "SELECT total_cases, passed_cases, failed_cases FROM eval_runs WHERE tenant = ? AND run_id = ?"
    assert store.query(counts, ["default", "rule-window"]).rows == [(3, 1, 2)]

    forgotten = store.forget([trace_hex(1)])
    assert (forgotten.worker_cases, forgotten.recorded_runs, forgotten.runs_kept) == (1, 0, ("ci-run",))

    def cases(table: str) -> set[tuple[str, str, str]]:
        return set(store.query(f"SELECT DISTINCT tenant, run_id, eval_id FROM {table}").rows)

    window = {("default", "rule-window", trace_hex(n)) for n in (2, 3)}
    kept = {("acme", "rule-window", trace_hex(1))}
    recorded = {("default", "ci-run", trace_hex(n)) for n in (1, 2)}
    assert cases("eval_case_results") == cases("eval_results") == window | kept | recorded
    assert cases("eval_run_cases") == window | kept
    assert store.query(counts, ["default", "rule-window"]).rows == [(2, 0, 2)]  # counted again
    assert store.query(counts, ["acme", "rule-window"]).rows == [(1, 1, 0)]

    assert store.forget([trace_hex(2), trace_hex(3)]).worker_cases == 2
    assert store.query(counts, ["default", "rule-window"]).rows == [(0, 0, 0)]  # a run left with no case


def test_delete_runs_deletes_whole_the_recorded_runs_that_graded_a_forgotten_trace_in_any_turn(
    store: TraceStore,
) -> None:
    def report(*cases: list[int]) -> EvalReport:
        graded = []
        for n, turns in enumerate(cases):
            case = (passing_case if n == 0 else failing_case)()
            case.eval_id, case.trace_ids = f"case-{n}", [trace_hex(t) for t in turns]
            graded.append(case)
        return EvalReport.create("recorded", graded)

    record_report(store, report([1], [2]), "eval_set", "ci-run")
    record_report(store, report([5, 1]), "live", "multi-turn")  # trace 1 in the case's second turn only
    record_report(store, report([3]), "eval_set", "other-run")
    record_report(store, report([1]), "eval_set", "acme-run", tenant="acme")  # acme's own trace 1
    record_cases(store, _graded(1, 4), "worker", "rule-window", {"rule": "r"})
    store.write(_agent_trace(1))

    forgotten = store.forget([trace_hex(1)], delete_runs=True)

    assert (forgotten.traces, forgotten.recorded_runs, forgotten.runs_kept, forgotten.worker_cases) == (1, 2, (), 1)
    runs = {(tenant, run) for tenant, run in store.query("SELECT tenant, run_id FROM eval_runs").rows}
    assert runs == {("default", "other-run"), ("acme", "acme-run"), ("default", "rule-window")}
    for table in ("eval_case_results", "eval_results", "eval_run_cases"):  # every row of the runs went with them
        left = {run for (run,) in store.query(f"SELECT DISTINCT run_id FROM {table}").rows}
        assert not left & {"ci-run", "multi-turn"}, table
    assert store.forget([trace_hex(3)]).runs_kept == ("other-run",)  # kept when not asked: named
    assert store.forget([trace_hex(3)], delete_runs=True).recorded_runs == 1  # forgetting again deletes it


def test_what_was_deleted_adds_up_and_crosses_the_wire_unchanged() -> None:
    first = Deleted(traces=1, spans=3, recorded_runs=1, runs_kept=("a", "b"))
    both = first + Deleted(traces=2, spans=1, runs_kept=("b", "c"))
    assert (both.traces, both.spans, both.recorded_runs, both.runs_kept) == (3, 4, 1, ("a", "b", "c"))
    assert Deleted.from_dict(json.loads(json.dumps(both.as_dict()))) == both
    with pytest.raises(ValueError, match="unknown keys"):
        Deleted.from_dict({"traces": 1, "rows": 2})
    with pytest.raises(TypeError, match="runs_kept"):
        Deleted.from_dict({"runs_kept": "a"})


def test_a_tenant_sees_its_own_forgotten_traces_only(store: TraceStore) -> None:
    store.forget([trace_hex(7)], tenant="acme")
    store.forget([trace_hex(8)])
    seen = store.query("SELECT trace_id FROM forgotten_traces", tenant="acme").rows
    assert seen == [(trace_hex(7),)]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([], "is empty"),
        (["ok", 5], "ids[1] must be a trace id"),
        (["  "], "ids[0] must be a trace id"),
        (["x" * 300], "ids[0] must be a trace id"),
        (["a"] * 10_001, "forget at most 10000"),
    ],
)
def test_trace_ids_to_forget_are_checked(values: list, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        checked_trace_ids(values, "ids")


def test_hex_trace_ids_are_taken_in_the_case_the_receiver_stores() -> None:
    assert checked_trace_ids(["ABCDEF0123456789ABCDEF0123456789", " t-1 "]) == [
        "abcdef0123456789abcdef0123456789",
        "t-1",
    ]


def test_forget_where_builds_the_waiting_trajectories_first_so_that_it_sees_the_newest_traces(
    store: TraceStore, tmp_path: Path
) -> None:
    def trace(n: int, service: str) -> list:
        return [make_span(n, n * 100 + i, resource={"service.name": service}) for i in range(3)]

    store.write(trace(1, "svc-private") + trace(2, "svc-other"))  # stored, their trajectories not built yet
    assert store.query("SELECT count(*) FROM traces").rows == [(0,)]
    where, lake = location(store), isinstance(store, LakeStore)
    store.close()
    data = ["--lake-data", str(tmp_path / "lake-data")] if lake else []

    command = ["forget", "--store", where, *data, "--where", "service_name = 'svc-private'"]
    answer = CliRunner().invoke(cli, command)

    assert answer.exit_code == 0, answer.output
    assert "built the trajectories of 2 waiting trace(s) first" in answer.output
    assert "forgot 1 trace(s): 3 span(s)" in answer.output
    with LakeStore(where, data_path=tmp_path / "lake-data") if lake else TraceStore(Path(where)) as reader:
        assert reader.query("SELECT DISTINCT trace_id FROM spans").rows == [(trace_hex(2),)]
        assert reader.query("SELECT trace_id, service_name FROM traces").rows == [(trace_hex(2), "svc-other")]


def test_a_tenants_forget_where_builds_only_its_own_waiting_trajectories(store: TraceStore, tmp_path: Path) -> None:
    """``forget --tenant acme --where`` builds acme's waiting trajectories so that --where sees them, and no other
    tenant's: globex's traces still wait for their build (one tenant's forget neither does nor waits for another's
    backlog)."""
    store.write(_agent_trace(1) + _agent_trace(2), tenant="acme")  # stored, their trajectories not built yet
    store.write(_agent_trace(3) + _agent_trace(4), tenant="globex")
    globex_waiting = [("globex", trace_hex(3)), ("globex", trace_hex(4))]
    where, lake = location(store), isinstance(store, LakeStore)
    store.close()
    data = ["--lake-data", str(tmp_path / "lake-data")] if lake else []

    command = ["forget", "--store", where, *data, "--tenant", "acme", "--where", f"trace_id = '{trace_hex(1)}'"]
    answer = CliRunner().invoke(cli, command)

    assert answer.exit_code == 0, answer.output
    assert "built the trajectories of 2 waiting trace(s) first" in answer.output
    assert "forgot 1 trace(s): 3 span(s)" in answer.output
    with LakeStore(where, data_path=tmp_path / "lake-data") if lake else TraceStore(Path(where)) as reader:
        assert sorted(reader.stale_trajectories()) == globex_waiting
        assert sorted(reader.stale_trajectories(tenant="globex")) == globex_waiting
        assert reader.stale_trajectories(tenant="acme") == []
        assert reader.query("SELECT tenant, trace_id FROM traces").rows == [("acme", trace_hex(2))]
        assert sorted(reader.query("SELECT DISTINCT tenant, trace_id FROM spans").rows) == [
            ("acme", trace_hex(2)),
            *globex_waiting,
        ]
