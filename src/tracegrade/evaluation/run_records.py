"""Grading runs recorded in the store: ``eval_runs``, ``eval_case_results`` and ``eval_results``.

Every grading run (live, offline, reference-free, worker) can be written here, so results are
joinable in SQL with ``traces``, ``tool_calls`` and the other trajectory tables::

    SELECT r.criterion, avg(r.score), count(*) FROM eval_results r JOIN traces t USING (trace_id)
    WHERE t.service_name = 'checkout' GROUP BY ALL;

Rows are keyed by (tenant, run_id, eval_id[, criterion]) (a run is its tenant's alone) and a case's rows
replace what it had (the store's
``write_records``, on a DuckDB file or a lake alike: see ``store.grading_tables``), so writing the same run
twice (a retried grading job) never duplicates results. Each table's rows go in as one Arrow table:
DuckDB binds Python parameters one value at a time, slowly. A run's rows are one transaction, its
``eval_runs`` row with them: a run that was interrupted while being recorded is not listed.

A run is recorded whole (``record_report``) or case by case (``record_cases``, an online worker's window
of jobs). Recorded whole, ``eval_runs.report`` holds the report without its cases (summary, config,
metadata) as JSON, and ``eval_runs.case_results`` every case result as one zstd-compressed JSON array: a
case result repeats what each LLM call was given (``messages``, ``node_responses``, ``node_details``), and
storing that as plain text cost more than grading the run (bench/RESULTS.md, run recording).
Recorded case by case, each case's result JSON is in ``eval_run_cases`` and the run's counts are
recomputed over all its cases each time. ``load_run`` puts the report together when it is read;
``load_run_outcomes`` reads only what ``gate`` and ``diff`` compare.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timezone
from typing import Any, Protocol

import orjson
import pyarrow as pa
from pydantic import BaseModel, TypeAdapter
from pydantic_core import PydanticSerializationError

from tracegrade.errors import InvalidValueError, NotFoundError
from tracegrade.evaluation.run_outcomes import RunOutcomes, case_outcomes, run_outcomes
from tracegrade.json_output import json_text
from tracegrade.models.results import EvalCaseResult, EvalReport
from tracegrade.output_files import well_formed_text
from tracegrade.store.grading_tables import CASE_COUNTS
from tracegrade.store.tenancy import DEFAULT_TENANT, with_tenant
from tracegrade.timespec import utc_now

__all__ = [
    "RunSink",
    "RunSummary",
    "check_run_id",
    "list_runs",
    "load_run",
    "load_run_outcomes",
    "new_run_id",
    "record_cases",
    "record_report",
]

_TEXT, _REAL, _FLAG, _COUNT = pa.string(), pa.float64(), pa.bool_(), pa.int64()
_ROW_SCHEMAS = {
    "eval_runs": pa.schema(
        [
            ("run_id", _TEXT),
            ("created_at", pa.timestamp("us")),
            ("kind", _TEXT),
            ("eval_set_id", _TEXT),
            ("eval_set_name", _TEXT),
            ("total_cases", _COUNT),
            ("passed_cases", _COUNT),
            ("failed_cases", _COUNT),
            ("error_cases", _COUNT),
            ("pass_rate", _REAL),
            ("config", _TEXT),
            ("metadata", _TEXT),
            ("report", _TEXT),
            ("case_results", pa.binary()),
        ]
    ),
    "eval_case_results": pa.schema(
        [
            ("run_id", _TEXT),
            ("eval_id", _TEXT),
            ("name", _TEXT),
            ("trace_id", _TEXT),
            ("trace_ids", _TEXT),
            ("passed", _FLAG),
            ("error", _TEXT),
            ("mean_score", _REAL),
            ("duration_s", _REAL),
            ("actual_response", _TEXT),
            ("tool_names", _TEXT),
            ("node_visits", _TEXT),
        ]
    ),
    "eval_results": pa.schema(
        [
            ("run_id", _TEXT),
            ("eval_id", _TEXT),
            ("trace_id", _TEXT),
            ("criterion", _TEXT),
            ("score", _REAL),
            ("passed", _FLAG),
            ("threshold", _REAL),
            ("skipped", _FLAG),
            ("error", _TEXT),
            ("reason", _TEXT),
            ("details", _TEXT),
            ("input_tokens", _COUNT),
            ("output_tokens", _COUNT),
            ("cost_usd", _REAL),
        ]
    ),
    "eval_run_cases": pa.schema([("run_id", _TEXT), ("eval_id", _TEXT), ("result", _TEXT)]),
}


class RunSink(Protocol):
    """A store that records runs: ``write_records(tables)`` (Arrow tables by name, written by key in one
    transaction) and ``query(sql, params)``; a ``TraceStore`` or a ``LakeStore``."""

    def write_records(self, tables: Mapping[str, pa.Table]) -> None: ...

    def query(self, sql: str, params: Any = None) -> Any: ...


@dataclass
class RunSummary:
    run_id: str
    created_at: Any
    kind: str
    eval_set_id: str
    total_cases: int
    passed_cases: int
    failed_cases: int
    error_cases: int
    pass_rate: float


_CASE_LIST = TypeAdapter(list[EvalCaseResult])
_CASE = TypeAdapter(EvalCaseResult)


def record_report(
    store: RunSink, report: EvalReport, kind: str, run_id: str | None = None, tenant: str = DEFAULT_TENANT
) -> str:
    """Write one run of ``tenant``'s; returns its id. Idempotent for a given ``run_id``."""
    run_id = new_run_id() if run_id is None else check_run_id(run_id)
    store.write_records(_as_tenants(_recorded(report, lambda r: _run_tables(run_id, r, kind)), tenant))
    return run_id


