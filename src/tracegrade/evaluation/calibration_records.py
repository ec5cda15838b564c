"""Judge calibrations kept in the store: the ``calibrations`` table, beside the grading runs' tables.

``tracegrade calibrate --store STORE`` writes each entry here as well as to the calibration file, so a
judge's agreement with human labels is queryable beside the runs it graded::

    SELECT criterion, judge_model, prompt_version, kappa, created_at FROM calibrations ORDER BY created_at;

One row per (criterion, judge model, prompt version), as in the file: calibrating again replaces it. The
measures have their own columns; the whole entry (confusion matrix, self-consistency, per-item results) is
in ``entry``. The table is part of the store's schema (SCHEMA.md), on a DuckDB file and a lake alike.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa

from tracegrade.evaluation.run_records import RunSink
from tracegrade.store.tenancy import DEFAULT_TENANT, with_tenant

__all__ = ["record_calibrations"]

_MEASURES = ("accuracy", "kappa", "kappa_linear", "kappa_quadratic", "spearman")


def record_calibrations(store: RunSink, entries: Sequence[dict[str, Any]], tenant: str = DEFAULT_TENANT) -> int:
    """Write calibration entries (as ``tracegrade.evaluation.calibration.calibrate`` makes them) into
    ``store`` as ``tenant``'s, replacing its rows with the same criterion, judge model and prompt version;
    returns how many."""
    if not entries:
        return 0
    columns: dict[str, list[Any]] = {
        "criterion": [str(e["criterion"]) for e in entries],
        "judge_model": [str(e["judge_model"]) for e in entries],
        "prompt_version": [str(e["prompt_version"]) for e in entries],
        "created_at": [_utc(str(e["created_at"])) for e in entries],
        "slot": [e.get("slot") for e in entries],
        "threshold": [e.get("threshold") for e in entries],
        "num_samples": [e.get("num_samples") for e in entries],
        "labelled_items": [e.get("labelled_items") for e in entries],
        "items": [e.get("items") for e in entries],
        **{name: [e.get(name) for e in entries] for name in _MEASURES},
        "entry": [json.dumps(e, default=str) for e in entries],
    }
    types = {"created_at": pa.timestamp("us"), "threshold": pa.float64(), "num_samples": pa.int32()}
    types |= {"labelled_items": pa.int32(), "items": pa.int32(), **{name: pa.float64() for name in _MEASURES}}
    table = pa.table({name: pa.array(values, types.get(name, pa.string())) for name, values in columns.items()})
    store.write_records({"calibrations": with_tenant(table, tenant)})
    return table.num_rows


def _utc(stamp: str) -> datetime:
    """An ISO time (as calibration entries carry it) as naive UTC, the store's convention."""
    moment = datetime.fromisoformat(stamp)
    return moment.astimezone(timezone.utc).replace(tzinfo=None) if moment.tzinfo else moment
