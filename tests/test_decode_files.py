"""read_otlp_file: OTLP/JSON documents, Collector JSON lines, protobuf (single and length-prefixed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from tests.support.decode_builders import START, TRACE_ID, any_value, logs_request, span, traces_request
from tests.support.decode_otlp_json import otlp_json_dict
from tracegrade.errors import FileFormatError
from tracegrade.ingest.decode import read_otlp_file

FIXTURE = Path(__file__).parent / "data" / "otlp" / "pydantic_ai_2.68.0_v5.otlp.json"


def _traces(*indices: int, **fields):
    return traces_request([span(index, **fields) for index in indices])


def _logs(*bodies: str):
    return logs_request([LogRecord(time_unix_nano=START, trace_id=TRACE_ID, body=any_value(b)) for b in bodies])


def _framed(*messages) -> bytes:
    out = b""
    for message in messages:
        payload = message.SerializeToString()
        out += len(payload).to_bytes(4, "big") + payload
    return out


def test_single_json_document(tmp_path):
    target = tmp_path / "export.json"
    shutil.copy(FIXTURE, target)
    traces, logs = read_otlp_file(target)
    assert len(traces.spans) == 4 and traces.rejected == [] and logs.records == []


def test_collector_json_lines_with_traces_logs_and_metrics(tmp_path):
    lines = [
        json.dumps(otlp_json_dict(_traces(0, 1))),
        "",
        json.dumps({"resourceMetrics": []}),
        json.dumps(otlp_json_dict(_logs("one", "two"))),
        json.dumps(otlp_json_dict(_traces(2, 3))),
    ]
    for name in ("traces.jsonl", "traces.ndjson", "collector-output.json"):
        target = tmp_path / name
        target.write_text("\n".join(lines) + "\n")
        traces, logs = read_otlp_file(target)
        assert [record.name for record in traces.spans] == ["span 0", "span 1", "span 2", "span 3"]
        assert [record.body for record in logs.records] == ["one", "two"]


def test_json_lines_error_names_the_line(tmp_path):
    target = tmp_path / "broken.jsonl"
    target.write_text(json.dumps(otlp_json_dict(_traces(0))) + "\n\n" + '{"resourceSpans": [}\n')
    with pytest.raises(FileFormatError) as caught:
        read_otlp_file(target)
    assert caught.value.problems[0][0] == "line 3"
    assert "invalid JSON at line 1, column 20" in caught.value.problems[0][1]
    assert str(target) in str(caught.value)


def test_json_lines_rejections_keep_their_line(tmp_path):
    bad = otlp_json_dict(_traces(0))
    bad["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["spanId"] = "abc"
    target = tmp_path / "mixed.jsonl"
    target.write_text(json.dumps(otlp_json_dict(_traces(1))) + "\n" + json.dumps(bad) + "\n")
    traces, _ = read_otlp_file(target)
    assert [record.name for record in traces.spans] == ["span 1"]
    assert traces.rejected[0].where == "line 2: resourceSpans[0].scopeSpans[0].spans[0]"


def test_json_that_is_not_otlp(tmp_path):
    target = tmp_path / "other.json"
    target.write_text('{"hello": "world"}')
    with pytest.raises(FileFormatError, match="no 'resourceSpans' or 'resourceLogs'"):
        read_otlp_file(target)


@pytest.mark.parametrize("suffix", [".pb", ".binpb", ".otlp", ".proto"])
def test_single_protobuf_request(tmp_path, suffix):
    target = tmp_path / f"export{suffix}"
    target.write_bytes(_traces(0, 1, 2).SerializeToString())
    traces, logs = read_otlp_file(target)
    assert [record.span_id for record in traces.spans] == ["0000000000000001", "0000000000000002", "0000000000000003"]
    assert logs.records == []


def test_single_protobuf_logs_request(tmp_path):
    target = tmp_path / "logs.pb"
    target.write_bytes(_logs("a", "b").SerializeToString())
    traces, logs = read_otlp_file(target)
    assert traces.spans == [] and [record.body for record in logs.records] == ["a", "b"]


def test_collector_length_prefixed_protobuf(tmp_path):
    target = tmp_path / "collector.pb"
    target.write_bytes(_framed(_traces(0), _logs("between"), _traces(1, 2, span_id=b"\x01" * 3)))
    traces, logs = read_otlp_file(target)
    assert [record.name for record in traces.spans] == ["span 0"]
    assert [record.body for record in logs.records] == ["between"]
    assert len(traces.rejected) == 2
    assert traces.rejected[0].where.startswith("length-prefixed message 3 at byte offset ")


def test_truncated_protobuf_names_the_offset(tmp_path):
    target = tmp_path / "cut.binpb"
    body = _traces(0, 1).SerializeToString()
    target.write_bytes(body[:-4])
    with pytest.raises(FileFormatError) as caught:
        read_otlp_file(target)
    where, what = caught.value.problems[0]
    assert where == "protobuf message 1 at byte offset 0"
    assert "declares" in what and "truncated" in what


def test_empty_file_holds_nothing(tmp_path):
    target = tmp_path / "empty.jsonl"
    target.write_text("")
    traces, logs = read_otlp_file(target)
    assert traces.spans == [] and logs.records == []


def test_a_json_file_that_is_not_json_gets_the_json_error(tmp_path):
    target = tmp_path / "notes.json"
    target.write_text("these are notes, not an export\n")
    with pytest.raises(FileFormatError) as caught:
        read_otlp_file(target)
    assert caught.value.problems == [("JSON", "invalid JSON at line 1, column 1: Expecting value")]


def test_text_that_is_neither_json_nor_protobuf_says_so(tmp_path):
    target = tmp_path / "export.otlp"
    target.write_text("spans: 3\nsee the dashboard\n")
    with pytest.raises(FileFormatError) as caught:
        read_otlp_file(target)
    where, what = caught.value.problems[0]
    assert where == "protobuf message 1 at byte offset 0"
    assert "the file is text, not protobuf" in what and ".jsonl" in what


@pytest.mark.parametrize("name", ["empty.json", "empty.pb", "blank.json"])
def test_empty_files_of_any_suffix_hold_nothing(tmp_path, name):
    target = tmp_path / name
    target.write_text("\n  \n" if name.startswith("blank") else "")
    traces, logs = read_otlp_file(target)
    assert traces.spans == [] and logs.records == []
