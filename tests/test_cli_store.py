"""Store commands through CliRunner on real DuckDB files: import, sql, traces, show, export; locked stores."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from tracegrade.cli.main import cli
from tracegrade.store import TABLES, TraceStore
from tracegrade.store.journal import RequestJournal, journal_directory

from .support.server_otlp import otlp_json_to_proto
from .support.store_records import FIXTURES, holding_store, make_span, trace_hex

ADK_DEFAULT = next(p for p in FIXTURES if "adk_2.13.0_default" in p.name)
LANGGRAPH = next(p for p in FIXTURES if "openinference" in p.name)


def run(*args: str | Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, env=env)
    return result.exit_code, result.stdout, result.stderr


def fixture_trace_id(path: Path) -> str:
    document = json.loads(path.read_text())
    return document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]


def add_synthetic_traces(store_path: Path) -> None:
    """An ERROR trace tagged with eval case "case-err" and a plain OK trace, service svc-test."""
    tagged = [
        make_span(
            900,
            1,
            name="tracegrade.turn case-err",
            status_code="ERROR",
            status_message="agent crashed",
            attributes={"tracegrade.case.id": "case-err", "tracegrade.turn.input": "break it"},
        ),
        make_span(900, 2, parent=1, name="agent", attributes={"tracegrade.span.kind": "node"}),
    ]
    plain = [make_span(901, 3, name="agent run", attributes={"tracegrade.span.kind": "node"})]
    with TraceStore(store_path) as store:
        written = store.write(tagged + plain)
        store.rebuild_trajectories(written.trace_ids)


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli-store") / "store.duckdb"
    code, out, err = run("import", "--store", path, *FIXTURES)
    assert code == 0, out + err
    add_synthetic_traces(path)
    return path


# ------------------------------------------------------------------------------------------- import


def test_import_json_reports_counts_and_maps_traces(tmp_path):
    path = tmp_path / "s.duckdb"
    code, out, _ = run("import", "--store", path, LANGGRAPH)
    assert code == 0
    assert f"{LANGGRAPH}: 10 spans imported, 0 duplicates skipped, 0 log records imported, 0 rejected" in out
    assert "1 trace mapped" in out
    code, out, _ = run("import", "--store", path, LANGGRAPH)  # the same file again: all duplicates
    assert code == 0 and "0 spans imported, 10 duplicates skipped" in out
    with TraceStore(path, read_only=True) as store:
        assert store.query("SELECT count(*) FROM spans").rows == [(10,)]
        assert store.query("SELECT trace_id FROM traces").rows == [(fixture_trace_id(LANGGRAPH),)]


def test_import_json_lines_and_protobuf(tmp_path):
    lines = tmp_path / "collector.jsonl"
    lines.write_text("".join(json.dumps(json.loads(p.read_text())) + "\n" for p in FIXTURES[:3]))
    proto = tmp_path / "request.pb"
    proto.write_bytes(otlp_json_to_proto(json.loads(FIXTURES[3].read_text())))
    path = tmp_path / "s.duckdb"
    code, out, err = run("import", "--store", path, lines, proto)
    assert code == 0, out + err
    assert "4 traces mapped" in out
    with TraceStore(path, read_only=True) as store:
        stored = {r[0] for r in store.query("SELECT trace_id FROM traces").rows}
    assert stored == {fixture_trace_id(p) for p in FIXTURES[:4]}


def test_import_reports_rejected_spans_and_keeps_the_rest(tmp_path):
    document = json.loads(LANGGRAPH.read_text())
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    bad_id = spans[1]["spanId"][:14]
    spans[1]["spanId"] = bad_id  # 7 bytes
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(document))
    path = tmp_path / "s.duckdb"
    code, out, err = run("import", "--store", path, bad)
    assert code == 1
    assert "9 spans imported" in out and "1 rejected" in out
    assert "rejected at" in err and "spanId" in err


def test_import_of_an_undecodable_file_is_a_clean_error(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"resourceSpans": [')
    code, _, err = run("import", "--store", tmp_path / "s.duckdb", broken)
    assert code == 2 and "broken.json" in err
    assert not (tmp_path / "s.duckdb").exists()


# ---------------------------------------------------------------------------------------------- sql


def test_sql_formats(store_path, tmp_path):
    sql = "SELECT trace_id, span_count, start_time, mapping_issues FROM traces ORDER BY trace_id"
    with TraceStore(store_path, read_only=True) as store:
        direct = store.query(sql)
    code, out, _ = run("sql", "--store", store_path, "--format", "json", sql)
    assert code == 0
    rows = json.loads(out)
    assert isinstance(rows, list) and len(rows) == len(direct.rows) == 7
    assert [(r["trace_id"], r["span_count"]) for r in rows] == [(r[0], r[1]) for r in direct.rows]
    assert rows[0]["start_time"] == direct.rows[0][2].isoformat()
    assert rows[0]["mapping_issues"] == json.loads(direct.rows[0][3])  # JSON columns embedded, not strings

    code, out, _ = run("sql", "--store", store_path, "--format", "csv", sql)
    parsed = list(csv.reader(io.StringIO(out)))
    assert code == 0 and parsed[0] == ["trace_id", "span_count", "start_time", "mapping_issues"]
    assert [(r[0], int(r[1])) for r in parsed[1:]] == [(r[0], r[1]) for r in direct.rows]

    code, out, _ = run("sql", "--store", store_path, "SELECT name, count(*) AS n FROM tool_calls GROUP BY name")
    assert code == 0 and "get_weather" in out and "name" in out and "1 row" in out

    target = tmp_path / "out.parquet"
    code, _, err = run("sql", "--store", store_path, "--format", "parquet", "-o", target, sql)
    assert code == 0 and "wrote 7 rows" in err
    table = pq.read_table(target)
    assert table.column("trace_id").to_pylist() == [r[0] for r in direct.rows]
    assert table.column("span_count").to_pylist() == [r[1] for r in direct.rows]

    target = tmp_path / "out.json"
    code, _, _ = run("sql", "--store", store_path, "--format", "json", "-o", target, sql)
    assert code == 0 and len(json.loads(target.read_text())) == 7


def test_sql_refuses_writes_and_parquet_without_output(store_path):
    for statement in ("DELETE FROM spans", "SELECT 1; DROP TABLE traces", "COPY spans TO 'x.csv'"):
        code, _, err = run("sql", "--store", store_path, statement)
        assert code == 2 and ("not allowed" in err or "statements given" in err)
    code, _, err = run("sql", "--store", store_path, "--format", "parquet", "SELECT 1")
    assert code == 2 and "-o" in err
    with TraceStore(store_path, read_only=True) as store:
        assert store.query("SELECT count(*) FROM spans").rows == [(38,)]


def test_store_path_from_environment_and_missing_store(store_path, tmp_path):
    env = {"TRACEGRADE_STORE": str(store_path)}
    code, out, _ = run("sql", "--format", "csv", "SELECT count(*) AS n FROM traces", env=env)
    assert code == 0 and out.splitlines() == ["n", "7"]
    code, _, err = run("sql", "--store", tmp_path / "nope.duckdb", "SELECT 1")
    assert code == 2 and "store not found" in err


# ------------------------------------------------------------------------------------------- traces


def traces_json(store_path: Path, *args: str) -> list[dict]:
    code, out, err = run("traces", "--store", store_path, "--format", "json", *args)
    assert code == 0, err
    return json.loads(out)


def test_traces_filters(store_path):
    everything = traces_json(store_path)
    assert len(everything) == 7
    starts = [t["start_time"] for t in everything]
    assert starts == sorted(starts, reverse=True)
    assert len(traces_json(store_path, "--limit", "2")) == 2
    assert {t["trace_id"] for t in traces_json(store_path, "--service", "svc-test")} == {
        trace_hex(900),
        trace_hex(901),
    }
    errors = traces_json(store_path, "--status", "error")
    assert [t["trace_id"] for t in errors] == [trace_hex(900)]
    assert traces_json(store_path, "--status", "ERROR") == errors  # as the table shows it
    assert trace_hex(900) not in {t["trace_id"] for t in traces_json(store_path, "--status", "ok")}
    assert [t["trace_id"] for t in traces_json(store_path, "--case", "case-err")] == [trace_hex(900)]
    assert traces_json(store_path, "--since", "2099-01-01T00:00:00") == []
    assert len(traces_json(store_path, "--since", "52w", "--since", "2000-01-01")) == 7
    assert [t["trace_id"] for t in traces_json(store_path, "--where", "tool_calls = 0 AND span_count = 1")] == [
        trace_hex(901)
    ]


def test_traces_table_and_bad_since(store_path):
    newest = traces_json(store_path, "--limit", "1")[0]
    code, out, _ = run("traces", "--store", store_path, "--limit", "3", env={"COLUMNS": "200"})
    assert code == 0 and "3 rows" in out
    assert newest["trace_id"][:16] in out and newest["root_name"] in out
    code, _, err = run("traces", "--store", store_path, "--since", "yesterday")
    assert code == 2 and "--since 'yesterday'" in err


def test_sql_rows_too_wide_for_the_terminal_show_one_line_per_column(store_path):
    trace_id = fixture_trace_id(LANGGRAPH)
    query = f"SELECT * FROM traces WHERE trace_id = '{trace_id}'"
    code, out, _ = run("sql", "--store", store_path, query, env={"COLUMNS": "80"})
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "-- row 1 --" and lines[-1] == "1 row"
    columns = run("sql", "--store", store_path, "--format", "csv", query)[1].splitlines()[0].split(",")
    assert len(columns) > 20
    for column in columns:  # each column on a line of its own, its name first
        assert any(line.startswith(f"{column} ") for line in lines), column
    assert f"trace_id {' ' * (len(max(columns, key=len)) - len('trace_id'))}{trace_id}" in out
    code, out, _ = run("sql", "--store", store_path, "SELECT trace_id, span_count FROM traces LIMIT 2")
    assert code == 0 and "┃ trace_id" in out and "2 rows" in out  # columns that fit: a table


# --------------------------------------------------------------------------------------------- show


def test_show_tree_has_nodes_tools_llm_calls_and_response(store_path):
    trace_id = fixture_trace_id(LANGGRAPH)
    code, out, err = run("show", "--store", store_path, trace_id[:10])
    assert code == 0, err
    assert f"trace {trace_id}" in out
    assert "user query: What's the weather in Paris?" in out
    nodes = [line.split(". ", 1)[1].split()[0] for line in out.splitlines() if ". " in line and " ms" in line][:4]
    assert nodes == ["agent", "tools", "agent", "summarize"]
    assert "get_weather  id=call_abc123" in out
    assert 'arguments: {"city": "Paris"}' in out and "result: sunny in Paris" in out
    assert "LLM calls (2" in out
    assert "final response: It is sunny in Paris." in out


def test_show_tree_fits_an_80_column_terminal(store_path):
    for trace_id, expected in ((fixture_trace_id(LANGGRAPH), "LLM calls (2"), (trace_hex(900), "eval case: case-err")):
        narrow = run("show", "--store", store_path, trace_id, env={"COLUMNS": "80"})
        wide = run("show", "--store", store_path, trace_id, env={"COLUMNS": "300"})
        assert narrow[0] == 0 and expected in narrow[1]
        assert narrow == wide  # nothing wrapped


def test_show_marks_content_not_captured(store_path):
    code, out, _ = run("show", "--store", store_path, fixture_trace_id(ADK_DEFAULT))
    assert code == 0
    assert "user query: [content not captured]" in out
    assert "arguments: [content not captured]" in out
    assert "final response: [content not captured]" in out


def test_show_json_and_id_errors(store_path):
    code, out, _ = run("show", "--store", store_path, "--format", "json", trace_hex(900))
    assert code == 0
    shown = json.loads(out)
    assert shown["trace"]["case_id"] == "case-err" and shown["execution"]["status"] == "ERROR"
    code, _, err = run("show", "--store", store_path, "ffff")
    assert code == 2 and "no trace id starts with 'ffff'" in err
    code, _, err = run("show", "--store", store_path, "0000000000")  # both synthetic traces
    assert code == 2 and "matches several traces" in err


# ------------------------------------------------------------------------------------------- export


def test_export_parquet_round_trip(store_path, tmp_path):
    out_dir = tmp_path / "export"
    code, out, _ = run("export", "--store", store_path, "--format", "parquet", "-o", out_dir)
    assert code == 0 and "spans: 38 rows" in out
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(f"{t}.parquet" for t in TABLES)
    with TraceStore(store_path, read_only=True) as store:
        for table in TABLES:
            exported = pq.read_table(out_dir / f"{table}.parquet")
            direct = store.query(f"SELECT * FROM {table}")
            assert exported.column_names == direct.columns
            assert exported.num_rows == len(direct.rows)
        span_ids = sorted(r[0] for r in store.query("SELECT span_id FROM spans").rows)
    assert sorted(pq.read_table(out_dir / "spans.parquet").column("span_id").to_pylist()) == span_ids
    code, _, _ = run("export", "--store", store_path, "-o", tmp_path / "one", "--table", "tool_calls")
    assert code == 0 and [p.name for p in (tmp_path / "one").iterdir()] == ["tool_calls.parquet"]


# ---------------------------------------------------------------------------------- held by others


def test_locked_store_without_server_is_a_clear_error(tmp_path):
    path = tmp_path / "held.duckdb"
    TraceStore(path).close()
    with holding_store(path) as holder:
        code, _, err = run("sql", "--store", path, "SELECT 1")
        assert code == 2
        assert f"held by another process (pid {holder.pid})" in err and "tracegrade serve --store" in err
        code, _, err = run("import", "--store", path, LANGGRAPH)
        assert code == 2 and f"pid {holder.pid}" in err


def test_commands_go_through_the_running_server(store_path, tmp_path):
    from .support.server_process import ServerProcess

    copy = tmp_path / "served.duckdb"
    copy.write_bytes(store_path.read_bytes())
    sql = "SELECT trace_id, span_count FROM traces ORDER BY trace_id"
    with TraceStore(copy, read_only=True) as store:
        direct = store.query(sql).rows
    with ServerProcess(copy, extra_args=("--token", "s3cret")) as server:
        code, out, _ = run("sql", "--store", copy, "--token", "s3cret", "--format", "json", sql)
        assert code == 0
        assert [(r["trace_id"], r["span_count"]) for r in json.loads(out)] == direct
        code, _, err = run("sql", "--store", copy, "--token", "wrong", sql)
        assert code == 2 and "refused the query" in err
        code, _, err = run("sql", "--store", copy, "--token", "s3cret", "DROP TABLE spans")
        assert code == 2 and "not allowed" in err
        env = {"TRACEGRADE_TOKEN": "s3cret"}
        code, out, _ = run("show", "--store", copy, fixture_trace_id(LANGGRAPH), env=env)
        assert code == 0 and "final response: It is sunny in Paris." in out
        assert len(json.loads(run("traces", "--store", copy, "--format", "json", env=env)[1])) == 7
        code, out, _ = run("export", "--store", copy, "-o", tmp_path / "remote", "--table", "traces", env=env)
        assert code == 0 and pq.read_table(tmp_path / "remote" / "traces.parquet").num_rows == 7
        code, _, err = run("import", "--store", copy, LANGGRAPH)  # through the server: its token is needed
        assert code == 2 and f"{server.http_url}/v1/traces refused the import with HTTP 401" in err


def test_reading_the_file_warns_of_exports_left_in_the_request_journal(tmp_path):
    path = tmp_path / "store.duckdb"
    with TraceStore(path) as store:
        store.write([make_span(950, 1, name="stored")])
    code, out, err = run("sql", "--store", path, "--format", "csv", "SELECT count(*) AS n FROM spans")
    assert (code, out, err) == (0, "n\n1\n", "")

    journal = RequestJournal(journal_directory(path))  # what a receiver killed before committing leaves
    journal.append([(1, b"\x0a\x00" * 50)])
    journal.close()
    code, out, err = run("sql", "--store", path, "--format", "csv", "SELECT count(*) AS n FROM spans")
    assert code == 0 and out == "n\n1\n"
    assert f"{journal_directory(path)} holds 113 bytes of acknowledged exports that are not in the store" in err
    assert f"`tracegrade serve --store {path}`" in err
    code, out, err = run("traces", "--store", path, "--format", "json")
    assert code == 0 and "holds 113 bytes" in err
