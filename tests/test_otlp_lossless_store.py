"""Version 12 of the store keeps a record's whole OTLP envelope: migrating a version 11 file keeps every row (and
every log record's key), a lake made at version 11 gains the columns with its rows reading the defaults, the
decoders bound the envelope as they bound other attributes, and the in-process collector keeps it too."""

from __future__ import annotations

import inspect
from datetime import datetime
from importlib import resources
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from opentelemetry._logs import LogRecord
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from tests.support import pg_cluster
from tests.support.pg_cluster import PgServer
from tests.support.store_records import make_log, make_span
from tracegrade.capture.collector import TrajectoryCollector
from tracegrade.capture.log_capture import CollectorLogProcessor
from tracegrade.cli.stored_records import Selection, log_pages, span_pages
from tracegrade.errors import DecodeError
from tracegrade.ingest.decode import DecodeLimits, decode_logs_json, decode_traces_proto
from tracegrade.models.span import LogRecordData, SpanRecord
from tracegrade.store import TraceStore
from tracegrade.store.database import insert_arrow
from tracegrade.store.lake import LakeStore
from tracegrade.store.prepared import prepare_write
from tracegrade.store.schema import MIGRATIONS, SCHEMA_VERSION

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

# version 12's columns (spelled out: the test runs against a tracegrade without them too)
NEW_SPAN_COLUMNS = [
    "resource_schema_url",
    "resource_dropped_attributes_count",
    "scope_attributes",
    "scope_schema_url",
    "scope_dropped_attributes_count",
]
ENVELOPE_COLUMNS = ", ".join(NEW_SPAN_COLUMNS)
NEW_LOG_COLUMNS = ["scope_version", *NEW_SPAN_COLUMNS]
DEFAULTS = ("", 0, "{}", "", 0)
SCHEMA_URL = "https://opentelemetry.io/schemas/1.21.0"


def _enveloped(span: SpanRecord | LogRecordData) -> SpanRecord | LogRecordData:
    span.resource_schema_url = SCHEMA_URL
    span.resource_dropped_attributes_count = 1
    span.scope_attributes = {"team": "search"}
    span.scope_schema_url = SCHEMA_URL + "/scope"
    span.scope_dropped_attributes_count = 2
    return span


def _all_rows(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple]:
    # a trace's mapper revision is not this test's: the migrated store's read NULL (built by an older tracegrade)
    columns = "* EXCLUDE (mapper_revision)" if table.endswith("traces") else "*"
    return con.execute(f"SELECT {columns} FROM {table} ORDER BY ALL").fetchall()


def test_a_version_11_store_migrates_keeping_every_row_and_log_key(tmp_path: Path) -> None:
    donor_path, path = tmp_path / "donor.duckdb", tmp_path / "v11.duckdb"
    spans = [make_span(1, 1, name="agent"), make_span(1, 2, parent=1, scope_name="lib", scope_version="2")]
    logs = [make_log(1, 1), make_log(1, 2, evaluation=True), make_log(None, 3)]
    with TraceStore(donor_path) as donor:  # what version 12 stores of records that carry no more than v11 kept
        donor.write(spans, logs)
        donor.rebuild_trajectories([spans[0].trace_id])
    con = duckdb.connect(str(path))  # the same rows in a store as version 11 left it
    con.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, description VARCHAR, applied_at TIMESTAMP)")
    for migration in MIGRATIONS[:11]:
        con.execute(resources.files("tracegrade.store").joinpath(migration.script).read_text(encoding="utf-8"))
        con.execute("INSERT INTO schema_version VALUES (?, 'v11', now())", [migration.version])
    con.execute(f"ATTACH '{donor_path}' AS donor (READ_ONLY)")
    tables = ["spans", "logs", "evaluations", "traces", "tool_calls", "llm_calls", "node_visits"]
    excluded = {"spans": NEW_SPAN_COLUMNS, "logs": NEW_LOG_COLUMNS, "traces": ["mapper_revision"]}  # v13's too
    for table in tables:
        left_out = f" EXCLUDE ({', '.join(excluded[table])})" if table in excluded else ""
        con.execute(f"INSERT INTO main.{table} BY NAME SELECT *{left_out} FROM donor.{table}")
    expected = {table: _all_rows(con, f"donor.{table}") for table in tables}
    con.close()

    with TraceStore(path) as store:
        assert store.query("SELECT max(version) FROM schema_version").rows == [(SCHEMA_VERSION,)]
        migrated = store._con  # the rows exactly as version 12 writes them, every column
        for table in tables:
            assert _all_rows(migrated, table) == expected[table], table
        # log keys did not change: the same batch sent again (an exporter's retry across the upgrade) is a duplicate
        again = store.write(spans, logs)
        assert (again.spans_inserted, again.logs_inserted) == (0, 0)
        # a record that differs only by its envelope is another record
        assert store.write([], [_enveloped(make_log(1, 1))]).logs_inserted == 1


