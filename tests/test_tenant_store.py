"""Tenants in the store: rows carry their tenant, keys lead with it, a shared trace id never merges two
tenants' spans into one trajectory; on a DuckDB file and on a lake, through the writer and the journal."""

from __future__ import annotations

import time
from datetime import datetime
from importlib import resources
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from tests.support import pg_cluster
from tests.support.pg_cluster import PgServer
from tests.support.server_inprocess import running_server
from tests.support.server_requests import span_json, traces_proto, unique_trace_id
from tests.support.store_records import make_span, trace_hex
from tracegrade.ingest.intake import RECORD_KINDS, TENANT_RECORD, journal_record
from tracegrade.ingest.otlp_responses import Signal, WireFormat
from tracegrade.models.span import LogRecordData
from tracegrade.store import StoreWriter, TraceStore
from tracegrade.store.database import insert_arrow
from tracegrade.store.journal import RequestJournal
from tracegrade.store.lake import LakeStore
from tracegrade.store.prepared import prepare_write
from tracegrade.store.rows import ENVELOPE_COLUMNS
from tracegrade.store.schema import MIGRATIONS, SCHEMA_VERSION, TRACE_TABLES
from tracegrade.store.tenancy import DEFAULT_TENANT

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

SHARED = 7  # the trace number both tenants send


def _agent(name: str, answer: str) -> list:
    """One agent trace (trace SHARED) whose root and tool spans say whose it is."""
    return [
        make_span(SHARED, 70, name=f"{name}-agent", attributes={"gen_ai.operation.name": "invoke_agent"}),
        make_span(
            SHARED,
            71,
            parent=70,
            name=f"{name}-tool",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"{name}_search"},
        ),
        make_span(
            SHARED,
            72 if name == "acme" else 73,
            parent=70,
            name=f"{name}-chat",
            attributes={"gen_ai.operation.name": "chat", "gen_ai.completion": answer},
        ),
    ]


def _log(body: str) -> LogRecordData:
    return LogRecordData(trace_id=trace_hex(SHARED), span_id=f"{70:016x}", time_ns=1_760_000_000_000_000_000, body=body)


def _rows(store: TraceStore, sql: str) -> list[tuple]:
    return store.query(sql).rows


def _check_two_tenants(store: TraceStore) -> None:
    """Both tenants wrote trace SHARED with spans 70 and 71 alike: each keeps its own rows and trajectory."""
    acme = store.write(_agent("acme", "A"), [_log("same body")], tenant="acme")
    globex = store.write(_agent("globex", "G"), [_log("same body")], tenant="globex")
    assert (acme.spans_inserted, acme.logs_inserted, acme.trace_ids) == (3, 1, {trace_hex(SHARED)})
    assert (globex.spans_inserted, globex.spans_duplicate, globex.logs_inserted) == (3, 0, 1)
    again = store.write(_agent("acme", "A"), [_log("same body")], tenant="acme")  # a retry stays a duplicate
    assert (again.spans_inserted, again.spans_duplicate, again.logs_duplicate) == (0, 3, 1)
    assert sorted(store.stale_trajectories()) == [("acme", trace_hex(SHARED)), ("globex", trace_hex(SHARED))]
    assert store.rebuild_trajectories([trace_hex(SHARED)], "acme") == 1
    assert store.stale_trajectories() == [("globex", trace_hex(SHARED))]
    store.rebuild_trajectories([trace_hex(SHARED)], "globex")
    assert _rows(store, "SELECT tenant, root_name, span_count FROM traces ORDER BY tenant") == [
        ("acme", "acme-agent", 3),
        ("globex", "globex-agent", 3),
    ]
    assert _rows(store, "SELECT tenant, name FROM tool_calls ORDER BY tenant") == [
        ("acme", "acme_search"),
        ("globex", "globex_search"),
    ]
    assert {s.name for s in store.load_spans([trace_hex(SHARED)], "globex")[trace_hex(SHARED)]} == {
        "globex-agent",
        "globex-tool",
        "globex-chat",
    }
    assert [log.body for log in store.load_logs([trace_hex(SHARED)], "acme")[trace_hex(SHARED)]] == ["same body"]
    store.rebuild_trajectories([trace_hex(SHARED)], "acme")  # rebuilding one tenant's trace leaves the other's
    assert _rows(store, "SELECT tenant, count(*) FROM llm_calls GROUP BY tenant ORDER BY tenant") == [
        ("acme", 1),
        ("globex", 1),
    ]
    assert _rows(store, "SELECT count(*) FROM spans WHERE tenant = 'default'") == [(0,)]


