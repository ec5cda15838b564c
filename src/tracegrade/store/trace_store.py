"""TraceStore: one DuckDB file of spans, logs and trajectory tables (the only read-write opener).

Writes are one transaction each and durable (committed to DuckDB's WAL) when ``write`` returns; a span
sent twice is stored once (the ``spans`` primary key with ON CONFLICT DO NOTHING). Queries run on their
own cursor, so any thread may query while another writes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from tracegrade.errors import StoreError
from tracegrade.models.span import LogRecordData, SpanRecord
from tracegrade.store.database import fetch_arrow, insert_arrow, open_duckdb
from tracegrade.store.readonly import check_read_only
from tracegrade.store.results import QueryResult, WriteResult
from tracegrade.store.rows import (
    LOG_SELECT_COLUMNS,
    SPAN_SELECT_COLUMNS,
    dedupe_spans,
    log_from_row,
    logs_to_arrow,
    span_from_row,
    spans_to_arrow,
    sql_string_list,
    utc_now,
)
from tracegrade.store.schema import check_schema, ensure_schema
from tracegrade.store.trajectories import TrajectoryRows, map_trace, replace_trajectory_rows

__all__ = ["DEFAULT_CHECKPOINT_THRESHOLD", "TraceStore"]

# DuckDB's default (16 MB of WAL) checkpoints every few thousand 2 KB spans; a larger WAL roughly
# doubles bulk-insert throughput, at the price of a longer WAL replay when reopening after a crash.
DEFAULT_CHECKPOINT_THRESHOLD = "64MB"
_LOOKUP_CHUNK = 1000  # trace ids per IN list when loading spans
_REBUILD_CHUNK = 256  # traces mapped and replaced per transaction


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class TraceStore:
    """The trace store on one DuckDB file. ``read_only=True`` opens it for reading only (no migration)."""

    def __init__(
        self,
        path: str | Path,
        *,
        read_only: bool = False,
        checkpoint_threshold: str = DEFAULT_CHECKPOINT_THRESHOLD,
        memory_limit: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        config: dict[str, Any] = {} if read_only else {"checkpoint_threshold": checkpoint_threshold}
        if memory_limit:
            config["memory_limit"] = memory_limit
        self._con = open_duckdb(self.path, read_only=read_only, config=config)
        try:
            (check_schema if read_only else ensure_schema)(self._con, self.path)
        except BaseException:
            self._con.close()
            raise
        self._cursor_source = self._con.cursor()  # spawns per-query cursors; never runs a query itself
        self._cursor_lock = threading.Lock()
        self._write_lock = threading.RLock()
        self._closed = False

    def __enter__(self) -> TraceStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---------------------------------------------------------------- writes

    def write(self, spans: Sequence[SpanRecord], logs: Sequence[LogRecordData] = ()) -> WriteResult:
        """Store spans and log records in one transaction, committed before returning."""
        return self.write_many([(spans, logs)])[0]

    def write_many(
        self, submissions: Sequence[tuple[Sequence[SpanRecord], Sequence[LogRecordData]]]
    ) -> list[WriteResult]:
        """Store several submissions in ONE transaction (one commit); one WriteResult per submission."""
        received_at = utc_now()
        with self._transaction("writing spans"):
            return [self._insert(spans, logs, received_at) for spans, logs in submissions]

    def _insert(self, spans: Sequence[SpanRecord], logs: Sequence[LogRecordData], received_at: Any) -> WriteResult:
        result = WriteResult()
        unique = dedupe_spans(spans)
        if unique:
            inserted = insert_arrow(
                self._con, "spans", spans_to_arrow(unique, received_at), skip_existing_returning="trace_id"
            )
            result.spans_inserted = len(inserted)
            result.trace_ids.update(inserted)
        result.spans_duplicate = len(spans) - result.spans_inserted
        if logs:
            inserted = insert_arrow(
                self._con, "logs", logs_to_arrow(logs, received_at), skip_existing_returning="trace_id"
            )
            result.logs_inserted = len(inserted)
            result.logs_duplicate = len(logs) - len(inserted)
            result.trace_ids.update(t for t in inserted if t)
        return result

    def execute_write(self, sql: str, params: Sequence[Any] | None = None) -> None:
        """Run one writing statement (grading-result tables) in its own committed transaction."""
        with self._transaction("executing a write"):
            self._con.execute(sql, params)

    @contextmanager
    def _transaction(self, doing: str) -> Iterator[None]:
        """BEGIN … COMMIT under the write lock; ROLLBACK on any error (DuckDB errors become StoreError)."""
        self._require_open()
        if self.read_only:
            raise StoreError(f"store {self.path} is open read-only; {doing} needs a read-write TraceStore")
        with self._write_lock:
            self._con.execute("BEGIN TRANSACTION")
            try:
                yield
                self._con.execute("COMMIT")
            except BaseException as exc:
                try:
                    self._con.execute("ROLLBACK")
                except duckdb.Error:
                    pass  # DuckDB already aborted the transaction
                if isinstance(exc, duckdb.Error):
                    raise StoreError(f"{doing} in store {self.path} failed: {exc}") from exc
                raise

    # ------------------------------------------------------------ trajectories

    def rebuild_trajectories(self, trace_ids: Iterable[str]) -> int:
        """Re-map those traces into traces/node_visits/tool_calls/llm_calls; returns how many were mapped.

        A trace id with no stored spans loses any trajectory rows it had.
        """
        ids = list(dict.fromkeys(trace_ids))
        mapped = 0
        for chunk in _chunks(ids, _REBUILD_CHUNK):
            updated_at = utc_now()  # before loading: spans received later make the rows stale again
            spans = self.load_spans(chunk)
            logs = self.load_logs(chunk)
            rows = TrajectoryRows()
            for trace_id, trace_spans in spans.items():
                map_trace(trace_id, trace_spans, logs.get(trace_id, []), updated_at, rows)
            with self._transaction("rebuilding trajectories"):
                replace_trajectory_rows(self._con, chunk, rows)
            mapped += len(spans)
        return mapped

    def stale_trajectories(self) -> list[str]:
        """Traces whose trajectory rows are missing or older than their newest span or log record.

        After a crash these are the rebuilds that were still pending; the writer rebuilds them on start.
        """
        sql = """
            WITH received AS (
                SELECT trace_id, max(received_at) AS last_received FROM spans GROUP BY trace_id
                UNION ALL
                SELECT trace_id, max(received_at) FROM logs WHERE trace_id IS NOT NULL GROUP BY trace_id
            )
            SELECT r.trace_id FROM received r LEFT JOIN traces t USING (trace_id)
            GROUP BY r.trace_id, t.updated_at
            HAVING t.updated_at IS NULL OR max(r.last_received) > t.updated_at
            ORDER BY r.trace_id
        """
        return [row[0] for row in self._run(sql, None, check=False).rows]

    # ----------------------------------------------------------------- reads

    def load_spans(self, trace_ids: Sequence[str]) -> dict[str, list[SpanRecord]]:
        """The stored spans of those traces (by trace id, each list ordered by start time)."""
        found: dict[str, list[SpanRecord]] = {}
        for chunk in _chunks(list(dict.fromkeys(trace_ids)), _LOOKUP_CHUNK):
            sql = (
                f"SELECT {SPAN_SELECT_COLUMNS} FROM spans WHERE trace_id IN {sql_string_list(chunk)} "
                "ORDER BY trace_id, start_ns, span_id"
            )
            for row in self._run(sql, None, check=False).rows:
                found.setdefault(row[0], []).append(span_from_row(row))
        return found

    def load_logs(self, trace_ids: Sequence[str]) -> dict[str, list[LogRecordData]]:
        """The stored log records of those traces (by trace id, ordered by time)."""
        found: dict[str, list[LogRecordData]] = {}
        for chunk in _chunks(list(dict.fromkeys(trace_ids)), _LOOKUP_CHUNK):
            sql = (
                f"SELECT {LOG_SELECT_COLUMNS} FROM logs WHERE trace_id IN {sql_string_list(chunk)} "
                "ORDER BY trace_id, time_ns, log_key"
            )
            for row in self._run(sql, None, check=False).rows:
                found.setdefault(row[0], []).append(log_from_row(row))
        return found

    def query(self, sql: str, params: Sequence[Any] | None = None) -> QueryResult:
        """Run one read-only statement (anything else raises StoreError) on a fresh cursor."""
        return self._run(sql, params, check=True)

    def query_arrow(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
        """Like ``query`` but returns DuckDB's result as an Arrow table (exports, parquet output)."""
        return self._run(sql, params, check=True, arrow=True).to_arrow()

    def _run(self, sql: str, params: Sequence[Any] | None, *, check: bool, arrow: bool = False) -> QueryResult:
        if check:
            check_read_only(sql)
        self._require_open()
        with self._cursor_lock:
            cursor = self._cursor_source.cursor()
        try:
            cursor.begin()  # rolled back below: a query can never change stored data
            cursor.execute(sql, list(params) if params is not None else None)
            columns = [d[0] for d in cursor.description or []]
            types = [str(d[1]) for d in cursor.description or []]
            if arrow:
                return QueryResult(columns, [], types, arrow=fetch_arrow(cursor))
            return QueryResult(columns, cursor.fetchall(), types)
        except duckdb.Error as exc:
            raise StoreError(f"query failed: {exc}") from None
        finally:
            cursor.close()  # closing rolls back the open transaction

    # ------------------------------------------------------------- lifecycle

    def _require_open(self) -> None:
        if self._closed:
            raise StoreError(f"store {self.path} is closed")

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the file (DuckDB checkpoints the WAL into the database file on close)."""
        with self._write_lock:
            if self._closed:
                return
            self._closed = True
            self._cursor_source.close()
            self._con.close()
