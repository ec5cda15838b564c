"""A forget on a lake that died between its two commits is finished by the next ``tracegrade maintain``.

A lake's forget commits the trace keys to the catalog's database (``lake_forgotten``) first, then deletes the
traces' rows in a DuckLake transaction. A process killed in between left the traces listed as forgotten with
every row still readable until someone ran ``forget`` again. The crash window is hit two ways: the keys added
through the store's own ``_remember_forgotten`` (what the killed forget had committed), and a real ``tracegrade
forget`` SIGKILLed while its DuckLake commit waits on a lock the test holds in the catalog. Then a real ``tracegrade
maintain`` runs, and every row is checked: the forgotten traces' are gone, every other trace's are there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.support import pg_cluster
from tests.support.pg_cluster import PgServer
from tests.support.store_records import make_log, make_span, trace_hex
from tests.support.waiting import wait_until
from tracegrade.store.lake import LakeStore
from tracegrade.store.lake_location import catalog_conninfo
from tracegrade.store.trace_deletion import trace_keys
from tracegrade.store.trajectories import TRAJECTORY_TABLES

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

_TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
_ROWS = {  # each table's rows, by the columns that tell them apart
    "spans": "tenant, trace_id, span_id",
    "logs": "tenant, trace_id, log_key",
    "evaluations": "tenant, trace_id, log_key",
    **{table: "tenant, trace_id" for table in TRAJECTORY_TABLES},
}
TOOLS = 24  # tool spans per trace: with the agent's, above DuckLake's inlining limit (a Parquet file per write)
# the (tenant, trace) pairs written; the same trace id under two tenants, so a tenant's forget is seen to stay its own
_TRACES = [("default", 1), ("default", 2), ("default", 3), ("acme", 1), ("acme", 4)]


@pytest.fixture
def lake(pg_server: PgServer, tmp_path: Path) -> tuple[str, Path]:
    return f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"


def _write_traces(location: str, data: Path) -> None:
    """Each trace of ``_TRACES``: spans (an agent and its tool calls), a log record and an evaluation event, and its
    trajectory built."""
    with LakeStore(location, data_path=data) as store:
        for n, (tenant, trace) in enumerate(_TRACES):
            root = trace * 100
            spans = [make_span(trace, root, name="agent", attributes={"gen_ai.operation.name": "invoke_agent"})]
            spans += [
                make_span(trace, root + i, parent=root, name="search", attributes=_TOOL) for i in range(1, TOOLS + 1)
            ]
            store.write(spans, [make_log(trace, 10 * n + 1), make_log(trace, 10 * n + 2, evaluation=True)], tenant)
        for tenant in {tenant for tenant, _ in _TRACES}:
            store.rebuild_trajectories([trace_hex(t) for owner, t in _TRACES if owner == tenant], tenant)


def _rows(location: str) -> dict[str, set[tuple[str, ...]]]:
    """Every row of every table holding trace rows, every copy of it (the lake's raw tables), by its key."""
    with LakeStore(location, read_only=True) as reader:
        return {
            table: set(reader.query(f"SELECT {key} FROM raw.{table} WHERE trace_id IS NOT NULL").rows)
            for table, key in _ROWS.items()
        }


def _without(rows: dict[str, set[tuple[str, ...]]], forgotten: set[tuple[str, str]]) -> dict[str, set]:
    return {table: {row for row in found if (row[0], row[1]) not in forgotten} for table, found in rows.items()}


def _maintain(location: str, data: Path) -> str:
    """A real ``tracegrade maintain`` process (one pass); its output."""
    command = [sys.executable, "-m", "tracegrade.cli.main", "maintain", "--store", location, "--lake-data", str(data)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _check_finished(location: str, data: Path, before: dict, forgotten: set[tuple[str, str]]) -> None:
    """Maintain deletes every row of the ``forgotten`` traces and no other, then finds nothing more to do."""
    assert all((tenant, trace) in {(r[0], r[1]) for r in before["spans"]} for tenant, trace in forgotten)
    output = _maintain(location, data)
    after = _rows(location)
    assert {(r[0], r[1]) for rows in after.values() for r in rows} & forgotten == set(), output
    assert after == _without(before, forgotten)  # row by row: the others' are all there
    spans = len(forgotten) * (TOOLS + 1)
    assert f"finished interrupted forgets of {len(forgotten)} trace(s) ({spans} span(s), 4 log record(s)" in output
    assert "finished interrupted forgets of 0 trace(s)" in _maintain(location, data)
    # and the forgotten traces stay forgotten: a late span of one is dropped
    with LakeStore(location, data_path=data) as store:
        tenant, trace = sorted(forgotten)[0]
        assert store.write([make_span(int(trace, 16), 999, name="late")], tenant=tenant).spans_forgotten == 1


def test_maintain_deletes_the_rows_a_forget_that_died_before_its_deletion_left(lake: tuple[str, Path]) -> None:
    location, data = lake
    _write_traces(location, data)
    forgotten = {("default", trace_hex(1)), ("acme", trace_hex(4))}
    with LakeStore(location, data_path=data) as store:
        # what a forget killed between its two commits had done: the keys committed, no row deleted
        for tenant, trace in forgotten:
            store._remember_forgotten(trace_keys(tenant, [trace]))
        listed = set(store.query("SELECT tenant, trace_id FROM forgotten_traces").rows)
    assert listed == forgotten
    before = _rows(location)

    _check_finished(location, data, before, forgotten)


def _waiting_on_snapshots(conninfo: str) -> bool:
    """Whether a session of the catalog's database waits for a lock on DuckLake's table of snapshots."""
    with psycopg.connect(conninfo, autocommit=True) as con:
        row = con.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'relation' "
            "AND relation = 'ducklake_snapshot'::regclass "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchone()
    return bool(row and row[0])


def test_maintain_finishes_a_forget_process_killed_before_its_deletion_committed(
    lake: tuple[str, Path], tmp_path: Path
) -> None:
    location, data = lake
    _write_traces(location, data)
    before = _rows(location)
    conninfo = catalog_conninfo(location)
    command = [sys.executable, "-m", "tracegrade.cli.main", "forget", "--store", location, "--lake-data", str(data)]
    log = tmp_path / "forget.out"
    with psycopg.connect(conninfo) as blocker:
        # every DuckLake commit inserts its snapshot here: EXCLUSIVE lets the forget read the lake and commit its
        # keys (another table), and holds its DuckLake commit until the process is killed
        blocker.execute("LOCK TABLE ducklake_snapshot IN EXCLUSIVE MODE")
        with log.open("w") as out:
            forget = subprocess.Popen([*command, trace_hex(2), trace_hex(3)], stdout=out, stderr=out)
        try:
            wait_until(
                lambda: _waiting_on_snapshots(conninfo) or forget.poll() is not None,
                "the forget's DuckLake commit waiting on the lock",
                timeout=120,
            )
            assert forget.poll() is None, log.read_text()
            os.kill(forget.pid, signal.SIGKILL)
            assert forget.wait(timeout=60) == -signal.SIGKILL
        finally:
            if forget.poll() is None:
                forget.kill()
                forget.wait()
        blocker.rollback()  # the lock released
    forgotten = {("default", trace_hex(2)), ("default", trace_hex(3))}
    assert _rows(location) == before  # the crash window: nothing deleted...
    with LakeStore(location, read_only=True) as reader:  # ...yet the traces listed as forgotten
        assert set(reader.query("SELECT tenant, trace_id FROM forgotten_traces").rows) == forgotten

    _check_finished(location, data, before, forgotten)
