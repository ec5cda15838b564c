"""Evaluation results other tools sent as OpenTelemetry events, one row each in the ``evaluations`` table.

A ``gen_ai.evaluation.result`` event is a log record (its event name, or before OTel SDK 1.35 its
``event.name`` attribute, says so) whose attributes follow the GenAI semantic conventions:
``gen_ai.evaluation.name``, ``gen_ai.evaluation.score.value``, ``gen_ai.evaluation.score.label``,
``gen_ai.evaluation.explanation``, ``error.type``, with the run and case ids as ``test.suite.run.id`` /
``test.case.id`` (or tracegrade's ``tracegrade.run.id`` / ``tracegrade.case.id``). tracegrade's own
``--emit-otlp`` sends these, and so may any evaluator. The record stays in ``logs`` as received; the store
also writes its row here, in the same transaction, so evaluations join ``traces`` on ``trace_id``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["EVALUATION_EVENT", "evaluation_rows"]

EVALUATION_EVENT = "gen_ai.evaluation.result"

_RUN_KEYS = ("test.suite.run.id", "tracegrade.run.id")
_CASE_KEYS = ("test.case.id", "tracegrade.case.id")
# copied from the record as they are; the store's logs layout has received_at appended
_FROM_LOGS = (
    "log_key", "trace_id", "span_id", "time", "time_ns", "service_name", "attributes", "received_at", "tenant"
)  # fmt: skip


def evaluation_rows(logs: pa.Table) -> pa.Table | None:
    """The ``evaluations`` rows of the evaluation events among ``logs`` (rows in the ``logs`` table's
    layout, ``received_at`` included); None when there are none, the usual case."""
    if logs.num_rows == 0:
        return None
    events = logs.filter(pc.equal(logs.column("event_name"), EVALUATION_EVENT))
    if events.num_rows == 0:
        return None
    parsed = [_attributes(text) for text in events.column("attributes").to_pylist()]
    derived = {
        "evaluation_name": pa.array([_text(a.get("gen_ai.evaluation.name")) for a in parsed], pa.string()),
        "score_value": pa.array([_number(a.get("gen_ai.evaluation.score.value")) for a in parsed], pa.float64()),
        "score_label": pa.array([_text(a.get("gen_ai.evaluation.score.label")) for a in parsed], pa.string()),
        "explanation": pa.array([_text(a.get("gen_ai.evaluation.explanation")) for a in parsed], pa.string()),
        "error_type": pa.array([_text(a.get("error.type")) for a in parsed], pa.string()),
        "run_id": pa.array([_first(a, _RUN_KEYS) for a in parsed], pa.string()),
        "case_id": pa.array([_first(a, _CASE_KEYS) for a in parsed], pa.string()),
    }
    columns = {name: events.column(name) for name in _FROM_LOGS}
    return pa.table({**columns, **derived})


def _attributes(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _number(value: Any) -> float | None:
    """A score as a float: numbers as they are, numeric strings parsed; anything else (a label sent as the
    value, a non-finite value stored as "NaN") is NULL."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _first(attributes: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    return next((_text(attributes[k]) for k in keys if attributes.get(k) not in (None, "")), None)
