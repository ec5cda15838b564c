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

Every assertion query also has a time limit of its own (``SqlAssertion.timeout_seconds``), in every sandbox: a
query that never ends (a recursive CTE, a cross join of ``range``) would otherwise hold the grading run, live
or offline, for ever. The query runs on a thread of its own while the caller waits for it, so that Ctrl+C
(which Python delivers only between bytecodes, never inside DuckDB) stops it too.
"""

from __future__ import annotations

import contextvars
import functools
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import duckdb
import pyarrow as pa

from tracegrade.errors import QueryCancelled, StoreError, TracegradeError
from tracegrade.models.config import SqlAssertion
from tracegrade.models.execution import ExecutionResult
from tracegrade.store.database import without_progress_bar
from tracegrade.store.duckdb_api import registered
from tracegrade.store.predicates import unbalanced_parenthesis
from tracegrade.store.query_control import QueryControl
from tracegrade.store.readonly import SandboxLimits, check_read_only, lock_down
from tracegrade.store.rows import dedupe_spans, spans_to_arrow, sql_string_among, utc_now
from tracegrade.store.tenancy import DEFAULT_TENANT, with_tenant
from tracegrade.store.trajectories import TrajectoryRows, execution_rows, map_traces

__all__ = [
    "DEFAULT_ASSERTION_TIMEOUT",
    "SANDBOX_TABLES",
    "SandboxLimits",
    "SqlAssertionError",
    "SqlProblem",
    "TrajectorySandbox",
    "check_assertion_sql",
    "own_sandbox",
    "predicate_problem",
    "sandbox",
]

SANDBOX_TABLES: tuple[str, ...] = ("spans", "traces", "node_visits", "tool_calls", "llm_calls")
# seconds an assertion query may run unless its config says otherwise (the config's default, said once)
DEFAULT_ASSERTION_TIMEOUT: float = SqlAssertion.model_fields["timeout_seconds"].default

_EXPLAIN = "EXPLAIN "
# DuckDB 2 underlines the whole token; (?<!\n): from the start of a run of newlines only (from each newline of a
# run, as before, a message of 100k newlines took 10 s)
_LOCATION = re.compile(r"(?<!\n)\n*LINE (\d+): (.*)\n( *)\^+\s*$")
_AT_END = "at end of input"  # DuckDB's parser gives no LINE excerpt for this one: the end is the place
_PREDICATE_QUERY = "SELECT trace_id FROM traces WHERE (\n{}\n)"  # the predicate on lines of its own
_COUNTED_CHUNK = 256  # rows fetched at a time by run_counted to count them, none of them kept
_Read = TypeVar("_Read")


class SqlProblem(NamedTuple):
    """Why a query is refused, and where: the 1-based line and column, None when DuckDB does not say."""

    message: str
    line: int | None = None
    column: int | None = None

    def located(self) -> str:
        """`` at line L, column C`` (empty when the place is unknown), to follow what was refused."""
        return f" at line {self.line}, column {self.column}" if self.line is not None else ""


class SqlAssertionError(TracegradeError, ValueError):
    """A SQL assertion's query is refused: it does not parse or bind against the trajectory tables, or it
    is not one read-only SELECT. ``line`` and ``column`` (1-based) locate the error when DuckDB gives it."""

    def __init__(self, assertion: str, problem: str, line: int | None = None, column: int | None = None) -> None:
        self.assertion = assertion
        self.problem = problem
        self.line = line
        self.column = column
        where = SqlProblem(problem, line, column).located()
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


def _located(message: str, sql: str) -> SqlProblem:
    """DuckDB's message without its ``LINE n: …`` excerpt, and the 1-based line and column of the caret
    in ``sql`` (the excerpt may be cut short with ``...`` and, on line 1, starts with the EXPLAIN prefix);
    a query that ends too soon is located at its end."""
    found = _LOCATION.search(message)
    if found is None:
        if _AT_END in message:
            lines = sql.rstrip().splitlines() or [""]
            return SqlProblem(message.strip(), len(lines), len(lines[-1]) + 1)
        return SqlProblem(message.strip())
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
    return SqlProblem(message[: found.start()].strip(), line, max(column, 0) + 1)


class TrajectorySandbox:
    """A locked-down in-memory database with the sandbox tables; ``load`` replaces their rows."""

    def __init__(self, limits: SandboxLimits | None = None) -> None:
        self._con = duckdb.connect(":memory:", config=limits.config() if limits is not None else {})
        self._con.execute(_schema_ddl())
        without_progress_bar(self._con)  # a slow assertion would draw it on the grader's standard output
        lock_down(self._con)
        self._limits = limits
        self._loaded: ExecutionResult | None = None

    def check(self, assertion: str, sql: str) -> None:
        """Raise SqlAssertionError unless ``sql`` is one SELECT that parses and binds against the tables."""
        problem = self.problem(sql)
        if problem is not None:
            raise SqlAssertionError(assertion, *problem)

    def problem(self, sql: str) -> SqlProblem | None:
        """Why ``sql`` is not one read-only SELECT that parses and binds against the tables (None: it is)."""
        try:
            check_read_only(sql)
        except StoreError as exc:
            return _located(str(exc).removeprefix("the SQL does not parse: "), sql)
        if duckdb.extract_statements(sql)[0].type != duckdb.StatementType.SELECT:
            return SqlProblem("only a SELECT can be an assertion (not EXPLAIN)")
        try:
            self._con.execute(_EXPLAIN + sql)  # binds every name and type without running the query
        except duckdb.Error as exc:
            return _located(str(exc), sql)
        return None

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
                    with registered(con, "_incoming", rows):
                        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _incoming")
        self._loaded = execution

    def run(
        self, sql: str, max_rows: int | None = None, *, timeout: float = DEFAULT_ASSERTION_TIMEOUT
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The result columns and rows (at most ``max_rows``) of a checked query over what is loaded, stopped
        with QueryCancelled after ``timeout`` seconds (or the sandbox's limit, if it has a shorter one); a
        KeyboardInterrupt while it runs stops it too, and is raised again once it has stopped."""
        return self._query(
            sql, timeout, lambda cursor: cursor.fetchall() if max_rows is None else cursor.fetchmany(max_rows)
        )

    def run_counted(
        self, sql: str, keep: int, most: int, *, timeout: float = DEFAULT_ASSERTION_TIMEOUT
    ) -> tuple[list[str], list[tuple[Any, ...]], int]:
        """As ``run``, keeping only the first ``keep`` rows and counting the rest, up to ``most`` rows in all: the
        columns, the rows kept and how many rows there were (``most`` when there were at least that many)."""

        def read(cursor: duckdb.DuckDBPyConnection) -> tuple[list[tuple[Any, ...]], int]:
            kept = cursor.fetchmany(min(keep, most))
            count = len(kept)
            while count < most and (chunk := cursor.fetchmany(min(_COUNTED_CHUNK, most - count))):
                count += len(chunk)
            return kept, count

        columns, (kept, count) = self._query(sql, timeout, read)
        return columns, kept, count

    def _query(
        self, sql: str, timeout: float, read: Callable[[duckdb.DuckDBPyConnection], _Read]
    ) -> tuple[list[str], _Read]:
        limit, why = timeout, f"its time limit of {timeout:g} s (the assertion's timeout_seconds)"
        if self._limits is not None and self._limits.timeout < limit:
            limit = self._limits.timeout
            why = f"its time limit of {limit:g} s (--query-timeout)"  # the receiver's, for its callers' assertions
        cursor = self._con.cursor()
        control = QueryControl()  # cancelled here, so that the reason names the limit that applied
        control.attach(cursor)

        def query() -> tuple[list[str], _Read]:
            with self._memory_bounded("the SQL assertion"):
                cursor.execute(sql)
                return [d[0] for d in cursor.description or []], read(cursor)

        try:
            return _waited(query, limit, lambda: control.cancel(f"it ran longer than {why}"), control.cancel)
        except duckdb.InterruptException:
            raise QueryCancelled(
                f"the SQL assertion was stopped: {control.reason}; make the query cheaper (or raise the limit)"
            ) from None
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


