"""TraceStore on real DuckDB files: schema, writes, duplicates, round trips, trajectories, errors."""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path

import duckdb
import pytest

from tests.support.imports import modules_loaded_by
from tracegrade.errors import StoreError, StoreLockedError
from tracegrade.ingest.intake import RECORD_KINDS, journal_record
from tracegrade.ingest.otlp_responses import Signal, WireFormat
from tracegrade.models.span import LogRecordData
from tracegrade.store import (
    SCHEMA_VERSION,
    TABLES,
    StoreWriter,
    TraceStore,
    check_read_only,
    open_store_for_read,
)
from tracegrade.store.duckdb_api import ARROW_BATCH_ROWS
from tracegrade.store.journal import RequestJournal, journal_directory
from tracegrade.store.prepared import prepare_write
from tracegrade.store.rows import ENVELOPE_COLUMNS, decompress_json, span_from_row
from tracegrade.store.tenancy import DEFAULT_TENANT
from tracegrade.trajectory import map_spans

from .support.server_process import ServerProcess
from .support.server_requests import query, span_json, traces_json
from .support.store_records import FIXTURES, decode_fixture, holding_store, make_span, rich_span, trace_hex
from .test_store_writer import wait_for

_JSON_TRACES = RECORD_KINDS[(Signal.TRACES, WireFormat.JSON)]


@pytest.fixture
def store(tmp_path):
    with TraceStore(tmp_path / "store.duckdb") as opened:
        yield opened


# ------------------------------------------------------------------------------------------- schema


def test_new_store_has_every_table_and_records_its_schema_version(tmp_path):
    path = tmp_path / "new.duckdb"
    TraceStore(path).close()
    TraceStore(path).close()  # reopening must not re-apply the migration
    with TraceStore(path, read_only=True) as store:
        versions = store.query("SELECT version, description, applied_at FROM schema_version").rows
        tables = {r[0] for r in store.query("SELECT table_name FROM information_schema.tables").rows}
    assert [v[0] for v in versions] == list(range(1, SCHEMA_VERSION + 1))  # every migration, in order
    assert isinstance(versions[0][2], datetime)
    assert set(TABLES) | {"schema_version"} <= tables


def test_a_version_1_store_migrates_keeping_spans_and_rebuilding_trajectories(tmp_path):
    path = tmp_path / "v1.duckdb"
    with TraceStore(tmp_path / "donor.duckdb") as donor:
        donor.write([make_span(1, 1), make_span(1, 2, parent=1)])
        spans = donor.query(f"SELECT * EXCLUDE (tenant, {ENVELOPE_COLUMNS}) FROM spans ORDER BY span_id").rows
    v1 = resources.files("tracegrade.store").joinpath("schema_v1.sql").read_text(encoding="utf-8")
    con = duckdb.connect(str(path))  # a store as tracegrade 0.1 left it: version 1, JSON executions
    con.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, description VARCHAR, applied_at TIMESTAMP)")
    con.execute(v1)
    con.execute("INSERT INTO schema_version VALUES (1, 'v1', now())")
    con.executemany(f"INSERT INTO spans VALUES ({', '.join('?' for _ in spans[0])})", spans)
    con.execute("INSERT INTO node_visits (trace_id, seq, name, status) VALUES (?, 0, 'old', 'OK')", [trace_hex(1)])
    con.close()

    writer = StoreWriter(TraceStore(path), settle_seconds=0.05)
    writer.start()  # migrates, then rebuilds the traces that lost their rows
    try:
        wait_for(lambda: writer.query("SELECT count(*) FROM traces").rows == [(1,)], "the rebuilt trajectory")
        assert writer.query("SELECT max(version) FROM schema_version").rows == [(SCHEMA_VERSION,)]
        assert writer.query("SELECT count(*) FROM spans").rows == [(2,)]
        assert writer.query("SELECT name FROM node_visits").rows != [("old",)]
        (blob,) = writer.query("SELECT execution FROM traces").rows[0]
        assert json.loads(decompress_json(blob))["trace_ids"] == [trace_hex(1)]
    finally:
        writer.close()