def test_two_tenants_sharing_a_trace_id_keep_their_own_rows_and_trajectories(tmp_path: Path) -> None:
    with TraceStore(tmp_path / "tenants.duckdb") as store:
        _check_two_tenants(store)


def test_two_tenants_sharing_a_trace_id_on_a_lake(pg_server: PgServer, tmp_path: Path) -> None:
    with LakeStore(f"ducklake:postgres:{pg_server.new_database()}", data_path=tmp_path / "data") as store:
        _check_two_tenants(store)


def test_one_batch_of_two_tenants_credits_each_and_the_writer_builds_both_trajectories(tmp_path: Path) -> None:
    with TraceStore(tmp_path / "batch.duckdb") as store:
        written = store.write_batch(
            [prepare_write(_agent("acme", "A"), tenant="acme"), prepare_write(_agent("globex", "G"), tenant="globex")]
        )
        assert [r.spans_inserted for r in written.results] == [3, 3]
        assert written.rooted == {("acme", trace_hex(SHARED)), ("globex", trace_hex(SHARED))}
    writer = StoreWriter(TraceStore(tmp_path / "writer.duckdb"), settle_seconds=0.05, root_settle_seconds=0.05)
    writer.start()
    try:
        writer.submit(_agent("acme", "A"), tenant="acme").result(30)
        writer.submit(_agent("globex", "G"), tenant="globex").result(30)
        deadline = time.monotonic() + 30
        while writer.query("SELECT count(*) FROM traces").rows != [(2,)] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert writer.query("SELECT tenant, root_name FROM traces ORDER BY tenant").rows == [
            ("acme", "acme-agent"),
            ("globex", "globex-agent"),
        ]
    finally:
        writer.close()


def test_a_version_3_store_migrates_its_rows_to_the_default_tenant(tmp_path: Path) -> None:
    path = tmp_path / "v3.duckdb"
    with TraceStore(tmp_path / "donor.duckdb") as donor:
        donor.write(_agent("old", "O"), [_log("old body")])
        donor.rebuild_trajectories([trace_hex(SHARED)])
        tables = {  # the v12 columns left out too
            "spans": donor.query(f"SELECT * EXCLUDE (tenant, {ENVELOPE_COLUMNS}) FROM spans").rows,
            "logs": donor.query(f"SELECT * EXCLUDE (tenant, scope_version, {ENVELOPE_COLUMNS}) FROM logs").rows,
        }
        tables["traces"] = donor.query(
            "SELECT * EXCLUDE (tenant, tool_names, lean_execution, error_spans, mapper_revision) FROM traces"
        ).rows  # v6, v9, v11, v13 columns
        tools = donor.query("SELECT * EXCLUDE (tenant) FROM tool_calls").rows
    con = duckdb.connect(str(path))  # the store as tracegrade left it before tenants: version 3
    con.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, description VARCHAR, applied_at TIMESTAMP)")
    for migration in MIGRATIONS[:3]:
        con.execute(resources.files("tracegrade.store").joinpath(migration.script).read_text(encoding="utf-8"))
        con.execute("INSERT INTO schema_version VALUES (?, 'before tenants', now())", [migration.version])
    for table, rows in {**tables, "tool_calls": tools}.items():
        con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' for _ in rows[0])})", rows)
    con.close()

    with TraceStore(path) as store:
        assert store.query("SELECT max(version) FROM schema_version").rows == [(SCHEMA_VERSION,)]
        for table in ("spans", "logs", "traces", "tool_calls"):
            assert store.query(f"SELECT DISTINCT tenant FROM {table}").rows == [(DEFAULT_TENANT,)], table
        assert store.stale_trajectories() == []  # the copied trajectory is still current
        assert store.write(_agent("old", "O"), [_log("old body")]).spans_duplicate == 3  # keys still hold
        assert store.write(_agent("old", "O"), [_log("old body")], tenant="acme").spans_inserted == 3
        with pytest.raises(Exception, match="tenant"):  # no default is left: a row must name its tenant
            store.execute_write("INSERT INTO node_visits (trace_id, seq, name, status) VALUES ('t', 0, 'n', 'OK')")