def _waited(
    work: Callable[[], Any], timeout: float, on_timeout: Callable[[], None], on_interrupt: Callable[[str], None]
) -> Any:
    """``work()`` run on a thread of its own, waited for here: ``on_timeout`` is called once ``timeout`` seconds
    have passed (it must make ``work`` end), ``on_interrupt`` when this thread is interrupted (Ctrl+C); either
    way ``work``'s own outcome (its result or exception) is what comes back, and an interrupt is raised again.
    Waiting on an event, unlike a call into DuckDB, lets Python deliver Ctrl+C at once."""
    outcome: list[Any] = []
    done = threading.Event()

    def target() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as exc:  # handed to the waiting thread, which raises it
            outcome.append((False, exc))
        finally:
            done.set()

    worker = threading.Thread(target=target, name="tracegrade-sql-assertion", daemon=True)
    worker.start()
    try:
        if not done.wait(timeout):
            on_timeout()
            done.wait()
    except KeyboardInterrupt:
        on_interrupt("it was interrupted (Ctrl+C)")
        done.wait()
        raise
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


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


def predicate_problem(predicate: str) -> SqlProblem | None:
    """Why ``predicate`` is not a valid SQL predicate over the ``traces`` table (None: it is), found without a
    store by binding it against the store's own table definition; the line and column are the predicate's own.

    This is how predicates written into files (a case's ``metadata.selector.where``, a worker rule's ``where``)
    are checked when the file loads, rather than when a query over the store first fails."""
    unbalanced = unbalanced_parenthesis(predicate)
    if unbalanced:
        return SqlProblem(f"it {unbalanced}; write one condition, with its parentheses matched")
    problem = sandbox().problem(_PREDICATE_QUERY.format(predicate))
    if problem is None or problem.line is None:
        return problem
    lines = predicate.splitlines() or [""]
    if problem.line - 1 > len(lines):  # at the closing parenthesis, which is ours: the predicate ended too soon
        message = problem.message.replace('at or near ")"', _AT_END)
        return SqlProblem(message, len(lines), len(lines[-1]) + 1)
    return problem._replace(line=max(problem.line - 1, 1))
