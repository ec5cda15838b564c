"""One case's trajectory as an in-memory DuckDB sandbox with the store's tables, for SQL assertions.

The sandbox holds ``spans``, ``traces``, ``node_visits``, ``tool_calls`` and ``llm_calls`` with the
store's own columns (their DDL is read from the store's migrations, never restated) and only the rows of
the case's traces. Those rows come from one of three places, so live and offline grading query the same
thing:

* an execution read from a store (offline grading): the store's rows of its trace ids;
* an execution mapped from spans (live capture): the spans mapped per trace exactly as the store maps
  them (``tracegrade.store.trajectories.map_traces``), plus the spans themselves;
* an execution without either (built by hand, a dry run): its own rows, without spans.

The database is locked down before any user query runs: no file or network access, no extension
loading, configuration frozen. Each thread keeps one sandbox and reloads it per case; consecutive
assertions on the same execution reuse what is loaded. A grading call made for someone else (the MCP
``grade`` tool of a receiver) grades inside ``own_sandbox``: a new database for that call alone, so no
caller's assertion sees what another's case left in a reused one (DELETE keeps a table's statistics), and
with ``SandboxLimits`` on its time, memory and threads, so a runaway assertion fails instead of running on.
"""

from __future__ import annotations

import contextvars
import functools
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from tracegrade.errors import QueryCancelled, StoreError, TracegradeError
from tracegrade.models.execution import ExecutionResult
from tracegrade.store.query_control import QueryControl
from tracegrade.store.readonly import check_read_only, lock_down
from tracegrade.store.rows import dedupe_spans, spans_to_arrow, sql_string_among, utc_now
from tracegrade.store.tenancy import DEFAULT_TENANT, with_tenant
from tracegrade.store.trajectories import TrajectoryRows, execution_rows, map_traces

__all__ = [
    "SANDBOX_TABLES",
    "SandboxLimits",
    "SqlAssertionError",
    "TrajectorySandbox",
    "check_assertion_sql",
    "own_sandbox",
    "sandbox",
]

SANDBOX_TABLES: tuple[str, ...] = ("spans", "traces", "node_visits", "tool_calls", "llm_calls")

_EXPLAIN = "EXPLAIN "
_LOCATION = re.compile(r"\n*LINE (\d+): (.*)\n( *)\^\s*$")


class SqlAssertionError(TracegradeError, ValueError):
    """A SQL assertion's query is refused: it does not parse or bind against the trajectory tables, or it
    is not one read-only SELECT. ``line`` and ``column`` (1-based) locate the error when DuckDB gives it."""

    def __init__(self, assertion: str, problem: str, line: int | None = None, column: int | None = None) -> None:
        self.assertion = assertion
        self.problem = problem
        self.line = line
        self.column = column
        where = f" at line {line}, column {column}" if line is not None else ""
        super().__init__(
            f"SQL assertion {assertion!r} is invalid{where}: {problem}. The query must be one SELECT over the "
            f"tables {', '.join(SANDBOX_TABLES)} (columns as in the store, see SCHEMA.md) that returns the "
            "violating rows"
        )


@functools.cache
def _schema_ddl() -> str:
    """CREATE TABLE statements of the sandbox tables, as the store's migrations leave them."""
    from tracegrade.store.schema import ensure_schema

    scratch = duckdb.connect(":memory:")
    try:
        ensure_schema(scratch, Path(":memory:"))
        ddl = dict(scratch.execute("SELECT table_name, sql FROM duckdb_tables()").fetchall())
    finally:
        scratch.close()
    return "\n".join(ddl[table] for table in SANDBOX_TABLES)


def _stored_tables(store: Any, trace_ids: Sequence[str]) -> dict[str, pa.Table]:
    of_ids, params = sql_string_among("trace_id", dict.fromkeys(trace_ids))
    return {table: store.query_arrow(f"SELECT * FROM {table} WHERE {of_ids}", params) for table in SANDBOX_TABLES}