def test_an_older_lake_gains_the_tenant_column_with_its_rows_the_default_tenants(
    pg_server: PgServer, tmp_path: Path
) -> None:
    location = f"ducklake:postgres:{pg_server.new_database()}"
    with LakeStore(location, data_path=tmp_path / "data") as old:  # made as tracegrade made it before tenants
        for table in set(TRACE_TABLES) - {"forgotten_traces"}:  # the trace tables of then (all have a tenant now)
            old._con.execute(f"ALTER TABLE {table} DROP COLUMN tenant")
        old._con.execute("DELETE FROM lake.main.schema_version WHERE version > 3")
        rows = prepare_write(_agent("old", "O")).spans.drop_columns(["tenant"])  # type: ignore[union-attr]
        stamp = pa.array([datetime(2025, 1, 1)] * rows.num_rows, pa.timestamp("us"))
        insert_arrow(old._con, "spans", rows.append_column("received_at", stamp))
    with LakeStore(location, data_path=tmp_path / "data") as store:
        assert store.query("SELECT tenant, count(*) FROM spans GROUP BY ALL").rows == [(DEFAULT_TENANT, 3)]
        store.write(_agent("old", "O"), tenant="acme")
        assert store.write(_agent("old", "O")).spans_duplicate == 3  # the old rows keep their key
        assert store.query("SELECT tenant, count(*) FROM spans GROUP BY ALL ORDER BY 1").rows == [
            ("acme", 3),
            (DEFAULT_TENANT, 3),
        ]


def test_journal_records_say_whose_request_they_hold() -> None:
    kind = RECORD_KINDS[(Signal.TRACES, WireFormat.PROTOBUF)]
    assert journal_record(kind, b"payload", DEFAULT_TENANT) == (kind, b"payload")  # as before tenants
    tagged_kind, tagged = journal_record(kind, b"payload", "acme")
    assert tagged_kind == kind | TENANT_RECORD and tagged == b"\x04acmepayload"


def test_a_leftover_journal_is_replayed_into_each_records_tenant(tmp_path: Path) -> None:
    store = tmp_path / "store.duckdb"
    acme_trace, default_trace = unique_trace_id(), unique_trace_id()
    kind = RECORD_KINDS[(Signal.TRACES, WireFormat.PROTOBUF)]
    journal = RequestJournal(Path(f"{store}.journal"))
    journal.append(
        [
            journal_record(kind, traces_proto([span_json(acme_trace, i) for i in range(3)]), "acme"),
            journal_record(kind, traces_proto([span_json(default_trace, i) for i in range(2)]), DEFAULT_TENANT),
        ]
    )
    del journal  # left behind, as by a receiver killed before committing
    with running_server(store):
        pass
    with TraceStore(store, read_only=True) as stored:
        assert stored.query("SELECT tenant, trace_id, count(*) FROM spans GROUP BY ALL ORDER BY 1").rows == [
            ("acme", acme_trace, 3),
            (DEFAULT_TENANT, default_trace, 2),
        ]
        assert stored.query("SELECT tenant, trace_id FROM traces ORDER BY 1").rows == [
            ("acme", acme_trace),
            (DEFAULT_TENANT, default_trace),
        ]


def test_import_with_tenant_stores_and_maps_the_files_as_that_tenants(tmp_path: Path) -> None:
    from tests.support.grading_cli import run_cli
    from tests.support.store_records import FIXTURES

    store = tmp_path / "imported.duckdb"
    for tenant in ("acme", None):  # the same file imported by an operator for acme, then as the default tenant
        args = ["import", FIXTURES[0], "--store", store, *(["--tenant", tenant] if tenant else [])]
        done = run_cli(*args)
        assert done.exit_code == 0, done.output
    with TraceStore(store, read_only=True) as opened:
        spans = opened.query("SELECT tenant, count(*) FROM spans GROUP BY ALL ORDER BY 1").rows
        traces = opened.query("SELECT tenant, count(*) FROM traces GROUP BY ALL ORDER BY 1").rows
    assert [tenant for tenant, _ in spans] == ["acme", DEFAULT_TENANT] and spans[0][1] == spans[1][1]
    assert traces == [("acme", traces[0][1]), (DEFAULT_TENANT, traces[0][1])]
    refused = run_cli("import", FIXTURES[0], "--store", store, "--tenant", "not a name")
    assert refused.exit_code != 0 and "not a valid tenant name" in refused.output