def _run_tables(run_id: str, report: EvalReport, kind: str) -> dict[str, pa.Table]:
    """The rows that record ``report`` whole as run ``run_id``."""
    s = report.summary
    run_row: list[Any] = [
        run_id,
        utc_now(),
        kind,
        report.eval_set_id,
        report.eval_set_name,
        s.total_cases,
        s.passed_cases,
        s.failed_cases,
        s.error_cases,
        s.pass_rate,
        _document_text(report.config_used),
        _document_text(report.metadata),
        report.model_dump_json(exclude={"results"}),
        _pack_cases(report.results),
    ]
    return {**_case_rows(run_id, report), "eval_runs": _columns("eval_runs", [[v] for v in run_row])}


def record_cases(
    store: RunSink,
    report: EvalReport,
    kind: str,
    run_id: str,
    metadata: dict[str, Any],
    tenant: str = DEFAULT_TENANT,
) -> str:
    """Add ``report``'s cases to ``tenant``'s run ``run_id``, recorded case by case; returns ``run_id``.

    A case already in the run (same ``eval_id``) is replaced, every row of it, so recording a case again
    never duplicates it. The run's row then counts every case recorded in it; ``metadata`` and the
    report's config become the run's. The cases and the run's row are one write (one transaction): a
    process that dies while recording leaves the run as it was, never cases without their run's row.
    """
    check_run_id(run_id)
    tables = _recorded(report, lambda r: _casewise_tables(run_id, r, kind, metadata))
    store.write_records(_as_tenants(tables, tenant))
    return run_id


def _casewise_tables(run_id: str, report: EvalReport, kind: str, metadata: dict[str, Any]) -> dict[str, pa.Table]:
    """The rows that add ``report``'s cases to run ``run_id`` (each case's result JSON with them) and its row."""
    tables = _case_rows(run_id, report)
    results = report.results
    tables["eval_run_cases"] = _columns(
        "eval_run_cases",
        [[run_id] * len(results), [r.eval_id for r in results], [r.model_dump_json() for r in results]],
    )
    config, meta = _document_text(report.config_used), _document_text(metadata)
    counts = [None] * len(CASE_COUNTS)  # counted by the store from the cases it holds (``grading_tables.recount_runs``)
    run_row = [run_id, utc_now(), kind, report.eval_set_id, report.eval_set_name, *counts, config, meta, None, None]
    tables["eval_runs"] = _columns("eval_runs", [[value] for value in run_row])
    return tables


# what building a run's rows raises on text that UTF-8 cannot hold, a lone surrogate (Arrow: UnicodeEncodeError;
# pydantic: PydanticSerializationError, which it also raises on a value JSON has no form for)
_UNRECORDABLE = (UnicodeEncodeError, PydanticSerializationError)


def _recorded(report: EvalReport, rows: Callable[[EvalReport], dict[str, pa.Table]]) -> dict[str, pa.Table]:
    """``rows(report)``; for a report that cannot be recorded as it is, ``rows`` of the report as its JSON report
    file holds it (:func:`~tracegrade.json_output.json_text`: lone surrogates as U+FFFD, values JSON has no form
    for as text). A case name or an agent's reply may hold a lone surrogate (``json.loads`` of ``"\\ud800"`` makes
    one), which UTF-8, and so the store, cannot hold. Tried as it is first: a scan of every string of every
    report for what almost none holds would cost more than the rare second attempt."""
    try:
        return rows(report)
    except _UNRECORDABLE:
        return rows(EvalReport.model_validate_json(json_text(report, indent=None)))