def test_interface_columns_exist(store):
    expected = {
        "spans": "trace_id span_id parent_span_id name kind service_name scope_name start_time end_time start_ns "
        "end_ns duration_ms status_code status_message attributes events links resource dropped_attributes_count "
        "dropped_events_count dropped_links_count received_at",
        "traces": "trace_id root_name service_name start_time end_time duration_ms status convention user_query "
        "final_response content_captured span_count llm_calls tool_calls input_tokens output_tokens total_tokens "
        "eval_set_id case_id turn_index run_id conversation_id dropped_attributes mapping_issues execution updated_at",
        "node_visits": "trace_id seq name span_id parallel_group start_time duration_ms status",
        "tool_calls": "trace_id seq name call_id arguments result args_captured error duration_ms span_id",
        "llm_calls": "trace_id seq model provider node input_tokens output_tokens total_tokens output_text span_id "
        "duration_ms",
    }
    for table, columns in expected.items():
        present = set(store.query(f"SELECT * FROM {table} LIMIT 0").columns)
        assert set(columns.split()) <= present, (table, set(columns.split()) - present)


# ------------------------------------------------------------------------------------------- writes


def test_same_span_twice_in_one_batch_is_stored_once(store):
    span = make_span(1, 1)
    result = store.write([span, span, make_span(1, 2)])
    assert (result.spans_inserted, result.spans_duplicate) == (2, 1)
    assert result.trace_ids == {trace_hex(1)}
    assert store.query("SELECT count(*) FROM spans").rows == [(2,)]


def test_resent_span_is_stored_once_and_changes_no_trace(store):
    store.write([make_span(1, 1), make_span(1, 2)])
    again = store.write([make_span(1, 2), make_span(2, 3)])
    assert (again.spans_inserted, again.spans_duplicate) == (1, 1)
    assert again.trace_ids == {trace_hex(2)}
    rows = store.query("SELECT trace_id, span_id, count(*) FROM spans GROUP BY ALL ORDER BY ALL").rows
    assert [r[2] for r in rows] == [1, 1, 1]


