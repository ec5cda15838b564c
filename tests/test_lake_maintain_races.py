"""``tracegrade maintain`` on a real lake while others race it: a real ``tracegrade forget`` committing inside the
flush of inlined rows, and PostgreSQL ending the session that holds the pass's maintenance lock.

Both are made deterministic by pausing the pass inside its flush: the test holds an ACCESS EXCLUSIVE lock on the
catalog table of the ``calibrations`` table's inlined rows, which the flush reads after its catalog transaction has
begun (and before it deletes the rows it flushed), and which neither a forget nor the look-up of unfinished forgets
reads. While the flush waits there, a forget commits the deletion of inlined spans that the flush is about to delete
(PostgreSQL then fails the flush with "could not serialize access": a pass used to exit 1 on it), or the lock's
session is ended with ``pg_terminate_backend`` (a pass used to go on without its lock, beside any pass that took it).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import IO

import psycopg
import pytest

from tests.support import pg_cluster
from tests.support.pg_cluster import PgServer
from tests.support.store_records import make_span, trace_hex
from tests.support.waiting import wait_until
from tracegrade.errors import StoreError
from tracegrade.store import lake_maintenance
from tracegrade.store.lake import LakeStore
from tracegrade.store.lake_location import catalog_conninfo, redacted
from tracegrade.store.lake_maintenance import maintenance_lock

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

SPANS = 3  # per trace, each trace its own write: under DuckLake's inlining limit, so the catalog holds them
TRACES = 5
FORGOTTEN = trace_hex(2)
# the lake table whose inlined rows' catalog table pauses a flush: neither a forget nor the look-up of unfinished
# forgets reads it
PAUSED_TABLE = "calibrations"
SUMMARY = "live data files"  # what a pass that went through prints


@pytest.fixture
def lake(pg_server: PgServer, tmp_path: Path) -> tuple[str, Path]:
    location, data = f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"
    with LakeStore(location, data_path=data) as store:
        for trace in range(1, TRACES + 1):
            store.write([make_span(trace, trace * 100 + n, name=f"step-{n}") for n in range(SPANS)])
    return location, data


def _spans(location: str) -> set[tuple[str, str, str]]:
    """Every span the lake holds, every copy, by its key."""
    with LakeStore(location, read_only=True) as reader:
        return set(reader.query("SELECT tenant, trace_id, span_id FROM raw.spans").rows)


def _inlined_table(catalog: psycopg.Connection, table: str) -> str:
    """The catalog table holding the inlined rows of the lake's ``table``."""
    row = catalog.execute(
        "SELECT i.table_name FROM ducklake_inlined_data_tables i JOIN ducklake_table t USING (table_id) "
        "WHERE t.table_name = %s AND t.end_snapshot IS NULL ORDER BY i.schema_version DESC LIMIT 1",
        [table],
    ).fetchone()
    assert row, f"no inlined rows table for {table}"
    return str(row[0])


def _inlined_spans(location: str) -> int:
    """How many spans the catalog holds inlined (none once a flush went through)."""
    with psycopg.connect(catalog_conninfo(location), autocommit=True) as catalog:
        row = catalog.execute(f"SELECT count(*) FROM {_inlined_table(catalog, 'spans')}").fetchone()
    return int(row[0]) if row else -1


@contextmanager
def _flush_paused(location: str) -> Iterator[psycopg.Connection]:
    """While the block runs, a maintenance pass that reaches its flush waits there, its catalog transaction begun
    (``_wait_in_flush``); it goes on once the block ends. Yields a connection to the catalog (autocommit)."""
    conninfo = catalog_conninfo(location)
    with psycopg.connect(conninfo, autocommit=True) as catalog, psycopg.connect(conninfo) as pausing:
        pausing.execute(f"LOCK TABLE {_inlined_table(catalog, PAUSED_TABLE)} IN ACCESS EXCLUSIVE MODE")
        yield catalog
        pausing.rollback()  # the lock released


def _wait_in_flush(catalog: psycopg.Connection, running: Callable[[], bool]) -> None:
    """Wait until a maintenance pass waits in its flush (``_flush_paused``), failing if it ends first."""
    paused = _inlined_table(catalog, PAUSED_TABLE)
    waiting = (
        "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'relation' AND relation = %s::regclass "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    )
    wait_until(
        lambda: (catalog.execute(waiting, [paused]).fetchone() or (0,))[0] or not running(),
        "the maintenance pass waiting in its flush",
        timeout=120,
    )
    assert running(), "the maintenance pass ended before its flush"


@contextmanager
def _maintaining(location: str, data: Path, *extra: str, out: IO[str]) -> Iterator[subprocess.Popen[str]]:
    """A real ``tracegrade maintain`` process, its stdout and stderr to ``out``; killed if the block fails."""
    command = [sys.executable, "-m", "tracegrade.cli.main", "maintain", "--store", location, "--lake-data", str(data)]
    process = subprocess.Popen([*command, *extra], stdout=out, stderr=out, text=True)
    try:
        yield process
    except BaseException:
        process.kill()
        process.wait(60)
        raise


