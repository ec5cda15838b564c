"""Picking stored traces for grading: a SQL predicate, a time window, a deterministic sample, a limit.

Sampling is by trace id: a trace is in a sample of rate ``r`` when the first 32 bits of the MD5 of its
id, read as a number, fall below ``r * 2**32``. The same trace is therefore always in or out of a
given sample (on any machine, in any DuckDB version), and a larger rate keeps every trace a smaller one
picked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from tracegrade.errors import InvalidValueError
from tracegrade.models.execution import LLM_CONTENT_FIELDS, ExecutionResult, LeanExecution
from tracegrade.models.results import TokenUsage
from tracegrade.store.predicates import isolated_predicate
from tracegrade.store.rows import decompress_json, decompress_json_many, sql_string_among, sql_string_in
from tracegrade.timespec import parse_since

__all__ = [
    "CLI_NAMES",
    "LOAD_CHUNK",
    "QueryableStore",
    "SelectionNames",
    "StoredExecution",
    "TraceSelection",
    "in_sample",
    "iter_executions",
    "load_executions",
    "reads_llm_content",
    "sample_predicate",
    "selected_trace_ids",
    "selection_sql",
    "selection_where",
]

_SAMPLE_SPACE = 1 << 32
LOAD_CHUNK = 10_000  # trace ids per query when loading stored executions (each query scans the traces table)


class QueryableStore(Protocol):
    """Anything with ``query(sql, params)`` returning an object with ``columns`` and ``rows``."""

    def query(self, sql: str, params: Any = None) -> Any: ...


@dataclass
class TraceSelection:
    """Which stored traces reference-free grading (or case export) picks.

    ``where`` is a SQL predicate over the ``traces`` table; ``since`` a duration such as ``"2h"`` or an
    ISO timestamp; ``sample`` a fraction in (0, 1] chosen deterministically by trace id (so re-runs pick the
    same traces); ``limit`` caps the count (newest first); ``trace_ids`` restricts to those traces.
    """

    where: str | None = None
    since: str | None = None
    sample: float | None = None
    limit: int | None = None
    trace_ids: list[str] | None = None


class SelectionNames(NamedTuple):
    """What the caller calls each part of a selection, so that an error names the argument its user typed
    (the CLI's ``--limit``, an MCP tool's ``limit``)."""

    where: str = "--where"
    since: str = "--since"
    sample: str = "--sample"
    limit: str = "--limit"


CLI_NAMES = SelectionNames()  # the command line's options


def _check_rate(rate: float, name: str = CLI_NAMES.sample) -> None:
    if not 0 < rate <= 1:
        raise InvalidValueError(f"{name} must be a fraction in (0, 1], got {rate}")


def sample_predicate(rate: float, column: str = "trace_id", name: str = CLI_NAMES.sample) -> str:
    """SQL that is true for the traces in a sample of ``rate`` (see the module docstring); an error names the
    rate as ``name``."""
    _check_rate(rate, name)
    return f"(('0x' || substr(md5({column}), 1, 8))::UBIGINT < {int(rate * _SAMPLE_SPACE)})"


def in_sample(trace_id: str, rate: float) -> bool:
    """The Python twin of :func:`sample_predicate` (same answer for the same trace id and rate)."""
    _check_rate(rate)
    return int(hashlib.md5(trace_id.encode()).hexdigest()[:8], 16) < int(rate * _SAMPLE_SPACE)


def selection_where(sel: TraceSelection, names: SelectionNames = CLI_NAMES) -> tuple[str, list[object]]:
    """The WHERE clause (over ``traces``) and its parameters; ValueError for a bad where/since/sample/limit, naming
    it as ``names`` says its caller does."""
    clauses: list[str] = ["TRUE"]
    params: list[object] = []
    if sel.where and sel.where.strip():
        clauses.append(isolated_predicate(sel.where, names.where))
    if sel.trace_ids is not None:  # a long list as one parameter: a server refuses a query over 1 MiB
        listed, listed_params = sql_string_in(sel.trace_ids)
        clauses.append(f"trace_id IN {listed}")
        params.extend(listed_params)
    if sel.since:
        clauses.append("start_time >= ?")
        params.append(parse_since(sel.since, names.since))
    if sel.sample is not None:
        clauses.append(sample_predicate(sel.sample, name=names.sample))
    if sel.limit is not None and sel.limit < 1:
        raise InvalidValueError(f"{names.limit} must be at least 1, got {sel.limit}")
    return " AND ".join(clauses), params


def selection_sql(sel: TraceSelection, names: SelectionNames = CLI_NAMES) -> tuple[str, list[object]]:
    """The query that lists the selected trace ids, newest first (errors name the parts as ``names`` says)."""
    where, params = selection_where(sel, names)
    sql = f"SELECT trace_id FROM traces WHERE {where} ORDER BY start_time DESC, trace_id"
    if sel.limit is not None:
        sql += f" LIMIT {int(sel.limit)}"
    return sql, params


def selected_trace_ids(store: QueryableStore, sel: TraceSelection, names: SelectionNames = CLI_NAMES) -> list[str]:
    """The selected trace ids, newest first, each once (an operator's view lists an id once per tenant); errors
    name the parts as ``names`` says."""
    sql, params = selection_sql(sel, names)
    return list(dict.fromkeys(row[0] for row in store.query(sql, params).rows))


class StoredExecution(NamedTuple):
    """One stored trace as graded: its execution and agent tokens. Without an execution, ``problem`` says why
    when the reason is not that the trace has no trajectory yet."""

    trace_id: str
    execution: ExecutionResult | None
    token_usage: TokenUsage
    problem: str | None = None


def _shared_id_problem(trace_id: str, tenants: Collection[str]) -> str:
    return (
        f"trace id {trace_id} is stored by several tenants ({', '.join(sorted(tenants))}), so which trace to grade "
        "is ambiguous; read the store as one tenant (--tenant, TRACEGRADE_TENANT, or TenantStore(store, tenant) in "
        "Python)"
    )


def reads_llm_content(fields: Collection[str] | None) -> bool:
    """Does a reader of ``fields`` (None: any field) need the stored LLM content (``LLM_CONTENT_FIELDS``)?"""
    return fields is None or not LLM_CONTENT_FIELDS.isdisjoint(fields)


def iter_executions(
    store: QueryableStore,
    trace_ids: Sequence[str],
    chunk: int = LOAD_CHUNK,
    *,
    fields: Collection[str] | None = None,
) -> Iterator[StoredExecution]:
    """Each id's stored execution, in order; one query per ``chunk`` ids (and one more for those read whole below).

    Streaming keeps memory flat when grading a large selection: only one chunk of executions is alive
    at a time (ids in the SQL as :func:`~tracegrade.store.rows.sql_string_among` writes them).
    ``fields`` names the ``ExecutionResult`` fields the caller reads (None: any). Unless one of them is LLM
    content, each trace's lean execution (``traces.lean_execution``, a small part of the whole) is read instead of
    the whole, and the LLM content fields are left empty; a trace stored before that column existed is
    read whole. Read with every tenant's rows (an operator's view), an id that several tenants stored has no
    execution: its ``problem`` says so.
    """
    lean = not reads_llm_content(fields)
    for start in range(0, len(trace_ids), chunk):
        part = list(trace_ids[start : start + chunk])
        blobs, shared = _stored_column(store, part, "lean_execution" if lean else "execution")
        if lean:
            # A row built before schema version 9 has no lean execution: its whole one is read instead. Asked for
            # apart, so that the query for the others reads no whole execution (each row's is several times larger).
            older = [trace_id for trace_id, blob in blobs.items() if blob is None]
            whole = _stored_column(store, older, "execution")[0] if older else {}
            read = [trace_id for trace_id, blob in blobs.items() if blob is not None]
            lean_texts = dict(zip(read, decompress_json_many([blobs.pop(trace_id) for trace_id in read])))
        else:
            whole, lean_texts = blobs, {}
        del blobs  # the compressed chunk: its texts are all that is read from here on
        # each text is let go once parsed (the chunk's texts would otherwise all live until its last is read), unless
        # an id is listed twice: each listing gets an execution of its own
        repeated = len(set(part)) < len(part)
        for tid in part:
            if tid in shared:
                yield StoredExecution(tid, None, TokenUsage(), _shared_id_problem(tid, shared[tid]))
                continue
            if tid in lean_texts:
                stored = LeanExecution.model_validate_json(lean_texts[tid] if repeated else lean_texts.pop(tid))
                execution, usage = stored.execution, stored.token_usage
            elif whole.get(tid):
                execution = ExecutionResult.model_validate_json(
                    decompress_json(whole[tid] if repeated else whole.pop(tid))
                )
                usage = execution.token_usage
            else:
                yield StoredExecution(tid, None, TokenUsage())
                continue
            execution.attach_store(store)  # criteria that query the trace itself read its rows there
            yield StoredExecution(tid, execution, usage)


def _stored_column(
    store: QueryableStore, trace_ids: list[str], column: str
) -> tuple[dict[str, Any], dict[str, set[str]]]:
    """``column`` of each id's ``traces`` row, and apart from those the ids that several tenants stored (read with
    every tenant's rows, an operator's view), each with the tenants that did."""
    of_ids, params = sql_string_among("trace_id", trace_ids)
    values: dict[str, Any] = {}
    owner: dict[str, str] = {}
    shared: dict[str, set[str]] = {}
    for trace_id, tenant, value in store.query(
        f"SELECT trace_id, tenant, {column} FROM traces WHERE {of_ids}", params
    ).rows:
        first = owner.setdefault(trace_id, tenant)
        if first != tenant:
            shared.setdefault(trace_id, {first}).add(tenant)
        values.setdefault(trace_id, value)
    for trace_id in shared:
        del values[trace_id]
    return values, shared


def load_executions(store: QueryableStore, trace_ids: Sequence[str]) -> dict[str, ExecutionResult]:
    """The stored execution (``traces.execution``) of each trace id found."""
    found = iter_executions(store, list(dict.fromkeys(trace_ids)))
    return {stored.trace_id: stored.execution for stored in found if stored.execution is not None}