def test_a_lake_made_at_version_11_gains_the_columns_its_rows_reading_the_defaults(
    pg_server: PgServer, tmp_path: Path
) -> None:
    location = f"ducklake:postgres:{pg_server.new_database()}"
    old_span, old_log = make_span(5, 1, name="old"), make_log(5, 1)
    with LakeStore(location, data_path=tmp_path / "data") as old:  # the lake as version 11 made it, with rows
        for table, columns in (("spans", NEW_SPAN_COLUMNS), ("logs", NEW_LOG_COLUMNS)):
            for column in columns:
                old._con.execute(f"ALTER TABLE lake.raw.{table} DROP COLUMN {column}")
        old._con.execute("DELETE FROM lake.main.schema_version WHERE version >= 12")
        prepared = prepare_write([old_span], [old_log])
        stamp = pa.array([datetime(2025, 1, 1)], pa.timestamp("us"))
        assert prepared.spans is not None and prepared.logs is not None
        insert_arrow(
            old._con, "spans", prepared.spans.drop_columns(NEW_SPAN_COLUMNS).append_column("received_at", stamp)
        )
        insert_arrow(old._con, "logs", prepared.logs.drop_columns(NEW_LOG_COLUMNS).append_column("received_at", stamp))
    with LakeStore(location, data_path=tmp_path / "data") as lake:
        assert lake.query("SELECT max(version) FROM schema_version").rows == [(SCHEMA_VERSION,)]
        envelope = ENVELOPE_COLUMNS.replace("scope_attributes", "scope_attributes::VARCHAR")
        assert lake.query(f"SELECT {envelope} FROM spans").rows == [DEFAULTS]
        assert lake.query(f"SELECT scope_version, {envelope} FROM logs").rows == [("", *DEFAULTS)]
        new_span, new_log = _enveloped(make_span(5, 2, parent=1)), _enveloped(make_log(5, 2))
        new_log.scope_version = "3.1"
        lake.write([new_span], [new_log])
        spans = {s.span_id: s for page in span_pages(lake, Selection()) for s in page}
        records = {r.time_ns: r for page in log_pages(lake, Selection()) for r in page}
    assert spans == {old_span.span_id: old_span, new_span.span_id: new_span}
    assert records == {old_log.time_ns: old_log, new_log.time_ns: new_log}


def test_decoding_bounds_the_envelope_as_other_attributes() -> None:
    """Resource and scope attributes past ``max_attributes_per_span`` are dropped and counted in their own dropped
    count, added to what the sender dropped; schema URLs are cut as long strings are."""
    limits = DecodeLimits(max_attributes_per_span=2, max_attribute_value_bytes=64)
    request = ExportTraceServiceRequest()
    block = request.resource_spans.add(schema_url="u" * 100)
    block.resource.dropped_attributes_count = 1
    for n in range(5):
        block.resource.attributes.add(key=f"r{n}").value.int_value = n
    scope_spans = block.scope_spans.add(schema_url="https://s")
    scope_spans.scope.dropped_attributes_count = 7
    for n in range(3):
        scope_spans.scope.attributes.add(key=f"s{n}").value.string_value = "v"
    scope_spans.spans.add(
        trace_id=b"\1" * 16, span_id=b"\2" * 8, name="s", start_time_unix_nano=1, end_time_unix_nano=2
    )
    (span,) = decode_traces_proto(request.SerializeToString(), limits).spans
    assert span.resource == {"r0": 0, "r1": 1} and span.resource_dropped_attributes_count == 1 + 3
    assert span.scope_attributes == {"s0": "v", "s1": "v"} and span.scope_dropped_attributes_count == 7 + 1
    assert span.resource_schema_url.startswith("u" * 64 + "…[truncated 36 bytes]")
    assert span.scope_schema_url == "https://s"

    many = [{"key": f"k{n}", "value": {"intValue": str(n)}} for n in range(4)]
    body = {
        "resourceLogs": [
            {
                "resource": {"attributes": many, "droppedAttributesCount": "3"},
                "schemaUrl": SCHEMA_URL,
                "scopeLogs": [
                    {
                        "scope": {"name": "n", "version": "v", "attributes": many},
                        "schemaUrl": SCHEMA_URL,
                        "logRecords": [{"timeUnixNano": "5"}],
                    }
                ],
            }
        ]
    }
    (record,) = decode_logs_json(body, limits).records
    assert (record.resource_dropped_attributes_count, record.scope_dropped_attributes_count) == (3 + 2, 2)
    assert record.scope_attributes == {"k0": 0, "k1": 1} and record.scope_version == "v"
    assert record.resource_schema_url == record.scope_schema_url == SCHEMA_URL


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        (
            {"scopeLogs": [{"scope": {"droppedAttributesCount": -1}}]},
            "resourceLogs[0].scopeLogs[0].scope.droppedAttributesCount is out of range for a uint32",
        ),
        (
            {"scopeLogs": [{"scope": {"attributes": {"k": 1}}}]},
            "resourceLogs[0].scopeLogs[0].scope.attributes must be an array",
        ),
        ({"resource": {"droppedAttributesCount": "x"}}, "resourceLogs[0].resource.droppedAttributesCount must be an"),
        ({"schemaUrl": 3}, "resourceLogs[0].schemaUrl must be a string, got number"),
        ({"scopeLogs": [{"schemaUrl": ["u"]}]}, "resourceLogs[0].scopeLogs[0].schemaUrl must be a string, got array"),
    ],
)
def test_a_malformed_envelope_refuses_the_request_naming_where(block: dict, problem: str) -> None:
    with pytest.raises(DecodeError) as refused:
        decode_logs_json({"resourceLogs": [block]})
    assert problem in str(refused.value)


