"""TraceStore: one DuckDB file of spans, logs and trajectory tables (the only read-write opener).

Writes are one transaction each and durable (committed to DuckDB's WAL) when ``write`` returns; a span
sent twice is stored once (``span_keys`` finds the stored copies before each insert). Every row carries its
tenant (see ``tenancy``), and a trace is one tenant's: reads, rebuilds and keys are per tenant. Queries run
on their own cursor, so any thread may query while another writes.

``wal=False`` is for an owner that keeps its own log of what it writes (the receiver's request journal):
DuckDB then writes no WAL, a commit lives in memory until ``checkpoint`` writes it to the file, and a
crash loses what was committed since the last checkpoint (the owner replays it): each span is then written
once (to the file) rather than twice (the WAL, then the file). Read-write stores use small row groups
(``ROW_GROUP_SIZE``), which bounds what a checkpoint holds in memory.

Every ``received_at`` and ``updated_at`` comes from one clock that never repeats or goes back and is
read under the write lock, so "a span received after its trace's rows were built" (a stale trajectory)
is exact even when writes and rebuilds run on different threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from tracegrade.errors import QueryCancelled, StoreError
from tracegrade.models.span import LogRecordData, SpanRecord
from tracegrade.store.build_queue import BuildQueue, LocalBuildQueue
from tracegrade.store.database import (
    attach_duckdb,
    damage_error,
    duckdb_size_bytes,
    insert_arrow,
    open_duckdb,
    opening_errors,
    quote_identifier,
)
from tracegrade.store.duckdb_api import fetch_arrow, registered
from tracegrade.store.evaluations import evaluation_rows
from tracegrade.store.file_purge import remove_stale_copy
from tracegrade.store.grading_jobs import JobQueue, StoreJobQueue
from tracegrade.store.grading_tables import replace_record_rows
from tracegrade.store.key_repair import damaged_keys, repair_keys
from tracegrade.store.prepared import PreparedWrite, prepare_write
from tracegrade.store.query_control import QueryControl, value_bytes
from tracegrade.store.query_errors import query_error_text
from tracegrade.store.read_cursors import ReadCursors
from tracegrade.store.readonly import check_read_only, lock_down, refusal
from tracegrade.store.results import QueryResult, WriteResult
from tracegrade.store.retention import (
    EXPIRE_BATCH,
    TenantScope,
    expire_quiet_traces,
    expire_traceless_logs,
    expire_worker_runs,
    older_rows_sql,
)
from tracegrade.store.row_groups import RowGroupFill
from tracegrade.store.rows import (
    LOG_SELECT_COLUMNS,
    SPAN_SELECT_COLUMNS,
    log_from_row,
    span_from_row,
    sql_string,
    sql_string_list,
    utc_now,
)
from tracegrade.store.schema import check_schema, ensure_schema
from tracegrade.store.span_keys import stored_span_keys
from tracegrade.store.tenancy import DEFAULT_TENANT, TraceKey, with_tenant
from tracegrade.store.trace_deletion import (
    FORGOTTEN_TABLE,
    Deleted,
    add_forgotten,
    delete_traces,
    delete_whole_runs,
    delete_worker_cases,
    held_traces,
    recorded_runs_of,
    trace_keys,
)
from tracegrade.store.trajectories import TRAJECTORY_TABLES

__all__ = ["DEFAULT_CHECKPOINT_THRESHOLD", "BatchWrite", "TraceStore"]

# DuckDB's default (16 MB of WAL) checkpoints every few thousand 2 KB spans, and each checkpoint also
# rewrites the key indexes, so its cost grows with the store; a larger threshold checkpoints less often
# (bench/RESULTS.md, store writes). The price is a longer WAL replay when reopening after a crash (seconds).
DEFAULT_CHECKPOINT_THRESHOLD = "256MB"
# One DuckDB thread for a read-write store: the writer's statements are small, and on a small, busy
# machine a second DuckDB thread costs more in coordination than it gains (bench/RESULTS.md, store
# writes). Read-only opens keep DuckDB's default.
DEFAULT_WRITER_THREADS = 1
# Rows per row group of a read-write store (DuckDB's default is 122,880). A checkpoint rewrites the
# row groups that gained rows, whole, and 122,880 agent spans of 2 KB are some 300 MB, so a smaller group
# bounds what a checkpoint holds in memory (bench/RESULTS.md, store writes). The writer
# checkpoints when the spans table's last group is full (see row_groups), so this is also about how
# many spans a checkpoint writes.
ROW_GROUP_SIZE = 8_192
# Disk a query may fill with spilled intermediate results (DuckDB's default is 90% of the free space,
# which would leave the request journal, on the same disk, nothing to append to).
QUERY_SPILL_LIMIT = "2GiB"
_LOOKUP_CHUNK = 1000  # trace ids per IN list when loading spans
_FETCH_CHUNK = 256  # rows fetched at a time when a result's bytes are capped
# DuckDB 1.x runs a streamed query ahead of its reader until this buffer is full, counting a string as its
# 16-byte header: under the default (about 1 MB) some 30 chunks of 2,048 rows, whatever their values hold.
# With a capped result the query stays one chunk ahead, so the cap bounds what is built, not only what is kept.
_CAPPED_STREAM_BUFFER = "1KB"
_TICK = timedelta(microseconds=1)
_SPAN_ORDER = "trace_id, start_ns, span_id"
_LOG_ORDER = "trace_id, time_ns, log_key"
_RESERVED_ALIASES = {"memory", "system", "temp", "main"}
_REPLACED_IDS_VIEW = "_tracegrade_replaced_trace_ids"
_FORGOTTEN_SQL = f"SELECT tenant, trace_id FROM {FORGOTTEN_TABLE}"


@dataclass(slots=True)
class BatchWrite:
    """One committed transaction of several submissions: a WriteResult per submission, the traces whose
    root span (one without a parent) was among the spans inserted, the ``received_at`` stamped, and every
    trace the submissions hold records of (stored before or not: marked for a build, so a replay of
    records committed just before a crash still gets their traces built)."""

    results: list[WriteResult]
    rooted: set[TraceKey]
    received_at: datetime
    touched: set[TraceKey]


def _added_sizes(first: str, second: str | None) -> str:
    """Two DuckDB memory sizes added up, as bytes (``second`` may be None)."""
    if not second:
        return first
    return f"{duckdb_size_bytes(first) + duckdb_size_bytes(second)}B"


def _rows_of_traces_sql(table: str, columns: str, id_list: str, order: str, tenant: str) -> str:
    """SELECT the rows of ``table`` for ``tenant``'s traces in ``id_list`` (a SQL literal list).

    Fetching a row costs far more than finding it (each fetch decompresses the column segments it
    touches), so the query first finds the rowid range of the matching rows and reads within it only.
    A trace's records arrive close together, so the range is short for the recent traces a rebuild
    reads, several times faster than finding them by ``trace_id`` alone (bench/RESULTS.md, store writes).
    """
    of_traces = f"trace_id IN {id_list} AND tenant = {sql_string(tenant)}"
    return (
        f"WITH bounds AS (SELECT min(rowid) AS low, max(rowid) AS high FROM {table} WHERE {of_traces}) "
        f"SELECT {columns} FROM {table}, bounds WHERE {table}.rowid BETWEEN bounds.low AND bounds.high "
        f"AND {of_traces} ORDER BY {order}"
    )


def _touched_traces(submissions: Sequence[PreparedWrite]) -> set[TraceKey]:
    """Every trace the submissions' spans and log records carry (as their submission's tenant's)."""
    touched: set[TraceKey] = set()
    for submission in submissions:
        for table in (submission.spans, submission.logs):
            if table is not None:
                trace_ids = pc.unique(table.column("trace_id")).drop_null().to_pylist()
                touched.update((submission.tenant, trace_id) for trace_id in trace_ids)
    return touched


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class TraceStore:
    """The trace store on one DuckDB file. ``read_only=True`` opens it for reading only (no migration)."""

    # a tenant's views made inside its query's transaction (see tenant_views' ``relations``), or before it: on a lake,
    # each statement outside one is a transaction of its own, reading the lake's snapshot again
    _views_in_query_transaction = False

    def __init__(
        self,
        path: str | Path,
        *,
        read_only: bool = False,
        checkpoint_threshold: str = DEFAULT_CHECKPOINT_THRESHOLD,
        memory_limit: str | None = None,
        query_memory_limit: str | None = None,
        threads: int | None = None,
        wal: bool = True,
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self.memory_limit = memory_limit  # None: DuckDB's default (80% of the machine's memory)
        config: dict[str, Any] = {} if read_only else {"checkpoint_threshold": checkpoint_threshold}
        if memory_limit:
            # DuckDB has one buffer pool per database: queries get their budget on top of the writer's
            config["memory_limit"] = _added_sizes(memory_limit, query_memory_limit)
        config["max_temp_directory_size"] = QUERY_SPILL_LIMIT
        if threads or not read_only:
            config["threads"] = threads or DEFAULT_WRITER_THREADS
        self._use: str | None = None  # the USE statement every cursor runs first (attached stores)
        if read_only:
            self._con = open_duckdb(self.path, read_only=True, config=config)
            self.wal = True
        else:
            alias = self.path.stem if self.path.stem not in _RESERVED_ALIASES else "store"
            self._con, self.wal = attach_duckdb(self.path, alias, wal=wal, row_group_size=ROW_GROUP_SIZE, config=config)
            self._use = f"USE {quote_identifier(alias)}"
            remove_stale_copy(self.path)
        self.failure: str | None = None  # why DuckDB invalidated the database (it then refuses every write)
        self.uncheckpointed_bytes = 0  # Arrow bytes committed since the last checkpoint (``wal=False``)
        self.uncheckpointed_since: float | None = None  # monotonic time of the first of them
        # the spans table's last row group; what an earlier run left is never appended to (see row_groups)
        self.span_group = RowGroupFill(ROW_GROUP_SIZE)
        try:
            with opening_errors(self.path):  # a full disk fails the first checkpoint: a StoreError, retried
                (check_schema if read_only else ensure_schema)(self._con, self.path)
                if not read_only:
                    for table, why in damaged_keys(self._con).items():
                        repair_keys(self._con, table, why)
                if not self.wal:
                    self._con.execute("CHECKPOINT")  # a new or migrated schema is durable before any write
                lock_down(self._con, freeze=False)  # the file is attached: from now on no statement can open another
        except BaseException:
            self._con.close()
            raise
        self._reads = ReadCursors(self._con.cursor(), self._use, self._describe)
        self._write_lock = threading.RLock()
        self._last_stamp = datetime.min
        self._closed = False
        self._builds: BuildQueue = LocalBuildQueue(self.stamp, self.stale_trajectories)
        # the forgotten traces, in memory: this process is the file's only writer, so it knows every one, and a
        # write looks its traces up here rather than in a query of its own
        self._forgotten_keys: set[TraceKey] = (
            set() if read_only else {(t, tr) for t, tr in self._run(_FORGOTTEN_SQL, None, check=False).rows}
        )
        self.holds_forgotten = bool(self._forgotten_keys)  # whether a write must look its traces up at all

    commit_seconds = 0.0  # a commit costs little more than its rows: a writer commits what is queued at once
    # the stored-key look-up is the file's only guard against a span stored twice, so fresh spans get it too
    looks_up_fresh_spans = True
    # traces mapped and replaced per build: the rows of a few hundred agent traces stay well inside the
    # store's memory limit (1,000 ran a 128 MB store out of memory on 10-span agent traces)
    rebuild_traces = 250

    @property
    def builds(self) -> BuildQueue:
        """The traces waiting for a trajectory build (in memory: this process is the file's only writer)."""
        return self._builds

    def mark_failed(self, reason: str) -> None:
        """Refuse writes from now on (the owner reopens the store); the first reason is kept."""
        if self.failure is None:
            self.failure = reason

    def __enter__(self) -> TraceStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---------------------------------------------------------------- writes

    def write(
        self, spans: Sequence[SpanRecord], logs: Sequence[LogRecordData] = (), tenant: str = DEFAULT_TENANT
    ) -> WriteResult:
        """Store ``tenant``'s spans and log records in one transaction, committed before returning."""
        return self.write_batch([prepare_write(spans, logs, tenant)]).results[0]

    def write_batch(self, submissions: Sequence[PreparedWrite]) -> BatchWrite:
        """Store several prepared submissions in ONE transaction (one commit); a WriteResult each.

        All submissions go into one INSERT per table; a record repeated across submissions is stored
        from (and counted for) the first submission that holds it, a later one counts it a duplicate.
        """
        results = [WriteResult() for _ in submissions]
        with self._transaction("writing spans"):
            submissions = self._without_forgotten(submissions, results)
            received_at = self._stamp()
            rooted = self._insert_spans(submissions, results, received_at)
            self._insert_logs(submissions, results, received_at)
            self.uncheckpointed_bytes += sum(t.nbytes for s in submissions for t in (s.spans, s.logs) if t is not None)
        self.span_group.appended(sum(result.spans_inserted for result in results))
        for result, sent in zip(results, submissions):
            result.spans_duplicate = sent.spans_sent - result.spans_inserted - result.spans_forgotten
            result.logs_duplicate = sent.logs_sent - result.logs_inserted - result.logs_forgotten
        written = BatchWrite(results, rooted, received_at, _touched_traces(submissions))
        try:
            self.builds.mark(sorted(written.touched), rooted)
        except StoreError as exc:  # committed, yet no build would follow: reopening replays and marks again
            self.mark_failed(f"the traces of a commit could not be marked for their build: {exc}")
            raise
        return written

    def _without_forgotten(
        self, submissions: Sequence[PreparedWrite], results: list[WriteResult]
    ) -> Sequence[PreparedWrite]:
        """The submissions without the records of forgotten traces, counted in ``results`` (in the write's
        transaction, so a trace forgotten before it commits is never stored again)."""
        if not self.holds_forgotten:
            return submissions
        traces = {
            (submission.tenant, trace_id)
            for submission in submissions
            for table in (submission.spans, submission.logs)
            if table is not None
            for trace_id in pc.unique(table.column("trace_id")).to_pylist()
            if trace_id is not None  # a log record of no trace
        }
        forgotten = self._forgotten_among(traces)
        if not forgotten:
            return submissions
        kept = []
        for submission, result in zip(submissions, results):
            spans, result.spans_forgotten = _without_traces(submission.spans, forgotten)
            logs, result.logs_forgotten = _without_traces(submission.logs, forgotten)
            kept.append(replace(submission, spans=spans, logs=logs))
        return kept

    def _insert_spans(
        self, submissions: Sequence[PreparedWrite], results: list[WriteResult], received_at: datetime
    ) -> set[TraceKey]:
        """Insert the first copy of each (tenant, trace_id, span_id) not stored yet, crediting the
        submission that holds it; the traces whose root span was inserted.

        Arrow does the per-row work; Python loops over rows only when a batch holds a span twice or
        one already stored (exporter retries, replays). A batch of fresh submissions only (see
        ``PreparedWrite``) is not looked up in a store that does not ``looks_up_fresh_spans``.
        """
        owned = [(s.spans, r) for s, r in zip(submissions, results) if s.spans is not None]
        if not owned:
            return set()
        batch = pa.concat_tables([table for table, _ in owned])
        keys = pc.binary_join_element_wise(
            batch.column("tenant"), batch.column("trace_id"), batch.column("span_id"), "/"
        )
        looked_up = self.looks_up_fresh_spans or not all(s.fresh for s in submissions)
        stored = stored_span_keys(self._con, batch) if looked_up else set()
        if stored or pc.count_distinct(keys).as_py() < batch.num_rows:
            batch, owned = self._first_new_copies(batch, keys, owned, stored)
        batch = batch.append_column("received_at", pa.array([received_at] * batch.num_rows, pa.timestamp("us")))
        insert_arrow(self._con, "spans", batch)
        for table, result in owned:
            result.spans_inserted += table.num_rows
            result.trace_ids.update(pc.unique(table.column("trace_id")).to_pylist())
        roots = batch.select(["tenant", "trace_id"]).filter(pc.is_null(batch.column("parent_span_id")))
        return set(zip(roots.column("tenant").to_pylist(), roots.column("trace_id").to_pylist()))

    @staticmethod
    def _first_new_copies(
        batch: pa.Table,
        keys: pa.ChunkedArray,
        owned: list[tuple[pa.Table, WriteResult]],
        stored: set[tuple[str, str, str]],
    ) -> tuple[pa.Table, list[tuple[pa.Table, WriteResult]]]:
        """The rows of ``batch`` to insert (the first copy of each span not in ``stored``), and for
        each submission the part of them it is credited with."""
        seen = {"/".join(key) for key in stored}
        key_list = keys.to_pylist()
        keep: list[int] = []
        credited: list[tuple[pa.Table, WriteResult]] = []
        first_row = 0
        for table, result in owned:
            mine = 0
            for row in range(first_row, first_row + table.num_rows):
                key = key_list[row]
                if key not in seen:
                    seen.add(key)
                    keep.append(row)
                    mine += 1
            credited.append((batch.take(pa.array(keep[len(keep) - mine :], pa.int64())), result))
            first_row += table.num_rows
        return batch.take(pa.array(keep, pa.int64())), credited

    def _insert_logs(
        self, submissions: Sequence[PreparedWrite], results: list[WriteResult], received_at: datetime
    ) -> None:
        """Insert log records not stored yet (by tenant and content key), crediting the first submission of each."""
        tables = [s.logs for s in submissions if s.logs is not None]
        if not tables:
            return
        batch = pa.concat_tables(tables)
        owners = [r for s, r in zip(submissions, results) if s.logs is not None for _ in range(s.logs.num_rows)]
        first: dict[tuple[str, str], int] = {}
        for index, key in enumerate(zip(batch.column("tenant").to_pylist(), batch.column("log_key").to_pylist())):
            first.setdefault(key, index)
        if len(first) < batch.num_rows:
            batch = batch.take(pa.array(list(first.values())))
        batch = batch.append_column("received_at", pa.array([received_at] * batch.num_rows, pa.timestamp("us")))
        inserted = set(insert_arrow(self._con, "logs", batch, skip_existing_returning="tenant, log_key"))
        evaluations = evaluation_rows(batch)
        if evaluations is not None:
            keys = zip(evaluations["tenant"].to_pylist(), evaluations["log_key"].to_pylist())
            insert_arrow(self._con, "evaluations", evaluations.filter(pa.array([k in inserted for k in keys])))
        trace_ids = batch.column("trace_id").to_pylist()
        for (key, index), trace_id in zip(first.items(), trace_ids):
            if key in inserted:
                owners[index].logs_inserted += 1
                if trace_id:
                    owners[index].trace_ids.add(trace_id)

    def execute_write(self, sql: str, params: Sequence[Any] | None = None) -> int:
        """Run one writing statement (grading-result tables) in its own transaction, durable on return
        (with ``wal=False`` a statement that changed rows, or DDL, is checkpointed at once); the rows it changed
        (DuckDB's count of an INSERT, UPDATE or DELETE; 0 for DDL)."""
        with self._transaction("executing a write"):
            outcome = self._con.execute(sql, params).fetchall()
        if not self.wal and outcome != [(0,)]:
            self.checkpoint()
        return int(outcome[0][0]) if outcome and outcome[0] and isinstance(outcome[0][0], int) else 0

    def write_records(self, tables: Mapping[str, pa.Table]) -> None:
        """Record grading rows (Arrow tables by table name, columns matched by name) in one transaction,
        durable on return like ``execute_write``: each row replaces the row with its key, and a case's
        ``eval_results`` rows replace all its earlier ones (see ``grading_tables``). One statement per
        table, since binding Python values one by one is slow."""
        if not any(rows.num_rows for rows in tables.values()):
            return
        with self._transaction("recording grading results"):
            self._write_records(tables)
        if not self.wal:
            self.checkpoint()

    def _write_records(self, tables: Mapping[str, pa.Table]) -> None:
        replace_record_rows(self._con, tables)

    def job_queue(self) -> JobQueue:
        """The online grading job queue: this file's ``grading_jobs`` table."""
        return StoreJobQueue(self)

    def _stamp(self) -> datetime:
        """The current UTC time, strictly later than every stamp before (call under the write lock)."""
        self._last_stamp = max(utc_now(), self._last_stamp + _TICK)
        return self._last_stamp

    def stamp(self) -> datetime:
        """A ``updated_at`` for rows mapped from what is committed now: every write committed before
        has an earlier ``received_at``, every later one a later ``received_at``."""
        with self._write_lock:
            return self._stamp()

    @contextmanager
    def _transaction(self, doing: str) -> Iterator[None]:
        """BEGIN … COMMIT under the write lock; ROLLBACK on any error (DuckDB errors become StoreError)."""
        self._require_open()
        if self.read_only:
            raise StoreError(f"store {self.path} is open read-only; {doing} needs a read-write TraceStore")
        with self._write_lock:
            self._refuse_if_failed()
            self._con.execute("BEGIN TRANSACTION")
            try:
                yield
                self._con.execute("COMMIT")
                if self.uncheckpointed_since is None:
                    self.uncheckpointed_since = time.monotonic()
            except BaseException as exc:
                try:
                    self._con.execute("ROLLBACK")
                except duckdb.Error:
                    pass  # DuckDB already aborted the transaction
                if isinstance(exc, duckdb.Error):
                    raise self._failed(f"{doing} in store {self.path}", exc) from exc
                raise

    def _refuse_if_failed(self) -> None:
        # DuckDB 1.5 can abort the whole process when an invalidated database is used again
        if self.failure is not None:
            raise StoreError(f"store {self.path} failed and must be reopened: {self.failure}")

    def _failed(self, doing: str, exc: duckdb.Error) -> StoreError:
        """The StoreError for a DuckDB error while ``doing``, remembering one that invalidated the
        database: nothing can be written until it is reopened (a failed checkpoint does this, for
        instance when the memory limit is too small)."""
        if self.failure is None and "invalidated" in str(exc):
            self.failure = str(exc).splitlines()[0]
        if isinstance(exc, duckdb.OutOfMemoryException):
            limit = f"its limit of {self.memory_limit}" if self.memory_limit else "DuckDB's default limit"
            return StoreError(
                f"{doing} failed: DuckDB ran out of memory ({str(exc).splitlines()[0]}). Give the store more "
                f"than {limit}: tracegrade serve --store-memory-limit, or TRACEGRADE_STORE_MEMORY_LIMIT"
            )
        return damage_error(self.path, exc) or StoreError(f"{doing} failed: {exc}")

    # --------------------------------------------------------------- retention

    def expire(self, cutoff: datetime, *, batch: int = EXPIRE_BATCH, scope: TenantScope = TenantScope()) -> Deleted:
        """Delete every trace of ``scope`` (every tenant's, by default) quiet since before ``cutoff`` (naive UTC;
        see ``retention``), the log records of no trace received before it, the online worker's runs last
        recorded before it, and the grading jobs of traces gone; durable on return.

        Each ``batch`` of traces is its own transaction, so the writer commits between them; a batch that fails
        raises StoreError, and what earlier batches deleted stays deleted (the next call goes on from there).
        """
        expired = Deleted()
        # most passes find nothing old enough: a read says so without holding up the writers (a lake's gate)
        if self._run(older_rows_sql(scope), [cutoff, *scope.bound], check=False).rows[0][0]:
            after: TraceKey | None = None
            while True:
                with self._deletion_batch(), self._transaction("expiring traces"):
                    step, after = expire_quiet_traces(self._con, cutoff, after, batch, scope)
                expired += step
                if after is None:
                    break
            with self._deletion_batch(), self._transaction("expiring log records of no trace, and online grading runs"):
                expired += expire_traceless_logs(self._con, cutoff, scope) + expire_worker_runs(
                    self._con, cutoff, scope
                )
        expired += Deleted(jobs=self.job_queue().forget(cutoff))
        if not self.wal and expired != Deleted():
            self.checkpoint()
        return expired

    @contextmanager
    def _deletion_batch(self) -> Iterator[None]:
        """Held around each transaction that deletes traces: nothing to do for a file, whose writers share one
        write lock."""
        yield

    def forget(self, trace_ids: Sequence[str], tenant: str = DEFAULT_TENANT, *, delete_runs: bool = False) -> Deleted:
        """Delete every row of ``tenant``'s traces ``trace_ids`` (spans, log records, evaluation events,
        trajectory rows, grading jobs, the cases online workers graded of them) and keep them forgotten:
        records of theirs written later (a retry, a journal replay, another receiver of a lake) are dropped
        (``trace_deletion``). Durable on return.

        Runs people recorded (grade, CI, live) that graded one of the traces hold a copy of what it said: with
        ``delete_runs`` they are deleted whole, else they are kept and the answer names them (``runs_kept``).
        ``traces`` in the answer counts the traces the store held anything of."""
        keys = trace_keys(tenant, list(trace_ids))
        # the write lock across the transaction and what follows its commit: no write of this process commits
        # in between, before the traces are known forgotten here (``_forgotten_committed``)
        with self._deletion_batch(), self._write_lock:
            with self._transaction("forgetting traces"):
                # in the deletions' transaction: a crash (or a failed deletion) leaves the traces neither
                # forgotten nor deleted, never forgotten with their rows still stored
                self._remember_forgotten(keys)
                held = held_traces(self._con, keys)
                runs = recorded_runs_of(self._con, keys)
                deleted = replace(
                    delete_traces(self._con, keys), traces=held, worker_cases=delete_worker_cases(self._con, keys)
                )
                if delete_runs:
                    deleted = replace(deleted, recorded_runs=delete_whole_runs(self._con, runs))
                else:
                    deleted = replace(deleted, runs_kept=tuple(runs.column("run_id").to_pylist()))
            self._forgotten_committed(keys)
        # the trajectories are gone, so their jobs are orphans now (jobs added later find no trajectory either);
        # only this tenant's: another's orphans are not its business, nor their number
        deleted += Deleted(jobs=self.job_queue().forget(utc_now(), tenant))
        if not self.wal:
            self.checkpoint()
        return deleted

    def _remember_forgotten(self, keys: pa.Table) -> None:
        """Add ``keys`` to ``forgotten_traces``, in the caller's transaction (``forget``'s)."""
        add_forgotten(self._con, keys, self._stamp())

    def _forgotten_committed(self, keys: pa.Table) -> None:
        """Called once the transaction that added ``keys`` to the forgotten traces committed, under the write lock:
        from now on the writes of this process (the file's only writer) drop their records."""
        self._forgotten_keys.update(_distinct_traces(keys))
        self.holds_forgotten = True

    def _forgotten_among(self, traces: set[TraceKey]) -> set[TraceKey]:
        """Those of ``traces`` that were forgotten (called in the write's transaction)."""
        return traces & self._forgotten_keys

    # ------------------------------------------------------------ trajectories

    def rebuild_trajectories(self, trace_ids: Iterable[str], tenant: str = DEFAULT_TENANT) -> int:
        """Re-map those traces of ``tenant`` into traces/node_visits/tool_calls/llm_calls now, in the
        rebuilder's chunks; returns how many had spans. A trace id with no stored spans loses any trajectory
        rows it had."""
        from tracegrade.store.rebuilder import rebuild_traces

        return rebuild_traces(self, [(tenant, trace_id) for trace_id in trace_ids])

    def replace_trajectories(
        self, tables: dict[str, pa.Table], *, clear: Sequence[str], tenant: str = DEFAULT_TENANT
    ) -> None:
        """In one transaction, delete ``tenant``'s trajectory rows of ``clear`` and insert ``tables`` (Arrow
        tables by trajectory table name, as ``TrajectoryRows.to_arrow`` makes them) as ``tenant``'s.

        ``clear`` must hold every trace of ``tables`` that may already have rows (and any trace whose
        rows must go); leaving out traces known to have none saves work.
        """
        tables = {name: with_tenant(table, tenant) for name, table in tables.items()}
        # Only traces with a ``traces`` row have rows elsewhere (a rebuild writes them together), and most
        # traces being mapped are new: deleting by every id would run four DELETEs that find nothing
        # (several milliseconds each for a rebuild's ids). One join with ``traces`` finds the few that need them.
        # It runs before the transaction: only rebuilds write these tables, one at a time, so nothing
        # adds rows in between.
        with_rows = self._traces_with_rows(clear, tenant)
        try:
            with self._transaction("rebuilding trajectories"):
                _replace_trajectory_rows(self._con, tenant, with_rows, self._without_forgotten_rows(tables))
        except StoreError as exc:
            if "Duplicate key" not in str(exc) or self.failure is not None:
                raise
            # the rows were deleted, yet the key index still knows them: it is damaged
            with self._write_lock:
                repair_keys(self._con, "traces", f"a rebuild was refused: {str(exc).splitlines()[0]}")
            with self._transaction("rebuilding trajectories"):
                with_rows = self._traces_with_rows(clear, tenant)
                _replace_trajectory_rows(self._con, tenant, with_rows, self._without_forgotten_rows(tables))
        self.uncheckpointed_bytes += sum(table.nbytes for table in tables.values())

    def replacing_exclusively(self) -> AbstractContextManager[None]:
        """Held by a command that rebuilds trajectories beside running receivers: nothing on a file, whose one
        writer is this process (a lake's replacements then hold its write gate: see ``LakeStore``)."""
        return nullcontext()

    def _without_forgotten_rows(self, tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
        """Trajectory rows without those of forgotten traces (in the rebuild's transaction: a trace forgotten
        while its spans were being mapped gets no rows)."""
        if not self.holds_forgotten or "traces" not in tables:
            return tables
        forgotten = self._forgotten_among(_distinct_traces(tables["traces"]))
        if not forgotten:
            return tables
        kept = {name: _without_traces(table, forgotten)[0] for name, table in tables.items()}
        return {name: table for name, table in kept.items() if table is not None}

    def _traces_with_rows(self, trace_ids: Sequence[str], tenant: str) -> list[str]:
        """Those of ``tenant``'s ``trace_ids`` that have trajectory rows."""
        if not trace_ids:
            return []
        cursor = self._cursor()
        try:
            cursor.register("_tracegrade_candidates", pa.table({"trace_id": pa.array(list(trace_ids), pa.string())}))
            sql = "SELECT t.trace_id FROM traces t JOIN _tracegrade_candidates USING (trace_id) WHERE t.tenant = ?"
            return [row[0] for row in cursor.execute(sql, [tenant]).fetchall()]
        except duckdb.Error as exc:
            raise StoreError(f"looking up trajectories in store {self.path} failed: {exc}") from None
        finally:
            self._reads.end(cursor)

    def stale_trajectories(self, limit: int | None = None, *, tenant: str | None = None) -> list[TraceKey]:
        """Traces whose trajectory rows are missing or older than their newest span or log record, the
        longest-waiting first (at most ``limit`` of them; ``tenant``'s only, when given).

        After a crash these are the rebuilds that were still pending; the writer rebuilds them on start,
        and asks again whenever it had more pending rebuilds than it keeps track of.
        """
        spans_of = "" if tenant is None else " WHERE tenant = ?"
        logs_of = "" if tenant is None else " AND tenant = ?"
        sql = f"""
            WITH received AS (
                SELECT tenant, trace_id, max(received_at) AS last_received FROM spans{spans_of}
                GROUP BY tenant, trace_id
                UNION ALL
                SELECT tenant, trace_id, max(received_at) FROM logs WHERE trace_id IS NOT NULL{logs_of}
                GROUP BY tenant, trace_id
            )
            SELECT r.tenant, r.trace_id FROM received r LEFT JOIN traces t USING (tenant, trace_id)
            GROUP BY r.tenant, r.trace_id, t.updated_at
            HAVING t.updated_at IS NULL OR max(r.last_received) > t.updated_at
            ORDER BY max(r.last_received), r.tenant, r.trace_id
        """
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        params = None if tenant is None else [tenant, tenant]  # the spans' and the logs' condition
        return [(row[0], row[1]) for row in self._run(sql, params, check=False).rows]

    # ----------------------------------------------------------------- reads

    def load_spans(self, trace_ids: Sequence[str], tenant: str = DEFAULT_TENANT) -> dict[str, list[SpanRecord]]:
        """The stored spans of ``tenant``'s traces (by trace id, each list ordered by start time)."""
        found: dict[str, list[SpanRecord]] = {}
        for chunk in _chunks(list(dict.fromkeys(trace_ids)), _LOOKUP_CHUNK):
            sql = _rows_of_traces_sql("spans", SPAN_SELECT_COLUMNS, sql_string_list(chunk), _SPAN_ORDER, tenant)
            for row in self._run(sql, None, check=False).rows:
                found.setdefault(row[0], []).append(span_from_row(row))
        return found

    def load_arrow(self, trace_ids: Sequence[str], tenant: str = DEFAULT_TENANT) -> tuple[pa.Table, pa.Table]:
        """The stored spans and log records of ``tenant``'s traces as Arrow tables (``SPAN_SELECT_COLUMNS``
        and ``LOG_SELECT_COLUMNS``, in the order ``load_spans`` and ``load_logs`` give), no Python rows."""
        id_list = sql_string_list(dict.fromkeys(trace_ids))
        spans = self._run(
            _rows_of_traces_sql("spans", SPAN_SELECT_COLUMNS, id_list, _SPAN_ORDER, tenant),
            None,
            check=False,
            arrow=True,
        ).to_arrow()
        logs = self._run(
            _rows_of_traces_sql("logs", LOG_SELECT_COLUMNS, id_list, _LOG_ORDER, tenant), None, check=False, arrow=True
        ).to_arrow()
        return spans, logs

    def load_logs(self, trace_ids: Sequence[str], tenant: str = DEFAULT_TENANT) -> dict[str, list[LogRecordData]]:
        """The stored log records of ``tenant``'s traces (by trace id, ordered by time)."""
        found: dict[str, list[LogRecordData]] = {}
        for chunk in _chunks(list(dict.fromkeys(trace_ids)), _LOOKUP_CHUNK):
            sql = _rows_of_traces_sql("logs", LOG_SELECT_COLUMNS, sql_string_list(chunk), _LOG_ORDER, tenant)
            for row in self._run(sql, None, check=False).rows:
                found.setdefault(row[0], []).append(log_from_row(row))
        return found

    def query(
        self,
        sql: str,
        params: Sequence[Any] | None = None,
        *,
        control: QueryControl | None = None,
        tenant: str | None = None,
    ) -> QueryResult:
        """Run one read-only statement on a fresh cursor. A statement that is not one SELECT, or reaches
        outside the store, raises QueryRefused; one stopped through ``control`` raises QueryCancelled, and
        ``control.max_rows`` caps the rows fetched (see ``QueryResult.truncated``). With ``tenant`` the
        statement sees that tenant's rows only (see ``tenant_views``), else every tenant's."""
        return self._run(sql, params, check=True, control=control, tenant=tenant)

    def query_arrow(
        self,
        sql: str,
        params: Sequence[Any] | None = None,
        *,
        control: QueryControl | None = None,
        tenant: str | None = None,
    ) -> pa.Table:
        """Like ``query`` but returns DuckDB's result as an Arrow table (exports, parquet output)."""
        return self._run(sql, params, check=True, arrow=True, control=control, tenant=tenant).to_arrow()

    def _run(
        self,
        sql: str,
        params: Sequence[Any] | None,
        *,
        check: bool,
        arrow: bool = False,
        control: QueryControl | None = None,
        use: bool = True,
        tenant: str | None = None,
    ) -> QueryResult:
        """``use=False``: on a cursor where the store's tables must be named in full (no USE statement).
        ``tenant``: the statement sees that tenant's rows only (see ``tenant_views``)."""
        tables = check_read_only(sql, scoped=tenant is not None) if check else frozenset[str]()
        self._require_open()
        cursor = self._cursor(use=use)
        if control is not None and not control.attach(cursor):
            self._reads.end(cursor)
            raise QueryCancelled(f"the query was cancelled before it started: {control.reason}")
        try:
            if tenant is not None and not self._views_in_query_transaction:
                self._scope_views(cursor, tenant, tables)
            cursor.begin()  # rolled back below: a query can never change stored data
            if tenant is not None and self._views_in_query_transaction:
                self._scope_views(cursor, tenant, tables)
            capped = control is not None and (control.max_rows is not None or control.max_bytes is not None)
            if capped and not arrow:
                cursor.execute(f"SET streaming_buffer_size = '{_CAPPED_STREAM_BUFFER}'")
            if arrow:
                table = fetch_arrow(cursor, sql, list(params) if params is not None else None)
                return QueryResult(table.column_names, [], arrow=table)
            cursor.execute(sql, list(params) if params is not None else None)
            columns = [d[0] for d in cursor.description or []]
            types = [str(d[1]) for d in cursor.description or []]
            max_rows = control.max_rows if control is not None else None
            max_bytes = control.max_bytes if control is not None else None
            if max_bytes is not None:
                return _fetch_within_bytes(cursor, columns, types, max_rows, max_bytes)
            if max_rows is None:
                return QueryResult(columns, cursor.fetchall(), types)
            # one row past the cap tells a cut result from one that fits; DuckDB never produces the rest
            rows = cursor.fetchmany(max_rows + 1)
            return QueryResult(columns, rows[:max_rows], types, truncated=len(rows) > max_rows, max_rows=max_rows)
        except duckdb.InterruptException:
            reason = control.reason if control is not None and control.reason else "it was interrupted"
            raise QueryCancelled(f"the query was cancelled: {reason}") from None
        except duckdb.PermissionException as exc:
            raise refusal(exc) from None
        except duckdb.OutOfMemoryException as exc:
            raise StoreError(
                f"the query needs more memory than the store gives queries ({str(exc).splitlines()[0]}); "
                "narrow it (filter, LIMIT, fewer columns) or raise --query-memory-limit"
            ) from None
        except duckdb.Error as exc:
            raise damage_error(self.path, exc) or StoreError(f"query failed: {query_error_text(exc)}") from None
        finally:
            if control is not None:
                control.detach()
            self._reads.end(cursor)  # rolls back the open transaction

    def _scope_views(self, cursor: duckdb.DuckDBPyConnection, tenant: str, names: frozenset[str]) -> None:
        """Give ``cursor`` ``tenant``'s views of the tables ``names`` (see ``tenant_views``), before the query's
        transaction (``_views_in_query_transaction``)."""
        tenant_views(cursor, tenant, names)

    def _cursor(self, *, use: bool = True) -> duckdb.DuckDBPyConnection:
        """A new cursor on the store's database, to be ended with ``self._reads.end`` (cursors of an attached
        store start elsewhere; ``use=False`` leaves them there)."""
        self._refuse_if_failed()
        return self._reads.open(use=use)

    def _describe(self) -> str:
        return f"store {self.path}"

    # ------------------------------------------------------------- lifecycle

    def checkpoint(self) -> None:
        """Write everything committed into the database file; with ``wal=False`` this is what makes
        commits durable. Waits for running queries rather than aborting them."""
        with self._write_lock:
            self._require_open()
            self._refuse_if_failed()
            try:
                self._con.execute("FORCE CHECKPOINT")
            except duckdb.Error as exc:
                raise self._failed(f"checkpointing store {self.path}", exc) from exc
            self.uncheckpointed_bytes = 0
            self.uncheckpointed_since = None
            self.span_group.checkpointed()

    def _require_open(self) -> None:
        if self._closed:
            raise StoreError(f"store {self.path} is closed")

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the file (DuckDB checkpoints the WAL into the database file on close). Reads still running are
        interrupted, and the file is closed once they ended (see ``read_cursors``)."""
        with self._write_lock:
            if self._closed:
                return
            self._closed = True
            self._reads.close()
            self._con.close()


def _fetch_within_bytes(
    cursor: duckdb.DuckDBPyConnection, columns: list[str], types: list[str], max_rows: int | None, max_bytes: int
) -> QueryResult:
    """The rows of ``cursor`` up to ``max_rows``, stopping before the row that would take them past ``max_bytes``
    (``value_bytes``): a few huge values (10 MB each) would otherwise hold the process's memory.
    Rows are fetched a few at a time, and the query runs at most one DuckDB chunk ahead of them."""
    rows: list[tuple[Any, ...]] = []
    held = 0
    while True:
        room = _FETCH_CHUNK if max_rows is None else min(_FETCH_CHUNK, max_rows + 1 - len(rows))
        chunk = cursor.fetchmany(room)
        if not chunk:
            return QueryResult(columns, rows, types, max_rows=max_rows)
        for row in chunk:
            if max_rows is not None and len(rows) == max_rows:
                return QueryResult(columns, rows, types, truncated=True, max_rows=max_rows)
            held += sum(value_bytes(value) for value in row)
            if held > max_bytes:
                return QueryResult(columns, rows, types, truncated=True, max_rows=max_rows, max_bytes=max_bytes)
            rows.append(row)


def tenant_views(
    cursor: duckdb.DuckDBPyConnection,
    tenant: str,
    names: frozenset[str],
    columns: Callable[[duckdb.DuckDBPyConnection, str], list[str]] | None = None,
    *,
    guard: bool = False,
    empty: frozenset[str] = frozenset(),
    relations: Callable[[str, str], frozenset[str]] | None = None,
) -> None:
    """Give each table or view of the cursor's schema that the query names (``names``, lower-case) a TEMP
    view of the same name holding ``tenant``'s rows only (a table without a ``tenant`` column shows none),
    so the query reaches the tenant's rows and nothing else: temporary objects come first in DuckDB's
    search path, and ``check_read_only(scoped=True)`` refuses the qualified names that could reach past
    them (a query reads rows only through the tables it names). The views belong to this cursor alone.

    ``columns`` (given: what lists a source's column names): a table without a tenant column is known from its list,
    not from a statement that fails. ``guard`` (with ``columns``): each column of the view is also NULL on any row not
    the tenant's. DuckDB moves a query's filter on a column into the scan, and DuckDB 1.5's Parquet reader (a lake's)
    sometimes runs it there before the tenant's condition, on every row: a failing cast then quoted another tenant's
    value (``span_id::UUID``, a JSON column cast to a number). A filter on a guarded column reads two columns, so it
    stays above the scan, and wherever it runs it only ever sees the tenant's values.

    ``empty``: names known to hold no row in the cursor's transaction, whose views plan no scan at all (a lake plans
    each column of a scan through its catalog, and on a table never written to, a catalog round trip each time).

    ``relations`` (given: what lists the names of a database's schema's tables and views, with ``columns``): the
    views are made without a statement that may fail, as inside the query's transaction, which a failed one would
    abort on DuckDB 2. Otherwise (outside any transaction) a name found in no table is let through."""
    if guard and columns is None:
        raise AssertionError("a tenant's guarded views need their sources' columns")
    if not names:
        return
    database, schema = cursor.execute("SELECT current_database(), current_schema()").fetchone()  # type: ignore[misc]
    owned = f"tenant = {sql_string(tenant)}"
    existing = relations(database, schema) if relations is not None and columns is not None else None
    for name in sorted(names):
        view = quote_identifier(name)
        source = ".".join(quote_identifier(part) for part in (database, schema, name))
        if existing is not None:
            if name in existing:  # else not a table of the store: a CTE's name (or an unknown one, failing to bind)
                cursor.execute(
                    f"CREATE TEMP VIEW {view} AS {_rows_of(cursor, source, owned, columns, guard, name in empty)}"
                )
            continue
        try:
            cursor.execute(
                f"CREATE TEMP VIEW {view} AS {_rows_of(cursor, source, owned, columns, guard, name in empty)}"
            )
        except duckdb.CatalogException:
            if _exists(cursor, source):  # the view could not be made for another reason: run nothing
                raise
            continue  # not a table of the store: a CTE's name (or an unknown one, which fails to bind)
        except duckdb.BinderException:  # a table without a tenant column: none of its rows is a tenant's
            cursor.execute(f"CREATE TEMP VIEW {view} AS SELECT * FROM {source} WHERE false")


def _rows_of(
    cursor: duckdb.DuckDBPyConnection,
    source: str,
    owned: str,
    columns_of: Callable[[duckdb.DuckDBPyConnection, str], list[str]] | None,
    guard: bool,
    empty: bool,
) -> str:
    """The query of a tenant's view of ``source`` (see ``tenant_views``). Without ``columns_of``, a source without a
    tenant column fails to bind it."""
    if empty:
        return f"SELECT * FROM {source} WHERE false"  # DuckDB drops the scan before planning it
    columns = columns_of(cursor, source) if columns_of is not None else None
    if columns is not None and "tenant" not in columns:
        return f"SELECT * FROM {source} WHERE false"
    selected = _owned_columns(columns, owned) if guard and columns is not None else "*"
    return f"SELECT {selected} FROM {source} WHERE {owned}"


def view_column_names(cursor: duckdb.DuckDBPyConnection, source: str) -> list[str]:
    """The column names of ``source`` (a table or view, named in full), in their order."""
    return [column[0] for column in cursor.execute(f"SELECT * FROM {source} LIMIT 0").description or []]


def _owned_columns(columns: list[str], owned: str) -> str:
    """The select list of ``columns``, each NULL where ``owned`` is not true (in their order, by name)."""
    names = [quote_identifier(column) for column in columns]
    return ", ".join(f"CASE WHEN {owned} THEN {name} END AS {name}" for name in names)


def _exists(cursor: duckdb.DuckDBPyConnection, source: str) -> bool:
    try:
        cursor.execute(f"SELECT 1 FROM {source} LIMIT 0")
    except duckdb.CatalogException:
        return False
    return True


def _distinct_traces(table: pa.Table) -> set[TraceKey]:
    """The (tenant, trace_id) pairs of ``table``'s rows."""
    pairs = table.group_by(["tenant", "trace_id"]).aggregate([])
    return set(zip(pairs.column("tenant").to_pylist(), pairs.column("trace_id").to_pylist()))


def _without_traces(table: pa.Table | None, traces: set[TraceKey]) -> tuple[pa.Table | None, int]:
    """``table`` without the rows of ``traces`` (None when none is left), and how many rows went."""
    if table is None:
        return None, 0
    of = [f"{tenant}/{trace_id}" for tenant, trace_id in traces]
    keys = pc.binary_join_element_wise(table.column("tenant"), table.column("trace_id"), "/")
    kept = table.filter(pc.invert(pc.fill_null(pc.is_in(keys, pa.array(of, pa.string())), False)))
    return (kept if kept.num_rows else None), table.num_rows - kept.num_rows


def _replace_trajectory_rows(
    con: duckdb.DuckDBPyConnection, tenant: str, delete: list[str], tables: dict[str, pa.Table]
) -> None:
    """Delete ``tenant``'s trajectory rows of the traces in ``delete`` and insert ``tables`` (by table name;
    the caller holds a transaction). The ids go in as a registered Arrow table: DuckDB plans a long literal
    IN list far more slowly."""
    if delete:
        with registered(con, _REPLACED_IDS_VIEW, pa.table({"trace_id": pa.array(delete, pa.string())})):
            for table in TRAJECTORY_TABLES:
                con.execute(
                    f"DELETE FROM {table} WHERE tenant = ? AND trace_id IN (SELECT trace_id FROM {_REPLACED_IDS_VIEW})",
                    [tenant],
                )
    for table in TRAJECTORY_TABLES:
        if table in tables:
            insert_arrow(con, table, tables[table])
