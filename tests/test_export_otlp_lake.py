"""`tracegrade export --format otlp` from a lake (DuckLake on a real PostgreSQL catalog): its spans and log records,
paged through the lake as through a file (small pages too), imported into a DuckDB store, are the same record for
record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.support import pg_cluster
from tests.support.grading_cli import run_cli
from tests.support.pg_cluster import PgServer
from tests.support.store_records import make_span, rich_span
from tracegrade.cli.stored_records import Selection, log_pages, span_pages
from tracegrade.models.span import LogRecordData
from tracegrade.store.lake import LakeStore
from tracegrade.store.prepared import prepare_write

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

SPAN_COLUMNS = (
    "trace_id, span_id, parent_span_id, name, kind, service_name, scope_name, scope_version, start_ns, end_ns, "
    "status_code, status_message, attributes::VARCHAR, events::VARCHAR, links::VARCHAR, resource::VARCHAR, "
    "trace_state, flags, dropped_attributes_count, dropped_events_count, dropped_links_count"
)
LOG_COLUMNS = (
    "log_key, trace_id, span_id, time_ns, observed_time_ns, event_name, severity_number, severity_text, "
    "body::VARCHAR, attributes::VARCHAR, resource::VARCHAR, scope_name, flags, dropped_attributes_count"
)


def _sorted(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=repr)


@pytest.mark.parametrize("fmt", ["otlp", "otlp-json"])
def test_a_lake_exports_what_it_holds(pg_server: PgServer, tmp_path: Path, fmt: str) -> None:
    location = f"ducklake:postgres:{pg_server.new_database()}"
    spans = [rich_span()] + [make_span(7, n, name=f"span {n} ✓", attributes={"n": n}) for n in range(1, 40)]
    logs = [
        LogRecordData(time_ns=1_760_000_000_000_000_000 + n, trace_id=spans[1].trace_id, body={"n": n})
        for n in range(5)
    ]
    with LakeStore(location, data_path=tmp_path / "lake-data") as lake:
        lake.write_batch([prepare_write(spans, logs, "default")])
    output = tmp_path / "lake.out"
    exported = run_cli("export", "--store", location, "--format", fmt, "-o", output)
    assert exported.exit_code == 0, exported.output
    assert f"{len(spans)} spans and {len(logs)} log records" in exported.stdout
    copy = tmp_path / "b.duckdb"
    imported = run_cli("import", "--store", copy, output)
    assert imported.exit_code == 0, imported.output
    with LakeStore(location, read_only=True) as lake:
        lake_spans = lake.query(f"SELECT {SPAN_COLUMNS} FROM spans").rows
        lake_logs = lake.query(f"SELECT {LOG_COLUMNS} FROM logs").rows
        paged = [span.span_id for page in span_pages(lake, Selection(), 7) for span in page]  # small pages too
        paged_logs = [record.body for page in log_pages(lake, Selection(), 2) for record in page]
    assert sorted(paged) == sorted(span.span_id for span in spans) and len(paged_logs) == len(logs)
    with duckdb.connect(str(copy), read_only=True) as con:
        copied_spans = con.execute(f"SELECT {SPAN_COLUMNS} FROM spans").fetchall()
        copied_logs = con.execute(f"SELECT {LOG_COLUMNS} FROM logs").fetchall()
    assert len(lake_spans) == len(spans) and _sorted(copied_spans) == _sorted(lake_spans)
    assert len(lake_logs) == len(logs) and _sorted(copied_logs) == _sorted(lake_logs)
