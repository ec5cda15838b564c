"""`tracegrade import` while `tracegrade serve` holds the store: the file goes through the running server."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracegrade.cli.main import cli

from .support.server_process import ServerProcess
from .support.server_requests import query, span_json, traces_json, unique_trace_id
from .support.store_records import FIXTURES
from .support.waiting import wait_for_value

TOKEN = "s3cret"


def run(*args: str | Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, env=env)
    return result.exit_code, result.stdout, result.stderr


def logs_json(trace_id: str, span_id: str, count: int) -> dict:
    records = [
        {
            "timeUnixNano": str(1_700_000_000_000_000_000 + i),
            "traceId": trace_id,
            "spanId": span_id,
            "eventName": "gen_ai.user.message",
            "body": {"kvlistValue": {"values": [{"key": "content", "value": {"stringValue": f"hello {i}"}}]}},
            "attributes": [{"key": "n", "value": {"intValue": str(i)}}],
        }
        for i in range(count)
    ]
    return {"resourceLogs": [{"resource": {}, "scopeLogs": [{"scope": {"name": "tests"}, "logRecords": records}]}]}


def write_lines(path: Path, documents: list[dict]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in documents), encoding="utf-8")
    return path


def wait_for(http_url: str, sql: str, expected: object) -> object:
    return wait_for_value(lambda: query(http_url, sql, token=TOKEN), expected, sql)


@pytest.fixture
def server(tmp_path: Path):
    with ServerProcess(tmp_path / "served.duckdb", extra_args=("--token", TOKEN)) as running:
        yield running


def test_json_lines_go_through_the_server_in_chunks(server: ServerProcess, tmp_path: Path) -> None:
    big_trace = unique_trace_id()
    spans = [span_json(big_trace, i) for i in range(4_500)]  # more than one request's worth
    lines = [traces_json(spans[:2_500]), traces_json(spans[2_500:]), logs_json(big_trace, spans[0]["spanId"], 3)]
    collector_file = write_lines(tmp_path / "collector-export.json", lines)

    code, out, err = run("import", "--store", server.store, "--token", TOKEN, collector_file, *FIXTURES)
    assert code == 0, out + err
    assert f"sending to {server.http_url}" in out
    assert f"{collector_file}: 4500 spans accepted, 3 log records accepted, 0 rejected" in out

    assert wait_for(server.http_url, f"SELECT count(*) FROM spans WHERE trace_id = '{big_trace}'", [[4500]]) == [[4500]]
    assert query(server.http_url, "SELECT count(*) FROM logs", token=TOKEN) == [[3]]
    # the fixtures' trajectories are mapped by the server, as for any exporter
    expected = [[len(FIXTURES) + 1]]
    assert wait_for(server.http_url, "SELECT count(*) FROM traces", expected) == expected
    rows = query(server.http_url, "SELECT user_query FROM traces WHERE user_query IS NOT NULL", token=TOKEN)
    assert {row[0] for row in rows} == {"What's the weather in Paris?", "hello 2"}  # the logs joined to the big trace

    # sent again: the server keeps each span once
    code, out, _ = run("import", "--store", server.store, collector_file, env={"TRACEGRADE_TOKEN": TOKEN})
    assert code == 0 and "4500 spans accepted" in out
    time.sleep(1.0)
    assert query(server.http_url, f"SELECT count(*) FROM spans WHERE trace_id = '{big_trace}'", token=TOKEN) == [[4500]]


def test_rejected_records_are_reported_and_exit_1(server: ServerProcess, tmp_path: Path) -> None:
    trace = unique_trace_id()
    spans = [span_json(trace, 0), span_json(trace, 1, name=""), span_json(trace, 2)]
    path = tmp_path / "partly-bad.json"
    path.write_text(json.dumps(traces_json(spans)), encoding="utf-8")
    code, out, err = run("import", "--store", server.store, "--token", TOKEN, path)
    assert code == 1
    assert f"{path}: 2 spans accepted, 0 log records accepted, 1 rejected" in out
    assert "name is missing or empty" in err
    assert wait_for(server.http_url, f"SELECT count(*) FROM spans WHERE trace_id = '{trace}'", [[2]]) == [[2]]


def test_without_the_token_the_refusal_names_the_option(server: ServerProcess) -> None:
    code, _, err = run("import", "--store", server.store, FIXTURES[0])
    assert code == 2
    assert "HTTP 401" in err and "--token" in err and "Traceback" not in err
    code, _, err = run("import", "--store", server.store, "--token", "wrong", FIXTURES[0])
    assert code == 2 and "HTTP 401" in err
    assert query(server.http_url, "SELECT count(*) FROM spans", token=TOKEN) == [[0]]


def test_a_mapping_batch_size_given_to_an_import_through_a_server_is_said_not_to_apply(server: ServerProcess) -> None:
    """The server maps what it is sent with its own --mapping-batch-bytes: a size given to `import` (the option or
    its environment variable) is said, on one line of stderr, not to apply; the default says nothing."""
    env_var = "TRACEGRADE_MAPPING_BATCH_BYTES"
    note = f"does not apply here: the server at {server.http_url} maps the trajectories of what it is sent"
    given = {
        "--mapping-batch-bytes": (["--mapping-batch-bytes", "1MiB"], {env_var: None}),
        env_var: ([], {env_var: "1MiB"}),
        None: ([], {env_var: None}),
    }
    for name, (option, env) in given.items():
        code, out, err = run("import", "--store", server.store, "--token", TOKEN, *option, FIXTURES[0], env=env)
        assert code == 0, out + err
        assert f"{FIXTURES[0]}: " in out and " spans accepted" in out
        notes = [line for line in err.splitlines() if "does not apply" in line]
        assert notes == ([f"note: {name} {note} with its own setting (its --mapping-batch-bytes)"] if name else [])
    assert wait_for(server.http_url, "SELECT count(*) FROM traces", [[1]]) == [[1]]  # mapped all the same, once


def test_encoded_requests_decode_to_the_same_records() -> None:
    from dataclasses import asdict

    from tracegrade.cli.otlp_encode import logs_requests, traces_requests
    from tracegrade.ingest.decode import read_otlp_file
    from tracegrade.ingest.decode.json_form import decode_logs_json
    from tracegrade.ingest.decode.proto import decode_logs_proto, decode_traces_proto

    from .support.store_records import rich_span

    odd = rich_span()
    odd.attributes |= {"empty": [], "nested": {"a": [1, 2.5, True, None, {"b": "c"}]}, "unset": None}
    spans = [odd, *(span for path in FIXTURES for span in read_otlp_file(path)[0].spans)]
    chunks = list(traces_requests(spans, max_items=4, max_bytes=2_000))
    assert sum(size for _, size in chunks) == len(spans) and len(chunks) > len(spans) // 4
    back = [span for body, _ in chunks for span in decode_traces_proto(body).spans]
    assert [asdict(span) for span in back] == [asdict(span) for span in spans]
    records = decode_logs_json(logs_json(unique_trace_id(), "00000000000000aa", 5)).records
    back_logs = [
        r for body, _ in logs_requests(records, max_items=2, max_bytes=1 << 20) for r in decode_logs_proto(body).records
    ]
    assert [asdict(r) for r in back_logs] == [asdict(r) for r in records]