def _as_tenants(tables: dict[str, pa.Table], tenant: str) -> dict[str, pa.Table]:
    """A run's rows, each with the tenant column (the last of every grading table) set to ``tenant``."""
    return {name: with_tenant(table, tenant) for name, table in tables.items()}


def _case_rows(run_id: str, report: EvalReport) -> dict[str, pa.Table]:
    """The ``eval_results`` and ``eval_case_results`` rows of every case of ``report``, under ``run_id``
    (built column by column: a run of 20,000 cases has 100,000 result rows)."""
    cases = report.results
    first_traces = [r.trace_ids[0] if r.trace_ids else None for r in cases]
    owners = [(r.eval_id, trace) for r, trace in zip(cases, first_traces) for _ in r.criterion_results]
    results = [c for r in cases for c in r.criterion_results]
    usages = [c.token_usage for c in results]
    results_table = _columns(
        "eval_results",
        [
            [run_id] * len(results),
            [eval_id for eval_id, _ in owners],
            [trace for _, trace in owners],
            [c.criterion for c in results],
            [c.score for c in results],
            [c.passed for c in results],
            [c.threshold for c in results],
            [c.skipped for c in results],
            [c.error for c in results],
            [c.reason for c in results],
            [_json_text(c.details) for c in results],
            [u.input_tokens for u in usages],
            [u.output_tokens for u in usages],
            [u.cost_usd for u in usages],
        ],
    )
    cases_table = _columns(
        "eval_case_results",
        [
            [run_id] * len(cases),
            [r.eval_id for r in cases],
            [r.name for r in cases],
            first_traces,
            [_json_text(r.trace_ids) for r in cases],
            [r.passed for r in cases],
            [r.error for r in cases],
            [r.mean_score for r in cases],
            [r.duration_seconds for r in cases],
            [r.actual_response for r in cases],
            [_json_text([t.name for t in r.actual_tool_calls]) for r in cases],
            [_json_text(r.node_visits) for r in cases],
        ],
    )
    return {"eval_results": results_table, "eval_case_results": cases_table}


def _json_text(value: Any) -> str:
    """JSON for a grading table's JSON column: orjson (non-finite numbers become null), or the standard
    library for what orjson refuses (lone surrogates, integers beyond 64 bits). As ``str``: Arrow builds a
    string column from ``str`` values faster than from ``bytes``, which it checks for UTF-8 one by one."""
    try:
        return orjson.dumps(value, default=_json_default, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return _document_text(value, _json_default)


def _document_text(value: Any, default: Callable[[Any], Any] = str) -> str:
    """``json.dumps``'s JSON of ``value`` for a JSON column (a run's config and metadata), lone surrogates as U+FFFD:
    DuckDB's JSON refuses their escapes (``"\\ud800"``), and so would every strict reader of the column."""
    return well_formed_text(json.dumps(value, default=default, ensure_ascii=False))


def _json_default(value: Any) -> Any:
    """What JSON cannot hold as is: a model (the trajectory criterion's details name the calls) as its fields,
    anything else as text."""
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else str(value)


def _pack_cases(results: list[EvalCaseResult]) -> bytes:
    """``results`` as one zstd-compressed JSON array, serialised case by case into the compressor (the
    text of a large run is never held whole)."""
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "zstd") as packed:
        packed.write(b"[")
        for index, result in enumerate(results):
            if index:
                packed.write(b",")
            packed.write(_CASE.dump_json(result))
        packed.write(b"]")
    return bytes(sink.getvalue().to_pybytes())


def _unpack_cases(blob: bytes) -> list[EvalCaseResult]:
    return _CASE_LIST.validate_json(_unpacked(blob))


def _unpacked(blob: bytes) -> bytes:
    """The JSON array of case results that :func:`_pack_cases` compressed into ``blob``."""
    return pa.input_stream(pa.py_buffer(blob), compression="zstd").read()


# A run id names its run in URLs (/ui/runs/<id>, /ui/api/runs/<id>), so it is one path segment that needs no
# escaping and cannot be "." or "..": what new_run_id and the online worker (worker:<rule>:<window>) make.
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+-]{0,199}")