def _forget(location: str, data: Path, trace_id: str) -> None:
    """A real ``tracegrade forget`` of one trace, to its end."""
    command = [sys.executable, "-m", "tracegrade.cli.main", "forget", "--store", location, "--lake-data", str(data)]
    done = subprocess.run([*command, trace_id], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and f"forgot 1 trace(s): {SPANS} span(s)" in done.stdout, done.stdout + done.stderr


def _without_forgotten(spans: set[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    return {span for span in spans if span[1] != FORGOTTEN}


def test_a_flush_raced_by_a_forget_is_tried_again_and_loses_nothing(lake: tuple[str, Path], tmp_path: Path) -> None:
    location, data = lake
    before = _spans(location)
    assert len(before) == TRACES * SPANS and _inlined_spans(location) == TRACES * SPANS
    log = tmp_path / "maintain.log"
    with log.open("w") as out, _maintaining(location, data, out=out) as maintain:
        with _flush_paused(location) as catalog:
            _wait_in_flush(catalog, lambda: maintain.poll() is None)
            _forget(location, data, FORGOTTEN)  # commits while the flush's catalog transaction is open
        maintain.wait(120)
    text = log.read_text()
    assert maintain.returncode == 0, text
    # the flush met the forget's deletion in PostgreSQL, and was tried again
    assert "flushing inlined rows lost a race with another commit, trying again: " in text, text
    assert "could not serialize access" in text
    assert SUMMARY in text and "Traceback" not in text
    assert _spans(location) == _without_forgotten(before)  # span by span: the forgotten trace's gone, no other
    assert _inlined_spans(location) == 0  # and the flush went through


def test_a_step_that_keeps_losing_its_race_fails_naming_it_and_the_lake_stays_usable(
    lake: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    location, data = lake
    before = _spans(location)
    monkeypatch.setattr(lake_maintenance, "STEP_ATTEMPTS", 1)  # the first lost race is the last
    with LakeStore(location, data_path=data, create=False) as store, ThreadPoolExecutor(1) as pool:
        with _flush_paused(location) as catalog:
            one_pass = pool.submit(store.maintain, keep=timedelta(minutes=15))
            _wait_in_flush(catalog, lambda: not one_pass.done())
            _forget(location, data, FORGOTTEN)
        with pytest.raises(StoreError) as failed:
            one_pass.result(timeout=120)
        assert str(failed.value).startswith(
            "flushing inlined rows (ducklake_flush_inlined_data) lost its race with other commits 1 times in a row: "
        ), failed.value
        assert "could not serialize access" in str(failed.value)
        assert _spans(location) == _without_forgotten(before)  # nothing flushed, nothing lost

        monkeypatch.undo()
        assert store.maintain(keep=timedelta(minutes=15)).rows_flushed > 0  # the same connection, usable
    assert _spans(location) == _without_forgotten(before)
    assert _inlined_spans(location) == 0


def _end_the_lock_session(catalog: psycopg.Connection, maintainer_pid: int, location: str) -> None:
    """End the session holding the maintenance lock of the ``maintain`` process ``maintainer_pid`` (found by its
    application name), as PostgreSQL would in a restart; then show the lock free: another pass could take it."""
    label = f"tracegrade maintain pid {maintainer_pid} on {socket.gethostname()}"[:63]
    row = catalog.execute(
        "SELECT array_agg(pg_terminate_backend(pid, 30000)) FROM pg_stat_activity "
        "WHERE application_name = %s AND datname = current_database()",
        [label],
    ).fetchone()
    assert row and row[0] == [True], f"one session named {label!r} ended: {row}"
    with maintenance_lock(catalog_conninfo(location), redacted(location)):
        pass


def test_a_pass_whose_lock_session_ended_stops_before_its_next_step(lake: tuple[str, Path], tmp_path: Path) -> None:
    location, data = lake
    before = _spans(location)
    log = tmp_path / "maintain.log"
    with log.open("w") as out, _maintaining(location, data, out=out) as maintain:
        with _flush_paused(location) as catalog:
            _wait_in_flush(catalog, lambda: maintain.poll() is None)
            _end_the_lock_session(catalog, maintain.pid, location)
        maintain.wait(120)
    text = log.read_text()
    assert maintain.returncode == 1, text
    assert (
        f"maintenance of {redacted(location)} failed: lost the lake's maintenance lock before merging adjacent files "
        "(its session is gone: terminating connection due to administrator command); another pass may be running, "
        "so this pass stopped there, keeping the steps it finished (run it again; nothing was lost)"
    ) in text, text
    assert SUMMARY not in text and "Traceback" not in text
    assert _spans(location) == before  # the flush it finished first lost nothing
    assert _inlined_spans(location) == 0


def test_maintain_every_goes_on_to_its_next_pass_after_losing_its_lock(lake: tuple[str, Path], tmp_path: Path) -> None:
    location, data = lake
    before = _spans(location)
    log = tmp_path / "maintain.log"
    with log.open("w") as out, _maintaining(location, data, "--every", "1s", out=out) as maintain:
        with _flush_paused(location) as catalog:
            _wait_in_flush(catalog, lambda: maintain.poll() is None)
            _end_the_lock_session(catalog, maintain.pid, location)
        wait_until(lambda: SUMMARY in log.read_text() or maintain.poll() is not None, "a pass after the lost one", 120)
        assert maintain.poll() is None, log.read_text()
        maintain.send_signal(signal.SIGTERM)  # stops it after the pass in progress
        maintain.wait(60)
    text = log.read_text()
    assert maintain.returncode == 0, text
    lost, _, after = text.partition("lost the lake's maintenance lock")
    assert after, text
    assert SUMMARY not in lost and "; retrying at the next interval" in after, text
    assert "Traceback" not in text
    assert _spans(location) == before
