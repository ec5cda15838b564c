"""OTLP export round trips of the values an SDK's exporter does not send but other senders do (a Collector, OTLP/JSON
posts): maps and nested arrays as attribute values, empty values inside arrays and maps, int64's extremes, bytes and
non-finite floats (stored as text), an unspecified kind, empty event names and zero event times, bodies of every
type. Written to a real store, exported, imported: every column the same."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.support.grading_cli import run_cli
from tests.support.store_records import rich_span
from tracegrade.models.span import LogRecordData, SpanEvent, SpanLink
from tracegrade.store.prepared import prepare_write
from tracegrade.store.trace_store import TraceStore

_VALUES: dict[str, Any] = {
    "map": {"a": [1, 2.5, "x", None, True], "b": {}, "c": {"d": {"e": []}}},
    "nested.arrays": [[1, [2, [3]]], [], [None]],
    "nothing": None,
    "int.min": -(2**63),
    "int.max": 2**63 - 1,
    "double.big": 1.7976931348623157e308,
    "double.negative.zero.ish": -1e-300,
    "not.a.number": float("nan"),  # stored as the text "NaN"
    "infinite": float("-inf"),
    "bytes": b"\x00\x01\xfe",  # stored as base64 text
    "": "an empty key",
}


def _spans() -> list[Any]:
    base = rich_span()
    plain = replace(
        base,
        span_id="1" * 16,
        parent_span_id=None,
        name="plain ✓",
        kind="UNSPECIFIED",
        attributes=dict(_VALUES),
        events=[SpanEvent("", 0, {}), SpanEvent("e", base.start_ns, {"v": _VALUES["map"]})],
        links=[SpanLink("3" * 32, "4" * 16)],
        status_code="UNSET",
        status_message="",
        resource={},
        scope_name="",
        scope_version="",
        trace_state="",
        flags=0,
        dropped_attributes_count=0,
        dropped_events_count=0,
        dropped_links_count=0,
    )
    same_start = replace(plain, span_id="5" * 16, end_ns=plain.start_ns, status_code="OK")
    return [base, plain, same_start]


def _logs() -> list[LogRecordData]:
    trace = rich_span().trace_id
    bodies: list[Any] = [{"k": [1, None]}, [1, "two", 3.5], None, 42, -0.5, False, "", _VALUES["map"]]
    logs = [
        LogRecordData(time_ns=1_760_000_000_000_000_000 + n, trace_id=trace, span_id="1" * 16, body=body)
        for n, body in enumerate(bodies)
    ]
    logs.append(
        LogRecordData(
            time_ns=1_760_000_000_000_000_123,  # a record sent with its observed time only: decoders time it so
            observed_time_ns=1_760_000_000_000_000_123,
            event_name="gen_ai.choice",
            attributes=dict(_VALUES),
            severity_number=24,
            severity_text="FATAL4",
            resource={"service.name": "logs-only", "n": 1},
            scope_name="logs.scope",
            flags=1,
            dropped_attributes_count=7,
        )
    )
    return logs


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("export-otlp-values") / "a.duckdb"
    with TraceStore(path) as opened:
        opened.write_batch([prepare_write(_spans(), _logs(), "default")])
    return path


def _rows(store: Path, table: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(store), read_only=True) as con:
        columns = [row[0] for row in con.execute(f"DESCRIBE {table}").fetchall() if row[0] != "received_at"]
        return con.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY ALL").fetchall()


@pytest.mark.parametrize(("fmt", "name"), [("otlp", "values.otlp"), ("otlp-json", "values.jsonl")])
def test_every_value_comes_back_as_it_was_stored(store: Path, tmp_path: Path, fmt: str, name: str) -> None:
    exported = run_cli("export", "--store", store, "--format", fmt, "-o", tmp_path / name)
    assert exported.exit_code == 0, exported.output
    imported = run_cli("import", "--store", tmp_path / "b.duckdb", tmp_path / name)
    assert imported.exit_code == 0, imported.output
    for table in ("spans", "logs"):
        original, copied = _rows(store, table), _rows(tmp_path / "b.duckdb", table)
        assert len(copied) == len(original) > 0
        for before, after in zip(original, copied):
            assert after == before