def check_run_id(run_id: str) -> str:
    """``run_id`` if it can name a run; else InvalidValueError saying what a run id may hold."""
    if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
        raise InvalidValueError(
            f"run id {run_id!r} cannot name a run: use 1 to 200 letters, digits and . _ : @ + -, starting with a "
            "letter or digit (the id is part of the run's address in the UI and its API)"
        )
    return run_id


def new_run_id() -> str:
    """A fresh, sortable grading-run id: ``run-YYYYmmdd-HHMMSS-xxxxxx``."""
    return f"run-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def _columns(table: str, columns: list[list[Any]]) -> pa.Table:
    """The rows whose values ``columns`` holds (in the table's column order, but for its tenant) as an Arrow
    table of the table's row schema."""
    schema = _ROW_SCHEMAS[table]
    return pa.table([pa.array(column, field.type) for column, field in zip(columns, schema)], schema)


def list_runs(store: RunSink, limit: int = 20, kind: str | None = None) -> list[RunSummary]:
    """Recorded runs, newest first (only those of ``kind`` when given)."""
    rows = store.query(
        "SELECT run_id, created_at, kind, eval_set_id, total_cases, passed_cases, failed_cases, error_cases, "
        "pass_rate FROM eval_runs WHERE ? IS NULL OR kind = ? ORDER BY created_at DESC, run_id DESC LIMIT ?",
        [kind, kind, limit],
    ).rows
    return [RunSummary(*row) for row in rows]


def load_run(store: RunSink, run_id: str) -> EvalReport:
    """The recorded report of a run (an id prefix is accepted when unique)."""
    found, text, packed = _run_row(store, run_id)
    if text is None:
        return _casewise_report(store, found)
    report = EvalReport.model_validate_json(text)
    if packed is not None:
        report.results = _unpack_cases(packed)
    return report


def load_run_outcomes(store: RunSink, run_id: str) -> RunOutcomes:
    """What ``gate`` and ``diff`` read of a recorded run (an id prefix is accepted when unique): its cases'
    verdicts and trajectories, without building the rest of each case (:mod:`tracegrade.evaluation.run_outcomes`)."""
    found, text, packed = _run_row(store, run_id)
    if text is None:
        eval_set_id, metadata = store.query(
            "SELECT eval_set_id, metadata FROM eval_runs WHERE run_id = ?", [found]
        ).rows[0]
        cases = store.query("SELECT result FROM eval_run_cases WHERE run_id = ? ORDER BY eval_id", [found]).rows
        return RunOutcomes(
            eval_set_id=eval_set_id,
            results=case_outcomes("[" + ",".join(row[0] for row in cases) + "]"),
            metadata=json.loads(metadata) if metadata else {},
        )
    outcomes = run_outcomes(text)
    if packed is not None:
        outcomes.results = case_outcomes(_unpacked(packed))
    return outcomes


def _run_row(store: RunSink, run_id: str) -> tuple[str, str | None, bytes | None]:
    """The id, report text and packed cases of the one run ``run_id`` names (its id, or a unique prefix of it)."""
    rows = store.query("SELECT run_id, report, case_results FROM eval_runs WHERE starts_with(run_id, ?)", [run_id]).rows
    exact = [r for r in rows if r[0] == run_id]
    if exact:
        rows = exact
    if not rows:
        raise NotFoundError(f"no grading run {run_id!r} in the store (list them with `tracegrade runs`)")
    if len(rows) > 1:
        shown = ", ".join(r[0] for r in rows[:5])
        raise InvalidValueError(f"run id prefix {run_id!r} is ambiguous: {shown}; give more of the id")
    found, text, packed = rows[0]
    return found, text, packed


def _casewise_report(store: RunSink, run_id: str) -> EvalReport:
    """The report of a run recorded case by case, from its row and its cases (in eval id order)."""
    eval_set_id, name, config, metadata, created_at = store.query(
        "SELECT eval_set_id, eval_set_name, config, metadata, created_at FROM eval_runs WHERE run_id = ?", [run_id]
    ).rows[0]
    cases = store.query("SELECT result FROM eval_run_cases WHERE run_id = ? ORDER BY eval_id", [run_id]).rows
    report = EvalReport.create(
        eval_set_id,
        [EvalCaseResult.model_validate_json(row[0]) for row in cases],
        name or "",
        config_used=json.loads(config) if config else {},
        metadata=json.loads(metadata) if metadata else {},
    )
    report.timestamp = created_at.replace(tzinfo=timezone.utc).timestamp()
    return report