def test_the_in_process_collector_keeps_the_envelope(tmp_path: Path) -> None:
    """Spans from the SDK's ReadableSpan and log records from its processors carry the envelope the SDK's OTLP
    exporters would send, and a store writes it."""
    collector = TrajectoryCollector()
    provider = TracerProvider(resource=Resource({"service.name": "in-process"}, schema_url=SCHEMA_URL))
    provider.add_span_processor(collector)
    with_attributes = "attributes" in inspect.signature(TracerProvider.get_tracer).parameters
    scope_attributes = {"team": "search", "shards": [1, 2]} if with_attributes else {}
    extra = {"attributes": scope_attributes} if with_attributes else {}
    tracer = provider.get_tracer("inproc.alpha", "1.0", schema_url=SCHEMA_URL + "/alpha", **extra)
    loggers = LoggerProvider(resource=Resource({"service.name": "in-process"}, schema_url=SCHEMA_URL))
    loggers.add_log_record_processor(CollectorLogProcessor(collector.add_log))
    logger = loggers.get_logger("inproc.logs", "2.0", schema_url=SCHEMA_URL + "/logs", **extra)
    with tracer.start_as_current_span("work") as span:
        logger.emit(LogRecord(body="hello"))
        trace_id = f"{span.get_span_context().trace_id:032x}"
    with provider.get_tracer("inproc.plain").start_as_current_span("plain") as other:
        plain_trace = f"{other.get_span_context().trace_id:032x}"
    provider.shutdown()
    loggers.shutdown()

    (work,) = collector.spans_for_trace(trace_id)
    assert (work.resource_schema_url, work.scope_attributes, work.scope_schema_url) == (
        SCHEMA_URL,
        scope_attributes,
        SCHEMA_URL + "/alpha",
    )
    (plain,) = collector.spans_for_trace(plain_trace)
    assert (plain.scope_name, plain.scope_attributes, plain.scope_schema_url) == ("inproc.plain", {}, "")
    (log,) = collector.logs_for()
    assert (log.scope_name, log.scope_version, log.scope_schema_url) == ("inproc.logs", "2.0", SCHEMA_URL + "/logs")
    assert (log.resource_schema_url, log.scope_attributes) == (SCHEMA_URL, scope_attributes)

    with TraceStore(tmp_path / "inproc.duckdb") as store:
        store.write([work, plain], [log])
        envelope = ENVELOPE_COLUMNS.replace("scope_attributes", "scope_attributes->>'team'")
        assert sorted(store.query(f"SELECT scope_name, {envelope} FROM spans").rows) == [
            ("inproc.alpha", SCHEMA_URL, 0, scope_attributes.get("team"), SCHEMA_URL + "/alpha", 0),
            ("inproc.plain", SCHEMA_URL, 0, None, "", 0),
        ]
        assert store.query(f"SELECT scope_version, {envelope} FROM logs").rows == [
            ("2.0", SCHEMA_URL, 0, scope_attributes.get("team"), SCHEMA_URL + "/logs", 0)
        ]