def test_span_fields_are_stored_as_columns_and_json(store):
    span = rich_span()
    store.write([span])
    row = store.query("SELECT * FROM spans").to_dicts()[0]
    assert row["trace_id"] == span.trace_id
    assert row["span_id"] == span.span_id
    assert row["parent_span_id"] == span.parent_span_id
    assert row["name"] == span.name
    assert row["kind"] == span.kind
    assert row["service_name"] == "svc-rich"
    assert row["scope_name"] == span.scope_name
    assert row["scope_version"] == span.scope_version
    assert (row["start_ns"], row["end_ns"]) == (span.start_ns, span.end_ns)
    assert row["start_time"] == datetime(1970, 1, 1) + timedelta(microseconds=span.start_ns // 1000)
    assert row["end_time"] == datetime(1970, 1, 1) + timedelta(microseconds=span.end_ns // 1000)
    assert row["duration_ms"] == pytest.approx((span.end_ns - span.start_ns) / 1e6)
    assert (row["status_code"], row["status_message"]) == (span.status_code, span.status_message)
    assert json.loads(row["attributes"]) == span.attributes
    assert json.loads(row["resource"]) == span.resource
    event = json.loads(row["events"])[0]
    assert (event["name"], event["time_ns"], event["attributes"], event["dropped_attributes_count"]) == (
        "exception",
        span.events[0].time_ns,
        span.events[0].attributes,
        1,
    )
    link = json.loads(row["links"])[0]
    assert (link["trace_id"], link["span_id"], link["trace_state"], link["attributes"]) == (
        "1" * 32,
        "2" * 16,
        "vendor=1",
        {"link.kind": "retry"},
    )
    assert (row["trace_state"], row["flags"]) == (span.trace_state, span.flags)
    assert (row["dropped_attributes_count"], row["dropped_events_count"], row["dropped_links_count"]) == (3, 4, 5)
    # JSON columns are real JSON: DuckDB's JSON operators read them
    assert store.query("SELECT attributes->>'$.nested.k[1].deep' IS NULL, attributes->>'text' FROM spans").rows == [
        (True, "héllo ✓")
    ]
    assert store.load_spans([span.trace_id]) == {span.trace_id: [span]}


def test_values_json_cannot_hold_are_stored_as_text(store):
    span = make_span(1, 1, attributes={"blob": b"\x00\xff", "nan": float("nan"), "inf": float("-inf")})
    store.write([span])
    stored = store.load_spans([trace_hex(1)])[trace_hex(1)][0].attributes
    assert stored == {"blob": "AP8=", "nan": "NaN", "inf": "-Infinity"}


def test_integers_beyond_64_bits_and_shared_resources_come_back_from_both_read_paths(store):
    attributes = {"big": 2**70 + 1, "small": -(2**63) - 1, "plain": [1, 2.5, "x"], "nested": {"k": [2**64 + 3]}}
    spans = [make_span(1, i, attributes=attributes, resource={"service.name": "svc"}) for i in (1, 2)]
    store.write(spans)
    assert [s.attributes for s in store.load_spans([trace_hex(1)])[trace_hex(1)]] == [attributes] * 2
    table, _ = store.load_arrow([trace_hex(1)])
    shared: dict[str, dict] = {}
    read = [span_from_row(row, shared) for row in zip(*(c.to_pylist() for c in table.columns))]
    assert [s.attributes for s in read] == [attributes] * 2
    assert read[0].resource == {"service.name": "svc"} and read[0].resource is read[1].resource


def test_text_that_is_not_valid_unicode_is_refused_by_name_and_nothing_is_written(store):
    store.write([make_span(1, 1)])
    bad_span = make_span(1, 3, name="lookup", attributes={"q": "half \ud800 pair"})
    with pytest.raises(StoreError, match=r"span 0+1/0+3 \('lookup'\): its attributes hold an unpaired surrogate"):
        store.write([make_span(1, 2), bad_span])
    bad_log = LogRecordData(time_ns=5, trace_id=trace_hex(1), span_id=f"{1:016x}", body="\udfff")
    with pytest.raises(StoreError, match=r"log record of span .* its body hold an unpaired surrogate"):
        store.write([make_span(1, 4)], [bad_log])
    assert store.query("SELECT count(*) FROM spans").rows == [(1,)]
    assert store.query("SELECT count(*) FROM logs").rows == [(0,)]


def test_logs_round_trip_and_a_resent_log_is_stored_once(store):
    log = LogRecordData(
        time_ns=1_760_000_000_000_000_001,
        trace_id=trace_hex(7),
        span_id=f"{1:016x}",
        event_name="gen_ai.user.message",
        body={"content": "hi"},
        attributes={"gen_ai.system": "openai"},
        severity_number=9,
        severity_text="INFO",
        resource={"service.name": "svc-logs"},
        scope_name="logger",
        observed_time_ns=5,
        flags=1,
        dropped_attributes_count=2,
    )
    first = store.write([], [log, log])
    second = store.write([], [log])
    assert (first.logs_inserted, first.logs_duplicate, first.trace_ids) == (1, 1, {trace_hex(7)})
    assert (second.logs_inserted, second.logs_duplicate, second.trace_ids) == (0, 1, set())
    assert store.load_logs([trace_hex(7)]) == {trace_hex(7): [log]}
    assert store.query("SELECT service_name, body->>'content' FROM logs").rows == [("svc-logs", "hi")]


def test_write_batch_commits_every_submission_in_one_transaction(store):
    written = store.write_batch([prepare_write([make_span(1, 1)]), prepare_write([make_span(1, 1), make_span(2, 2)])])
    assert [(r.spans_inserted, r.spans_duplicate) for r in written.results] == [(1, 0), (1, 1)]
    assert store.query("SELECT count(DISTINCT received_at) FROM spans").rows == [(1,)]


def test_a_write_out_of_memory_names_the_limit_and_how_to_raise_it_and_the_store_still_works(tmp_path):
    with TraceStore(tmp_path / "small.duckdb", memory_limit="16MB") as store:
        store.write([make_span(1, 1)])
        hungry = "SELECT max(length(l)) FROM (SELECT list(i::VARCHAR) AS l FROM range(5000000) t(i))"
        with pytest.raises(StoreError) as raised:
            store.execute_write(hungry)
        message = str(raised.value)
        assert "ran out of memory" in message and "its limit of 16MB" in message
        assert "--store-memory-limit" in message and "TRACEGRADE_STORE_MEMORY_LIMIT" in message
        assert "Possible solutions" not in message  # DuckDB's advice (threads, insertion order) does not apply
        assert store.write([make_span(1, 2)]).spans_inserted == 1
        assert store.query("SELECT count(*) FROM spans").rows == [(2,)]


def test_read_only_store_refuses_writes(tmp_path):
    path = tmp_path / "ro.duckdb"
    TraceStore(path).close()
    with TraceStore(path, read_only=True) as store, pytest.raises(StoreError, match="read-only"):
        store.write([make_span(1, 1)])


# ------------------------------------------------------------------------------------- trajectories


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name.removesuffix(".otlp.json"))
def test_fixture_trajectory_rows_match_expected(store, fixture):
    expected = json.loads(fixture.with_name(fixture.name.replace(".otlp.json", ".expected.json")).read_text())
    spans, logs = decode_fixture(fixture)
    written = store.write(spans, logs)
    assert store.rebuild_trajectories(written.trace_ids) == 1
    (trace_id,) = written.trace_ids

    trace = store.query("SELECT * FROM traces").to_dicts()[0]
    assert trace["trace_id"] == trace_id
    assert trace["user_query"] == expected["user_query"]
    assert trace["final_response"] == expected["final_response"]
    assert trace["content_captured"] == expected["content_captured"]
    assert trace["llm_calls"] == expected["llm_calls"]
    assert trace["span_count"] == len(spans)

    tools = store.query("SELECT name, arguments, result, call_id, args_captured FROM tool_calls ORDER BY seq").rows
    assert [
        {
            "name": name,
            "args": json.loads(args) if args is not None else None,
            "call_id": call_id,
            "result": json.loads(result) if result is not None else None,
        }
        for name, args, result, call_id, _ in tools
    ] == expected["tool_calls"]
    nodes = store.query("SELECT name FROM node_visits ORDER BY seq").rows
    assert [n[0] for n in nodes] == expected["node_order"]
    assert store.query("SELECT count(*) FROM llm_calls").rows == [(expected["llm_calls"],)]

    # the stored execution is exactly what the mapper gives in-process (offline = live parity)
    in_process = map_spans(spans, logs)
    assert json.loads(decompress_json(trace["execution"])) == json.loads(in_process.model_dump_json())
    assert trace["convention"] == in_process.convention
    assert (trace["input_tokens"], trace["output_tokens"]) == (
        in_process.token_usage.input_tokens,
        in_process.token_usage.output_tokens,
    )
    llm_tokens = store.query("SELECT sum(input_tokens), sum(output_tokens) FROM llm_calls").rows[0]
    assert llm_tokens == (trace["input_tokens"], trace["output_tokens"])


def test_rebuild_replaces_rows_and_stale_traces_are_found(store):
    spans, logs = decode_fixture(FIXTURES[0])
    trace_id = spans[0].trace_id
    store.write(spans[:-1], logs)
    assert store.stale_trajectories() == [(DEFAULT_TENANT, trace_id)]
    store.rebuild_trajectories([trace_id])
    assert store.stale_trajectories() == []
    assert store.query("SELECT span_count FROM traces").rows == [(len(spans) - 1,)]
    store.write(spans[-1:])
    assert store.stale_trajectories() == [(DEFAULT_TENANT, trace_id)]
    store.rebuild_trajectories([trace_id])
    assert store.query("SELECT count(*), max(span_count) FROM traces").rows == [(1, len(spans))]


def test_case_tags_of_a_tracegrade_turn_fill_the_case_columns(store):
    root = make_span(
        3,
        1,
        name="tracegrade.turn case-42",
        attributes={
            "tracegrade.eval_set.id": "set-1",
            "tracegrade.case.id": "case-42",
            "tracegrade.turn.index": 2,
            "tracegrade.run.id": "run-9",
            "tracegrade.turn.input": "hello",
        },
    )
    store.write([root, make_span(3, 2, parent=1, name="agent", attributes={"tracegrade.span.kind": "node"})])
    store.rebuild_trajectories([trace_hex(3)])
    row = store.query("SELECT eval_set_id, case_id, turn_index, run_id FROM traces").rows[0]
    assert row == ("set-1", "case-42", 2, "run-9")


# ------------------------------------------------------------------------------------- read-only SQL


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO spans SELECT * FROM spans",
        "UPDATE spans SET name = 'x'",
        "DELETE FROM spans",
        "DROP TABLE spans",
        "CREATE TABLE evil AS SELECT 1",
        "COPY spans TO '/tmp/tracegrade-evil.csv'",
        "ATTACH ':memory:' AS other",
        "SELECT 1; DROP TABLE spans",
        "select 1;\n-- harmless?\ndelete from spans",
        "EXPLAIN ANALYZE DELETE FROM spans",
        "SET threads = 1",
        "PRAGMA enable_profiling",
        "INSTALL httpfs",
        "CHECKPOINT",
        "",
    ],
)
def test_write_statements_are_refused_and_change_nothing(store, sql):
    store.write([make_span(1, 1)])
    with pytest.raises(StoreError):
        store.query(sql)
    with pytest.raises(StoreError):
        check_read_only(sql)
    assert store.query("SELECT count(*), min(name) FROM spans").rows == [(1, "work")]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count(*) FROM spans",
        "with t as (select 1 as one) select one from t",
        "DESCRIBE spans",
        "SHOW TABLES",
        "SUMMARIZE traces",
        "EXPLAIN SELECT * FROM spans",
        "FROM schema_version",
    ],
)
def test_read_statements_are_allowed(store, sql):
    assert store.query(sql).columns


