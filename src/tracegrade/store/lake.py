"""LakeStore: the trace store on a DuckLake (catalog in PostgreSQL, data as Parquet files under one path).

Many processes on many machines may open one lake, read-write or read-only: DuckLake commits with
optimistic concurrency through the catalog and retries a commit that lost a race (up to
``MAX_RETRY_COUNT`` times, raised from DuckLake's 10: several receivers committing at once exhaust those).
A commit is durable when it returns (Parquet written, catalog committed), so the store reports
``wal=True`` and needs no checkpoints; each costs a Parquet file and a catalog transaction, so writers
gather about ``COMMIT_SECONDS`` of records into one. A commit that still loses its race after those
retries raises ``CommitConflict`` (the writer tries it again); an unreachable catalog or data path (an
I/O error: PostgreSQL down, a full disk) marks the store failed, and its owner reopens it.

Trajectory builds are coordinated through the catalog's PostgreSQL (``lake_builds``): every write marks
its traces there, and any process claims them; ``updated_at`` and ``stamp`` come from PostgreSQL's clock.
Every write transaction also holds the lake's write gate shared (``lake_write_gate``), which retention's
expiry batches hold exclusive.

A LakeStore is a TraceStore whose connections see the lake through two schemas (see ``lake_schema``):
the writing connection works in ``raw`` (every copy written), so the file store's write path (its
lookup of stored span keys, its inserts, its replacement of trajectory rows) runs unchanged on the base
tables (except that spans fresh from an exporter are not looked up: see ``looks_up_fresh_spans``), while
query cursors work in ``main``, whose store tables are views with one row per key.
Log records, which the file store keeps unique with a primary key, are looked up before the insert
instead, and each trajectory replacement gets its own ``build_id``. Recorded runs are appended, each
write stamped (``grading_tables``); the online grading job queue is a table in the catalog's PostgreSQL
database (``lake_jobs``), which every open attaches read-only for the ``grading_jobs`` view.

Every extension is loaded and the lake attached before the connection is locked down
(``readonly.lock_down``: no file or network access); ``allowed_directories`` keeps the data path open to
DuckLake's own reads and writes.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import tempfile
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from tracegrade.errors import StoreError, StoreMissingError
from tracegrade.models.span import LogRecordData, SpanRecord
from tracegrade.store.build_queue import BuildQueue
from tracegrade.store.database import duckdb_size_bytes, insert_arrow, without_progress_bar
from tracegrade.store.duckdb_api import registered
from tracegrade.store.evaluations import evaluation_rows
from tracegrade.store.grading_tables import append_record_rows
from tracegrade.store.lake_builds import CatalogBuildQueue
from tracegrade.store.lake_extensions import load_lake_extensions
from tracegrade.store.lake_failed_writes import remove_failed_write
from tracegrade.store.lake_forgotten import CatalogForgottenTraces, ensure_forgotten_table, unfinished_sql
from tracegrade.store.lake_jobs import JOBS_SCHEMA, CatalogJobQueue, ensure_job_table
from tracegrade.store.lake_location import catalog_conninfo, redacted
from tracegrade.store.lake_maintenance import MaintenanceResult, maintain_lake, maintenance_lock
from tracegrade.store.lake_schema import (
    BUILD_COLUMN,
    FIRST_COPY,
    JOBS_ALIAS,
    RAW_SCHEMA,
    VIEWS_OF_RAW,
    ensure_lake_schema,
    file_schema_columns,
    lake_version,
)
from tracegrade.store.lake_spill import new_spill_directory, remove_abandoned, remove_spill_directory
from tracegrade.store.lake_view_columns import ViewColumns
from tracegrade.store.lake_write_gate import WriteGate
from tracegrade.store.prepared import PreparedWrite
from tracegrade.store.read_cursors import ReadCursors
from tracegrade.store.readonly import lock_down
from tracegrade.store.results import CommitConflict, QueryResult, WriteResult
from tracegrade.store.row_groups import RowGroupFill
from tracegrade.store.rows import LOG_SELECT_COLUMNS, SPAN_SELECT_COLUMNS, log_from_row, span_from_row, sql_string
from tracegrade.store.schema import SCHEMA_VERSION
from tracegrade.store.span_keys import start_ranges
from tracegrade.store.tenancy import DEFAULT_TENANT, TraceKey
from tracegrade.store.trace_deletion import Deleted
from tracegrade.store.trace_store import DEFAULT_WRITER_THREADS, QUERY_SPILL_LIMIT, TraceStore, tenant_views

__all__ = ["CATALOG_ALIAS", "COMMIT_SECONDS", "MAX_RETRY_COUNT", "LakeStore"]

log = logging.getLogger("tracegrade.lake")

CATALOG_ALIAS = "lake"
MAX_RETRY_COUNT = 100
# how long a writer gathers records into one commit: each commit writes a Parquet file and a catalog
# transaction, and small commits throttle every writer of the lake (DuckLake conflicts grow with their rate)
COMMIT_SECONDS = 1.0
_LOOKUP_CHUNK = 1000  # trace ids per IN list when loading records
_LOG_KEYS_VIEW = "_tracegrade_log_keys"
_SPAN_ORDER = "trace_id, start_ns, span_id"
_LOG_ORDER = "trace_id, time_ns, log_key"
# Each connection spills to a temp directory of its own, made under the system's (TMPDIR): in-memory databases
# share DuckDB's default (``.tmp`` in the working directory) and name their files alike, and one that closes
# removes the directory under the others (a renewed connection whose predecessor closed failed every query that
# spilled, IO Error "Cannot open file"; so did one process's beside another's started from the same directory),
# and a receiver started from a directory it cannot write (``/``, as a service) could not spill at all. A killed
# process's directories are removed by the next store that opens on the machine (``lake_spill``).


def _close_connection(con: duckdb.DuckDBPyConnection, spill: str) -> None:
    """Close ``con`` and remove its temp directory."""
    try:
        con.close()
    finally:
        remove_spill_directory(spill)


class LakeStore(TraceStore):
    """The trace store on the DuckLake at ``location`` (``ducklake:postgres:<libpq conninfo>``).

    ``data_path`` is where the Parquet files go; it is recorded in the catalog when the lake is created,
    and every process must see the same path. Read-only opens take it from the catalog.
    """

    # a tenant's views also blank every column of other tenants' rows (see ``tenant_views``): DuckDB 1.5's Parquet
    # reader may run a query's own filter on rows before the tenant's condition has dropped them
    _scan_filters_run_early = True
    _views_in_query_transaction = True

    def __init__(
        self,
        location: str,
        *,
        data_path: str | Path | None = None,
        read_only: bool = False,
        memory_limit: str | None = None,
        query_memory_limit: str | None = None,
        threads: int | None = None,
        create: bool = True,
    ) -> None:
        """``create``: a read-write open makes a new lake in a database that holds none (as the first receiver's
        does); False refuses one instead, for commands that only look after an existing lake (``maintain``)."""
        conninfo = catalog_conninfo(location)
        self.location = location
        self.path = redacted(location)  # type: ignore[assignment]  # messages name the lake, never its password
        self.read_only = read_only
        self.memory_limit = memory_limit
        if not read_only and data_path is None:
            raise StoreError(f"opening lake {self.path} for writing needs its data path (--lake-data PATH)")
        config: dict[str, Any] = {
            "autoinstall_known_extensions": "false",
            "autoload_known_extensions": "false",
            "max_temp_directory_size": QUERY_SPILL_LIMIT,
        }
        if memory_limit:
            config["memory_limit"] = (
                f"{duckdb_size_bytes(memory_limit) + duckdb_size_bytes(query_memory_limit)}B"
                if query_memory_limit
                else memory_limit
            )
        if threads or not read_only:
            config["threads"] = threads or DEFAULT_WRITER_THREADS
        self._replacing_exclusively = False  # see replacing_exclusively
        self._config = config
        self._conninfo = conninfo
        remove_abandoned()  # spill directories of processes killed on this machine
        self._con, self._spill = self._connect(data_path, create, first=True)
        self.renewals = 0  # times the connection was replaced by a new one
        self._use = f"USE {CATALOG_ALIAS}.main"  # queries see the deduplicating views
        self.wal = True  # every commit is durable when it returns
        self.failure: str | None = None
        self.uncheckpointed_bytes = 0
        self.uncheckpointed_since: float | None = None
        self.span_group = RowGroupFill(1)  # no row groups to fill: the writer never checkpoints a lake
        self._reads = ReadCursors(self._con.cursor(), self._use, self._describe)
        self._write_lock = threading.RLock()
        self._last_stamp = datetime.min
        self._closed = False
        self._jobs: CatalogJobQueue | None = None
        self._forgotten = CatalogForgottenTraces(conninfo)
        self._view_columns_known = ViewColumns(conninfo)  # connects at its first use: a tenant's query
        self.holds_forgotten = True  # another machine may forget a trace at any time: every write looks
        self._gate = WriteGate(conninfo, self._catalog_out_of_reach)  # connects at its first use: writes take it
        self._taken_in = 0  # snapshots taken in by the connection in use (see renew_after_commits)
        self._last_read_at: int | None = None  # the lake's newest snapshot at this store's last read
        self._committed_since_read = 0  # this store's own commits since its last read
        self._counting = threading.Lock()  # over the three above: reads count beside a commit of this store
        self._writing = False  # this store's own write transaction is open (set and read under the write lock)
        try:
            self._catalog_builds = CatalogBuildQueue(conninfo, create=not read_only)
        except BaseException:
            _close_connection(self._con, self._spill)
            raise

    def _connect(
        self, data_path: str | Path | None, create: bool, *, first: bool
    ) -> tuple[duckdb.DuckDBPyConnection, str]:
        """A new DuckDB database with the lake attached (and the catalog's database, for ``grading_jobs``), locked
        down, and its temp directory (close both with ``_close_connection``). ``first``: this store's first
        connection, which also checks the lake's schema version (read-only) or creates and migrates its schema; a
        renewed one (``_renew``) finds it in place."""
        spill = new_spill_directory()
        try:
            con = duckdb.connect(":memory:", config={**self._config, "temp_directory": spill})
        except BaseException:
            remove_spill_directory(spill)
            raise
        without_progress_bar(con)
        try:
            load_lake_extensions(con)
            self.data_path = self._attach(con, data_path, create)
            con.execute(f"SET ducklake_max_retry_count = {MAX_RETRY_COUNT}")
            # DuckLake reads and writes its Parquet files through DuckDB's file system, which the lock
            # below closes to everything but these directories
            con.execute(f"SET allowed_directories = [{sql_string(self.data_path)}]")
            if first and self.read_only:
                self._check_version(con)
            elif first and (lake_version(con, CATALOG_ALIAS) or 0) < SCHEMA_VERSION:
                columns = file_schema_columns()
                ensure_job_table(self._conninfo, columns["grading_jobs"])
                ensure_forgotten_table(self._conninfo, columns["forgotten_traces"])
            jobs = f"(TYPE postgres, READ_ONLY, SCHEMA '{JOBS_SCHEMA}')"
            con.execute(f"ATTACH {sql_string(self._conninfo)} AS {JOBS_ALIAS} {jobs}")
            if first and not self.read_only:
                ensure_lake_schema(con, CATALOG_ALIAS, str(self.path))
            con.execute(f"USE {CATALOG_ALIAS}.{RAW_SCHEMA}")
            lock_down(con, freeze=False)
        except duckdb.Error as exc:  # the catalog went away after the attach: out of reach, as at the attach
            _close_connection(con, spill)
            raise StoreError(f"cannot open lake {self.path}: {_attach_problem(str(exc))}") from None
        except BaseException:
            _close_connection(con, spill)
            raise
        return con, spill

    # DuckDB keeps memory per DuckLake commit (its catalog caches, per snapshot) that only closing the database
    # gives back, without bound on one connection: 20 KB a commit for one table written and read, about 200 KB
    # in a receiver writing spans and trajectories while it answers queries (bench/RESULTS.md, lake connection
    # renewal). It is taken in per snapshot a transaction or read begins at, more the more commits of others came
    # between (about 100 KB a commit for a writer committing once in 28 lake commits), not per lake commit: a store's
    # connection is replaced once it took in this many snapshots. Each of its own commits counts one, and each of its
    # reads when another process committed since its last read (``tracegrade ui`` on a lake for days, or a receiver
    # that rarely commits but answers many queries while other receivers commit). A writer's is replaced before its
    # next commit (at a receiver's steady load about once a minute, each renewal costing its writer 0.3-0.7 s) or before
    # a read while it is not writing, a read-only store's before a read. Counting every lake commit instead renewed a
    # rare writer or reader on a busy lake every few of its commits or reads, for a few MB (bench/RESULTS.md, a lake
    # writer committing rarely).
    renew_after_commits = 200

    def _renew_if_due(self) -> None:
        """``_renew`` once the connection took in ``renew_after_commits`` snapshots (call under the write lock,
        outside a transaction)."""
        if self._taken_in >= self.renew_after_commits:
            self._renew()

    def _renew(self) -> None:
        """Replace the connection by a new database with the lake attached (call under the write lock, outside
        a transaction: nothing is being written). Reads already running finish on the old one, which is closed
        when the last of them ended (``ReadCursors.renew``); reads from now on, and every write, use the new one.
        StoreError when a new connection cannot be made (PostgreSQL out of reach); the one in use stays."""
        self._require_open()  # under the write lock, which ``close`` takes: not closed while this runs
        fresh, spill = self._connect(self.data_path, create=False, first=False)
        old = functools.partial(_close_connection, self._con, self._spill)
        self._con, self._spill = fresh, spill
        self._reads.renew(fresh.cursor(), old)
        with self._counting:
            self._taken_in = 0
        self.renewals += 1

    commit_seconds = COMMIT_SECONDS
    # spans fresh from exporters skip the stored-key look-up: the look-up reads the key columns of every
    # file whose start times overlap the batch's (each commit's largest cost), while the views show one
    # copy per span anyway, so a re-sent request stores a second copy that no query sees; journal replays
    # and imports, which re-send much, are still looked up (bench/RESULTS.md, lake ingest)
    looks_up_fresh_spans = False
    # ``stamp()`` is the catalog's (PostgreSQL's) clock, which stamped every ``updated_at``: a process on another
    # machine compares times with it, never with its own clock (see ``GradingWorker.enqueue``)
    shared_clock = True
    # every lake query pays catalog round trips (tens of milliseconds of CPU), so a build claims more
    # traces at once than on a file; their rows still fit the store's memory limit
    rebuild_traces = 1000

    @property
    def builds(self) -> BuildQueue:
        """The lake's build queue, in its catalog database (shared by every process on the lake)."""
        return self._catalog_builds

    def stamp(self) -> datetime:
        """PostgreSQL's clock: every process on the lake stamps from the same one."""
        return self._catalog_builds.now()

    def stale_trajectories(self, limit: int | None = None, *, tenant: str | None = None) -> list[TraceKey]:
        """The traces waiting in the build queue (marked by a write, not built since), longest-due first
        (``tenant``'s only, when given)."""
        return self._catalog_builds.waiting(limit, tenant=tenant)

    def _failed(self, doing: str, exc: duckdb.Error) -> StoreError:
        """A lost race is a CommitConflict (try again); an I/O error (the catalog or the data path out of
        reach) fails the store until it is reopened."""
        first_line = redacted(str(exc).splitlines()[0])
        if isinstance(exc, duckdb.TransactionException):
            return CommitConflict(f"{doing} failed: {first_line}")
        if isinstance(exc, (duckdb.IOException, duckdb.ConnectionException)):
            remove_failed_write(str(exc), self.data_path)  # the transaction is rolled back: nothing lists the file
            self._catalog_out_of_reach(first_line)
            return StoreError(f"{doing} failed: {first_line}")
        return super()._failed(doing, exc)

    def _cursor(self, *, use: bool = True) -> duckdb.DuckDBPyConnection:
        """As TraceStore's. A read at a snapshot this store's connection has not taken in yet (``_at_new_snapshot``)
        counts towards its renewal, which comes here when due (``_renew_before_read``), as it comes before a commit."""
        if self._at_new_snapshot():
            self._renew_before_read()
            with self._counting:
                self._taken_in += 1
        return super()._cursor(use=use)

    def _at_new_snapshot(self) -> bool:
        """Whether a read now begins at a snapshot the connection has not taken in: the lake's newest is beyond the
        last read's by more than this store's own commits since (each counted itself), so another process committed.
        The newest snapshot's id is read from the catalog's PostgreSQL (by its primary key: a fraction of a
        millisecond), so a reader of a lake nobody else writes is never renewed. The store's first read only notes
        where it starts (its open took the snapshot of then in). StoreError when the catalog cannot be read."""
        newest = self._view_columns_known.newest_snapshot_id()
        with self._counting:
            last, committed = self._last_read_at, self._committed_since_read
            if last is not None and newest <= last:  # no commit since, or a read that began later counted it
                return False
            self._last_read_at, self._committed_since_read = newest, 0
        return last is not None and newest - last > committed

    def _renew_before_read(self) -> None:
        """``_renew_if_due`` before a read, where that is safe: never inside this store's own write transaction (a
        read on the thread that holds the write lock, which is reentrant), and never waiting for a commit of this
        store, whose next commit renews the connection instead (a read-only store has none to wait for).

        A new connection that cannot be made fails neither the read nor a writer's store: the connection in use is
        whole (renewing only gives memory back), so the read goes on with it, and the next read at a new snapshot,
        or commit, tries again; PostgreSQL out of reach fails the read by itself, and a writer's next commit, which
        marks the store failed."""
        if not self._write_lock.acquire(blocking=self.read_only):
            return
        try:
            if not self._writing:
                self._renew_if_due()
        except (StoreError, OSError) as exc:
            log.warning(
                "lake %s: its connection could not be renewed before a read, which uses it still: %s", self.path, exc
            )
        finally:
            self._write_lock.release()

    @contextmanager
    def _transaction(self, doing: str) -> Iterator[None]:
        """As TraceStore's, inside the write gate (shared): an expiry batch on any machine waits for it. Before it
        begins, the connection is renewed when it took in ``renew_after_commits`` snapshots; a new one that cannot
        be made fails a writer's store (its owner reopens it)."""
        self._require_open()
        gate = contextlib.nullcontext() if self.read_only else self._gate.shared()
        with gate, self._write_lock:
            try:
                self._renew_if_due()
            except StoreError as exc:
                if not self.read_only:  # refused below anyway: a reader's reads go on
                    self._catalog_out_of_reach(str(exc))
                raise
            self._writing = True
            try:
                with super()._transaction(doing):
                    yield
            finally:
                self._writing = False
            with self._counting:
                self._taken_in += 1
                self._committed_since_read += 1

    @contextmanager
    def _deletion_batch(self) -> Iterator[None]:
        """The write gate, exclusive: DuckLake would fail the deletes if any write committed meanwhile."""
        with self._gate.exclusive():
            yield

    def _scope_views(self, cursor: duckdb.DuckDBPyConnection, tenant: str, names: frozenset[str]) -> None:
        """As TraceStore's, with what the catalog tells of the snapshot the query reads (``lake_view_columns``): the
        column names of each table, known per schema version, and the tables never written to, whose views (and so
        the tenant's) are empty and plan no scan."""
        if not names:
            return
        known = self._view_columns_known
        catalog = known.snapshot(cursor, CATALOG_ALIAS, RAW_SCHEMA)
        version = catalog.schema_version
        tenant_views(
            cursor,
            tenant,
            names,
            functools.partial(known.of, version=version),
            guard=self._scan_filters_run_early,
            empty=names & catalog.unwritten & VIEWS_OF_RAW,
            relations=lambda database, schema: known.relations(cursor, database, schema, version),
        )

    def _catalog_out_of_reach(self, why: str) -> None:
        self.mark_failed(f"the lake's catalog or data path is out of reach: {why}")

    def close(self) -> None:
        with self._write_lock:
            if self._jobs is not None:
                self._jobs.close()
            self._gate.close()
            self._forgotten.close()
            self._view_columns_known.close()
        self._catalog_builds.close()
        super().close()
        remove_spill_directory(self._spill)  # the connection is closed: its temp directory goes too

    def _remember_forgotten(self, keys: pa.Table) -> None:
        """In the catalog's database (``lake_forgotten``), committed there at once: before the deletions commit,
        since the writes of every machine look their traces up there (the lake's data and its catalog's database
        are no one transaction, so a crash between the two leaves the traces forgotten, their rows to be deleted
        by the next maintenance pass: ``finish_forgets``)."""
        self._require_open()
        self._forgotten.add(list(zip(keys.column("tenant").to_pylist(), keys.column("trace_id").to_pylist())))

    def _forgotten_committed(self, keys: pa.Table) -> None:
        """Nothing to keep in memory: every write looks the forgotten traces up in the catalog's database."""

    def _forgotten_among(self, traces: set[TraceKey]) -> set[TraceKey]:
        """Looked up in the catalog's database, inside the caller's transaction and so the write gate."""
        if not traces:
            return set()
        try:
            return self._forgotten.among(traces)
        except StoreError as exc:  # as when the gate cannot be entered: reopened, the journal replays the write
            self._catalog_out_of_reach(str(exc))
            raise

    def _attach(self, con: duckdb.DuckDBPyConnection, data_path: str | Path | None, create: bool) -> str:
        """ATTACH the lake to ``con``; the absolute data path (with a trailing slash) it keeps its files under."""
        options = []
        made: list[Path] = []  # directories made here, removed again if the lake cannot be opened
        if data_path is not None:
            path = Path(data_path).absolute()
            if not self.read_only:
                made = _writable_directory(path, str(self.path))
            options.append(f"DATA_PATH {sql_string(str(path) + '/')}")
        if self.read_only:
            options.append("READ_ONLY")
        elif not create:
            options.append("CREATE_IF_NOT_EXISTS false")
        listed = f" ({', '.join(options)})" if options else ""
        try:
            con.execute(f"ATTACH {sql_string('ducklake:postgres:' + self._conninfo)} AS {CATALOG_ALIAS}{listed}")
            (stored,) = con.execute(
                "SELECT value FROM ducklake_options(?) WHERE option_name = 'data_path'", [CATALOG_ALIAS]
            ).fetchone()  # type: ignore[misc]
        except duckdb.Error as exc:
            for directory in made:  # innermost first; a failed open leaves no new directory behind
                with contextlib.suppress(OSError):
                    directory.rmdir()
            error = StoreMissingError if _NO_LAKE_YET in str(exc) else StoreError
            raise error(f"cannot open lake {self.path}: {_attach_problem(str(exc))}") from None
        return str(stored)

    def _check_version(self, con: duckdb.DuckDBPyConnection) -> None:
        version = lake_version(con, CATALOG_ALIAS)
        if version is None:
            raise StoreError(f"lake {self.path} holds no tracegrade store yet (start `tracegrade serve` on it first)")
        if version != SCHEMA_VERSION:
            raise StoreError(
                f"lake {self.path} has schema version {version}; this tracegrade reads {SCHEMA_VERSION}. "
                + ("Upgrade tracegrade" if version > SCHEMA_VERSION else "Open it once read-write to migrate it")
            )

    # ---------------------------------------------------------------- writes

    def _insert_logs(
        self, submissions: Sequence[PreparedWrite], results: list[WriteResult], received_at: datetime
    ) -> None:
        """Insert the log records not stored yet (by tenant and ``log_key``, looked up within the batch's
        times), crediting the first submission that holds each."""
        owned = [(s.logs, r) for s, r in zip(submissions, results) if s.logs is not None]
        if not owned:
            return
        batch = pa.concat_tables([table for table, _ in owned])
        seen = self._stored_log_keys(batch)
        keep: list[int] = []
        row = 0
        for table, result in owned:
            keys = zip(table.column("tenant").to_pylist(), table.column("log_key").to_pylist())
            for key, trace_id in zip(keys, table.column("trace_id").to_pylist()):
                if key not in seen:
                    seen.add(key)
                    keep.append(row)
                    result.logs_inserted += 1
                    if trace_id:
                        result.trace_ids.add(trace_id)
                row += 1
        if not keep:
            return
        batch = batch.take(pa.array(keep, pa.int64()))
        batch = batch.append_column("received_at", pa.array([received_at] * batch.num_rows, pa.timestamp("us")))
        insert_arrow(self._con, "logs", batch)
        evaluations = evaluation_rows(batch)
        if evaluations is not None:
            insert_arrow(self._con, "evaluations", evaluations)

    def _stored_log_keys(self, batch: pa.Table) -> set[tuple[str, str]]:
        ranges = start_ranges(batch.column("time_ns").to_pylist())
        scans = " UNION ALL ".join(
            f"SELECT tenant, log_key FROM logs WHERE time_ns BETWEEN {lo} AND {hi}" for lo, hi in ranges
        )
        with registered(self._con, _LOG_KEYS_VIEW, batch.select(["tenant", "log_key"])):
            found = self._con.execute(
                f"SELECT s.tenant, s.log_key FROM ({scans}) s SEMI JOIN {_LOG_KEYS_VIEW} USING (tenant, log_key)"
            )
            return {(tenant, key) for tenant, key in found.fetchall()}

    def replace_trajectories(
        self, tables: dict[str, pa.Table], *, clear: Sequence[str], tenant: str = DEFAULT_TENANT
    ) -> None:
        """As TraceStore's, every row stamped with one new ``build_id``: the views show each trace's
        newest build, so two builders replacing one trace at once never show it twice."""
        build = uuid.uuid4().hex
        stamped = {
            name: table.append_column(BUILD_COLUMN, pa.array([build] * table.num_rows, pa.string()))
            for name, table in tables.items()
        }
        with self._deletion_batch() if self._replacing_exclusively else contextlib.nullcontext():
            super().replace_trajectories(stamped, clear=clear, tenant=tenant)

    @contextmanager
    def replacing_exclusively(self) -> Iterator[None]:
        # DuckLake fails a deletion from a table another process inserted into meanwhile (see lake_write_gate): a
        # command's rebuild of many stored traces, beside receivers that keep building theirs, failed every time.
        # Its replacements hold the write gate exclusive, as retention's deletions do; a receiver's own builds
        # share it (one that loses a race is claimed again).
        self._replacing_exclusively = True
        try:
            yield
        finally:
            self._replacing_exclusively = False

    def _write_records(self, tables: Mapping[str, pa.Table]) -> None:
        append_record_rows(self._con, tables, self.stamp())  # PostgreSQL's clock: the newest write wins

    def job_queue(self) -> CatalogJobQueue:
        """The lake's online grading job queue (in its catalog database), shared by this store's workers."""
        self._require_open()
        with self._write_lock:
            if self._jobs is None:
                self._jobs = CatalogJobQueue(self._conninfo, self)
            return self._jobs

    def maintain(self, *, keep: timedelta, purge_deleted: bool = False) -> MaintenanceResult:
        """One maintenance pass over the lake (see ``lake_maintenance``), between this process's own commits,
        interrupted forgets finished first (``finish_forgets``); ``purge_deleted`` rewrites every data file that
        holds a deleted row. StoreLockedError at once while another process's pass runs on the lake; StoreError if
        PostgreSQL ended the session holding this pass's lock, or a step kept losing races with other commits."""
        self._require_open()
        if self.read_only:
            raise StoreError(f"lake {self.path} is open read-only; maintenance needs a read-write open")
        with maintenance_lock(self._conninfo, str(self.path)) as lock:
            finished = self.finish_forgets()
            with self._write_lock:
                result = maintain_lake(self._con, CATALOG_ALIAS, lock, keep=keep, purge_deleted=purge_deleted)
        return replace(result, forgets_finished=finished)

    def finish_forgets(self) -> Deleted:
        """Delete the rows the lake still holds of forgotten traces: what a forget that died between its two
        commits left (``_remember_forgotten``). Each tenant's such traces are forgotten again, by ``forget`` itself,
        so exactly its rows go (recorded runs that graded them are kept, as a forget without ``delete_runs`` keeps
        them: the one that died may have been asked either way). Nearly always one query finds none, and that is
        all this costs."""
        pending = self._run(unfinished_sql(CATALOG_ALIAS), None, check=False, arrow=True, use=False).to_arrow()
        finished = Deleted()
        tenants = pending.column("tenant").to_pylist()
        trace_ids = pending.column("trace_id").to_pylist()
        for tenant in dict.fromkeys(tenants):
            finished += self.forget([t for owner, t in zip(tenants, trace_ids) if owner == tenant], tenant)
        return finished

    def checkpoint(self) -> None:
        """Nothing to do: a lake commit is durable when it returns."""
        self._require_open()

    # ----------------------------------------------------------------- reads

    def _first_copies(
        self, table: str, columns: str, order: str, trace_ids: Sequence[str], tenant: str, *, arrow: bool
    ) -> list[QueryResult]:
        """The first copy of each record of ``tenant``'s traces in ``table`` (the rows its view shows), in chunks.

        Each chunk is found in two steps: the ``received_at`` range of the traces' rows (reading two
        columns), then the rows within that range, whose files DuckLake picks by the statistics in its
        catalog: a settled trace's records came in over the last seconds, so the second step reads a few
        recent files instead of every column of every file (several times less CPU; bench/RESULTS.md).
        Internal cursors name tables in full (no USE: each costs a catalog round trip).
        """
        raw = f"{CATALOG_ALIAS}.{RAW_SCHEMA}.{table}"
        key, first = FIRST_COPY[table]
        found = []
        ids = list(dict.fromkeys(trace_ids))
        for start in range(0, len(ids), _LOOKUP_CHUNK):
            id_list = ", ".join(map(sql_string, ids[start : start + _LOOKUP_CHUNK]))
            within = f"tenant = {sql_string(tenant)} AND trace_id IN ({id_list})"
            bounds = f"SELECT min(received_at), max(received_at) FROM {raw} WHERE {within}"
            low, high = self._run(bounds, None, check=False, use=False).rows[0]
            if low is None:
                continue
            sql = (
                f"SELECT {columns} FROM {raw} WHERE received_at BETWEEN {_timestamp(low)} AND {_timestamp(high)} "
                f"AND {within} QUALIFY row_number() OVER (PARTITION BY {key} ORDER BY {first}) = 1 ORDER BY {order}"
            )
            found.append(self._run(sql, None, check=False, arrow=arrow, use=False))
        return found

    def load_spans(self, trace_ids: Sequence[str], tenant: str = DEFAULT_TENANT) -> dict[str, list[SpanRecord]]:
        found: dict[str, list[SpanRecord]] = {}
        for result in self._first_copies("spans", SPAN_SELECT_COLUMNS, _SPAN_ORDER, trace_ids, tenant, arrow=False):
            for row in result.rows:
                found.setdefault(row[0], []).append(span_from_row(row))
        return found

    def load_logs(self, trace_ids: Sequence[str], tenant: str = DEFAULT_TENANT) -> dict[str, list[LogRecordData]]:
        found: dict[str, list[LogRecordData]] = {}
        for result in self._first_copies("logs", LOG_SELECT_COLUMNS, _LOG_ORDER, trace_ids, tenant, arrow=False):
            for row in result.rows:
                found.setdefault(row[0], []).append(log_from_row(row))
        return found

    def load_arrow(self, trace_ids: Sequence[str], tenant: str = DEFAULT_TENANT) -> tuple[pa.Table, pa.Table]:
        def fetch(table: str, columns: str, order: str) -> pa.Table:
            parts = [r.to_arrow() for r in self._first_copies(table, columns, order, trace_ids, tenant, arrow=True)]
            if parts:
                return pa.concat_tables(parts)
            empty = f"SELECT {columns} FROM {CATALOG_ALIAS}.{RAW_SCHEMA}.{table} LIMIT 0"
            return self._run(empty, None, check=False, arrow=True, use=False).to_arrow()

        return fetch("spans", SPAN_SELECT_COLUMNS, _SPAN_ORDER), fetch("logs", LOG_SELECT_COLUMNS, _LOG_ORDER)

    def __repr__(self) -> str:
        return f"LakeStore({self.path!r}, data_path={self.data_path!r}{', read_only=True' if self.read_only else ''})"


# DuckLake's words when the database holds no lake and the open may not create one (read-only, or told not to)
_NO_LAKE_YET = "creating a new DuckLake is explicitly disabled"


def _attach_problem(message: str) -> str:
    """What went wrong attaching a lake, from DuckLake's error, and what to do about it."""
    first_line = redacted(message.splitlines()[0])
    if _NO_LAKE_YET in message:  # a database without one, not to be made
        return (
            "its database holds no lake yet (only `tracegrade serve`, `import` or another writer creates one); check "
            "dbname, or start `tracegrade serve` on it with --lake-data first"
        )
    if "does not match existing data path" in message:
        return (
            f"{first_line} Give --lake-data the path the lake was created with (every node must see its files "
            "under one path), or leave it out of read-only commands"
        )
    return (
        f"{first_line} (is PostgreSQL reachable, does the database exist? A new lake is created by a read-write "
        "open with --lake-data)"
    )


def _writable_directory(path: Path, lake: str) -> list[Path]:
    """Make the data path ``path`` (and its missing parents) and check that files can be made in it; the
    directories made (innermost first). A StoreError names the path and the reason: DuckLake would otherwise
    fail only at the first commit, and a receiver would then refuse every export while it reopens the lake."""
    made = [p for p in (path, *path.parents) if not p.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
        # a file made and removed: the write access DuckLake's commits need (a read-only mount, a directory
        # the process may not write to; os.access would not tell for root)
        with tempfile.TemporaryFile(dir=path, prefix=".tracegrade-write-check-"):
            pass
    except OSError as exc:
        for directory in made:
            with contextlib.suppress(OSError):
                directory.rmdir()
        # name the parent that failed (not a directory, missing on a read-only mount), not the check's file
        where = f" at {exc.filename}" if exc.filename and Path(exc.filename) in path.parents else ""
        raise StoreError(
            f"cannot use {path} as the data path of lake {lake}: {exc.strerror or exc}{where}; give --lake-data "
            "(or TRACEGRADE_LAKE_DATA) a directory this process can create files in, the same one on every node"
        ) from None
    return made


def _timestamp(value: datetime) -> str:
    """A TIMESTAMP literal (a literal, not a parameter, so DuckLake prunes files by it when planning)."""
    return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