def _live_tables(execution: ExecutionResult) -> dict[str, pa.Table]:
    """The rows of a live (or hand-built) execution, as the default tenant's: it was never stored."""
    now = utc_now()
    spans = dedupe_spans(execution.source_spans)
    if not spans:
        rows = TrajectoryRows()
        execution_rows(execution.trace_ids[0] if execution.trace_ids else "", execution, [], now, rows)
        return {name: with_tenant(table, DEFAULT_TENANT) for name, table in rows.to_arrow().items()}
    by_trace: dict[str, list[Any]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    tables = map_traces(by_trace, {}, now).to_arrow()
    span_table = spans_to_arrow(spans)
    tables["spans"] = span_table.append_column("received_at", pa.array([now] * len(spans), pa.timestamp("us")))
    return {name: with_tenant(table, DEFAULT_TENANT) for name, table in tables.items()}


def trajectory_tables(execution: ExecutionResult) -> dict[str, pa.Table]:
    """The rows of the sandbox tables for one execution (see the module docstring for their source)."""
    store = execution.source_store
    if store is not None and execution.trace_ids:
        return _stored_tables(store, execution.trace_ids)
    return _live_tables(execution)


def _located(message: str, sql: str) -> tuple[str, int | None, int | None]:
    """DuckDB's message without its ``LINE n: …`` excerpt, and the 1-based line and column of the caret
    in ``sql`` (the excerpt may be cut short with ``...`` and, on line 1, starts with the EXPLAIN prefix)."""
    found = _LOCATION.search(message)
    if found is None:
        return message.strip(), None, None
    line = int(found[1])
    shown = found[2]
    caret = len(found[3]) - len(f"LINE {found[1]}: ")
    lead = 4 if shown.startswith("... ") else 0
    excerpt = shown[lead:].removesuffix("...")
    explained = (_EXPLAIN + sql).splitlines()
    text = explained[line - 1] if line <= len(explained) else ""
    column = max(text.find(excerpt), 0) + caret - lead
    if line == 1:
        column -= len(_EXPLAIN)
    return message[: found.start()].strip(), line, max(column, 0) + 1


@dataclass(frozen=True)
class SandboxLimits:
    """What the assertions of one grading call may take: each query ``timeout`` seconds, and the sandbox
    ``memory_limit`` of DuckDB memory (as DuckDB writes sizes) with nothing spilled to disk, on one thread."""

    timeout: float
    memory_limit: str

    def config(self) -> dict[str, Any]:
        # no temp_directory: an in-memory database then fails with out-of-memory rather than spill
        return {"memory_limit": self.memory_limit, "temp_directory": "", "threads": 1}


class TrajectorySandbox:
    """A locked-down in-memory database with the sandbox tables; ``load`` replaces their rows."""

    def __init__(self, limits: SandboxLimits | None = None) -> None:
        self._con = duckdb.connect(":memory:", config=limits.config() if limits is not None else {})
        self._con.execute(_schema_ddl())
        lock_down(self._con)
        self._limits = limits
        self._loaded: ExecutionResult | None = None

    def check(self, assertion: str, sql: str) -> None:
        """Raise SqlAssertionError unless ``sql`` is one SELECT that parses and binds against the tables."""
        try:
            check_read_only(sql)
        except StoreError as exc:
            message, line, column = _located(str(exc).removeprefix("the SQL does not parse: "), sql)
            raise SqlAssertionError(assertion, message, line, column) from None
        if duckdb.extract_statements(sql)[0].type != duckdb.StatementType.SELECT:
            raise SqlAssertionError(assertion, "only a SELECT can be an assertion (not EXPLAIN)")
        try:
            self._con.execute(_EXPLAIN + sql)  # binds every name and type without running the query
        except duckdb.Error as exc:
            message, line, column = _located(str(exc), sql)
            raise SqlAssertionError(assertion, message, line, column) from None

    def load(self, execution: ExecutionResult) -> None:
        """Hold exactly the trajectory of ``execution`` (nothing is reloaded for the execution already held)."""
        if self._loaded is execution:
            return
        self._loaded = None
        con = self._con
        with self._memory_bounded("loading the case's traces"):
            for table in SANDBOX_TABLES:
                con.execute(f"DELETE FROM {table}")
            for table, rows in trajectory_tables(execution).items():
                if rows.num_rows:
                    con.register("_incoming", rows)
                    try:
                        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _incoming")
                    finally:
                        con.unregister("_incoming")
        self._loaded = execution

    def run(self, sql: str, max_rows: int | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The result columns and rows (at most ``max_rows``) of a checked query over what is loaded;
        within the sandbox's limits, if it has any."""
        cursor = self._con.cursor()
        control = QueryControl(self._limits.timeout if self._limits is not None else None)
        control.attach(cursor)
        try:
            with self._memory_bounded("the SQL assertion"):
                cursor.execute(sql)
                columns = [d[0] for d in cursor.description or []]
                return columns, cursor.fetchall() if max_rows is None else cursor.fetchmany(max_rows)
        except duckdb.InterruptException:
            raise QueryCancelled(f"the SQL assertion was stopped: {control.reason}") from None
        finally:
            control.detach()
            cursor.close()

    @contextmanager
    def _memory_bounded(self, doing: str) -> Iterator[None]:
        """Say which limit ``doing`` ran into when the sandbox runs out of memory."""
        try:
            yield
        except duckdb.OutOfMemoryException:
            if self._limits is None:
                raise
            raise StoreError(
                f"{doing} needed more than the {self._limits.memory_limit} of memory that SQL assertions graded "
                "for a caller of this receiver may use (its --query-memory-limit); narrow the query"
            ) from None

    def close(self) -> None:
        self._con.close()


_local = threading.local()
_owned: contextvars.ContextVar[TrajectorySandbox | None] = contextvars.ContextVar("tracegrade_sandbox", default=None)


def sandbox() -> TrajectorySandbox:
    """The sandbox of the current ``own_sandbox`` block, else this thread's (created on first use)."""
    box = _owned.get() or getattr(_local, "sandbox", None)
    if box is None:
        box = _local.sandbox = TrajectorySandbox()
    return box


@contextmanager
def own_sandbox(limits: SandboxLimits | None = None) -> Iterator[TrajectorySandbox]:
    """A new sandbox (within ``limits``) for every assertion checked and graded in this context until the
    block ends (an event loop started inside inherits it), then closed. A new database costs some 25 ms,
    once per block."""
    box = TrajectorySandbox(limits)
    bound = _owned.set(box)
    try:
        yield box
    finally:
        _owned.reset(bound)
        box.close()


def check_assertion_sql(assertion: str, sql: str) -> None:
    """Refuse bad SQL early (config load, criterion construction): see ``TrajectorySandbox.check``."""
    sandbox().check(assertion, sql)