def test_query_parameters_and_bad_sql(store):
    store.write([make_span(1, 1), make_span(2, 2)])
    assert store.query("SELECT count(*) FROM spans WHERE trace_id = ?", [trace_hex(2)]).rows == [(1,)]
    with pytest.raises(StoreError, match="query failed"):
        store.query("SELECT no_such_column FROM spans")


# ------------------------------------------------------------------------------------- opening errors


def test_locked_store_names_the_holding_process(tmp_path):
    path = tmp_path / "locked.duckdb"
    TraceStore(path).close()
    with holding_store(path) as holder:
        with pytest.raises(StoreLockedError) as caught:
            open_store_for_read(path)
        message = str(caught.value)
        assert f"pid {holder.pid}" in message
        assert f"tracegrade serve --store {path}" in message
        with pytest.raises(StoreLockedError, match=f"pid {holder.pid}"):
            TraceStore(path)
    with open_store_for_read(path) as store:  # released: readable again
        assert store.query("SELECT count(*) FROM spans").rows == [(0,)]


def damaged_stores(directory: Path) -> list[Path]:
    """Two copies of a store with data: one with 4 MiB overwritten past its first 2 MiB, one cut to 1 MB."""
    original = directory / "original.duckdb"
    with TraceStore(original) as store:
        filler = [os.urandom(1000).hex() for _ in range(1500)]  # incompressible: the file grows past 6 MiB
        store.write(
            [make_span(t, s, attributes={"filler": filler[t * 5 + s - 1]}) for t in range(300) for s in range(1, 6)]
        )
    flipped, truncated = directory / "flipped.duckdb", directory / "truncated.duckdb"
    for copy in (flipped, truncated):
        shutil.copyfile(original, copy)
    with flipped.open("r+b") as file:
        file.seek(2 * 1024 * 1024)
        file.write(b"\xab" * (4 * 1024 * 1024))
    os.truncate(truncated, 1_000_000)
    return [flipped, truncated]


def test_corrupt_missing_and_foreign_files_give_clear_errors(tmp_path):
    corrupt = tmp_path / "corrupt.duckdb"
    corrupt.write_bytes(b"this is not a database" * 500)
    for opener in (lambda: open_store_for_read(corrupt), lambda: TraceStore(corrupt)):
        with pytest.raises(StoreError, match="not a valid DuckDB database"):
            opener()
    for damaged in damaged_stores(tmp_path):
        for opener in (open_store_for_read, TraceStore):
            # DuckDB 1.x meets the damage at open, DuckDB 2 at the first read of a damaged block
            with pytest.raises(StoreError) as caught, opener(damaged) as store:
                store.query("SELECT * FROM spans")
            assert not isinstance(caught.value, StoreLockedError)  # a "block" is not a lock
            assert f"store {damaged} is damaged" in str(caught.value) and "move it aside" in str(caught.value)
            assert "what the damaged file already held is not" in str(caught.value)
    missing = tmp_path / "missing.duckdb"
    with pytest.raises(StoreError, match=r"store not found: .*missing\.duckdb \(create one with"):
        open_store_for_read(missing)
    foreign = tmp_path / "foreign.duckdb"
    con = duckdb.connect(str(foreign))
    con.execute("CREATE TABLE people (name VARCHAR)")
    con.close()
    for opener in (lambda: open_store_for_read(foreign), lambda: TraceStore(foreign)):
        with pytest.raises(StoreError, match="not a tracegrade store"):
            opener()


@pytest.mark.parametrize("damage", ["flipped", "truncated"])
def test_a_receiver_refuses_a_damaged_store_and_its_journal_goes_into_the_new_one(tmp_path, damage):
    # A receiver stopped with acknowledged requests still in its journal, and its store file damaged since.
    # DuckDB 1.x meets the damage when it opens the file, DuckDB 2 when the receiver's start first reads it.
    damaged = next(path for path in damaged_stores(tmp_path) if path.stem == damage)
    trace_ids = [f"{trace:032x}" for trace in range(1000, 1005)]
    journal = RequestJournal(journal_directory(damaged))
    journal.append(
        [
            journal_record(_JSON_TRACES, json.dumps(traces_json([span_json(trace_id, 0)])).encode(), DEFAULT_TENANT)
            for trace_id in trace_ids
        ]
    )
    journal.close()
    with pytest.raises(RuntimeError) as refused:
        ServerProcess(damaged).start()
    assert f"store {damaged} is damaged" in str(refused.value) and "move it aside" in str(refused.value)
    damaged.rename(tmp_path / "damaged-aside.duckdb")  # as the error says; the journal stays where it is
    with ServerProcess(damaged) as again:
        stored = query(again.http_url, "SELECT DISTINCT trace_id FROM spans ORDER BY trace_id")
    assert [row[0] for row in stored] == trace_ids


def test_a_duckdb_without_an_attach_option_falls_back_to_the_options_it_knows(tmp_path, monkeypatch):
    from tracegrade.store import database

    sets = (("NOT_A_DUCKDB_OPTION 1", "ROW_GROUP_SIZE {row_group_size}"), ("ROW_GROUP_SIZE {row_group_size}",), ())
    monkeypatch.setattr(database, "ATTACH_OPTION_SETS", sets)
    with TraceStore(tmp_path / "fallback.duckdb", wal=False) as store:
        assert store.wal  # the WAL could not be turned off: commits are durable on their own
        assert store.write([make_span(1, 1)]).spans_inserted == 1
    with TraceStore(tmp_path / "fallback.duckdb", read_only=True) as store:
        assert store.query("SELECT count(*) FROM spans").rows == [(1,)]


def test_the_mapping_process_imports_no_duckdb():
    # The receiver's trajectory mapping runs in a child process; DuckDB would add ~30 MB to it.
    assert modules_loaded_by("import tracegrade.store.mapping_process as m; m.map_arrow", ["duckdb"]) == []


def test_arrow_results_come_in_bounded_record_batches(store):
    rows = 3 * ARROW_BATCH_ROWS + 5
    table = store.query_arrow(f"SELECT range AS n FROM range({rows})")
    batches = table.to_batches()
    assert table.num_rows == rows
    assert max(len(batch) for batch in batches) <= ARROW_BATCH_ROWS


def test_new_store_files_are_in_the_storage_format_every_supported_duckdb_reads(tmp_path: Path) -> None:
    """DuckDB 2 writes new files in a format 1.x cannot read unless told otherwise: a store, its purged copy and
    the judge cache made under any supported duckdb are in the format 1.x writes (the lake extra pins 1.5.5, so a
    store made under 2.x must stay readable once it is installed)."""
    from tracegrade.judges.cache import JudgeCache
    from tracegrade.store.file_purge import purge_deleted_rows

    store_path, cache_path = tmp_path / "traces.duckdb", tmp_path / "judges.duckdb"
    with TraceStore(store_path) as store:
        store.write([make_span(1, 1)])
    purge_deleted_rows(store_path)
    JudgeCache(cache_path).close()
    for path in (store_path, cache_path):
        with duckdb.connect() as con:
            con.execute(f"ATTACH '{path}' AS f (READ_ONLY)")
            (tags,) = con.execute("SELECT tags FROM duckdb_databases() WHERE database_name = 'f'").fetchone()
        assert tags["storage_version"] == "v1.0.0+", (path, tags)
