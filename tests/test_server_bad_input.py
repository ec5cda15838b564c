"""Hostile and malformed OTLP/HTTP requests: each gets its status code and a message saying why, and the
receiver keeps serving with earlier data intact."""

from __future__ import annotations

import gzip
import http.client
import itertools
import json
import random
import urllib.parse
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.rpc import code_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1 import common_pb2

from tests.support.server_inprocess import RunningServer, running_server
from tests.support.server_otlp import post
from tests.support.server_requests import (
    count_spans,
    query,
    span_json,
    status_of,
    traces_json,
    traces_proto,
    unique_trace_id,
)

MIB = 1024 * 1024
LIMIT = 16 * MIB  # the default --max-request-bytes


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with running_server(tmp_path_factory.mktemp("bad-input") / "store.duckdb") as running:
        yield running


@pytest.fixture(scope="module")
def baseline(server: RunningServer) -> str:
    """A trace stored before any bad input; every test checks it is still there, untouched."""
    trace_id = unique_trace_id()
    reply = post(f"{server.http_url}/v1/traces", traces_proto([span_json(trace_id, i) for i in range(3)]))
    assert reply.status == 200
    return trace_id


@pytest.fixture(autouse=True)
def still_serving(server: RunningServer, baseline: str) -> Iterator[None]:
    yield
    assert count_spans(server.http_url, baseline) == 3
    trace_id = unique_trace_id()
    reply = post(
        f"{server.http_url}/v1/traces", json.dumps(traces_json([span_json(trace_id, 0)])).encode(), "application/json"
    )
    assert reply.status == 200
    assert count_spans(server.http_url, trace_id) == 1


def _traces_url(server: RunningServer) -> str:
    return f"{server.http_url}/v1/traces"


def _assert_refused(reply: Any, status: int, *fragments: str) -> str:
    assert reply.status == status, reply.body[:500]
    message = status_of(reply).message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_truncated_protobuf_is_400_with_a_status_body(server: RunningServer) -> None:
    body = traces_proto([span_json(unique_trace_id(), i) for i in range(5)])
    reply = post(_traces_url(server), body[: len(body) // 2])
    _assert_refused(reply, 400, "undecodable OTLP protobuf traces request")
    assert status_of(reply).code == code_pb2.INVALID_ARGUMENT
    assert reply.headers["Content-Type"] == "application/x-protobuf"


def test_random_bytes_are_400(server: RunningServer) -> None:
    reply = post(_traces_url(server), random.Random(7).randbytes(4096))
    _assert_refused(reply, 400, "undecodable")


def test_invalid_json_is_400_with_a_json_status_naming_the_position(server: RunningServer) -> None:
    reply = post(_traces_url(server), b'{"resourceSpans": [', "application/json")
    _assert_refused(reply, 400, "invalid JSON", "line 1")
    assert reply.headers["Content-Type"] == "application/json"


def test_json_with_base64_ids_rejects_those_spans_and_keeps_the_others(server: RunningServer) -> None:
    trace_id = unique_trace_id()
    good = [span_json(trace_id, i) for i in range(2)]
    base64_ids = span_json(trace_id, 9, spanId="AAAAAAAAAAk=")
    reply = post(_traces_url(server), json.dumps(traces_json([*good, base64_ids])).encode(), "application/json")
    assert reply.status == 200
    partial = reply.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert "hex" in partial["errorMessage"]
    assert "spans[2]" in partial["errorMessage"]
    assert count_spans(server.http_url, trace_id) == 2


def test_a_7_byte_span_id_is_a_partial_success_over_protobuf(server: RunningServer) -> None:
    trace_id = unique_trace_id()
    spans = [span_json(trace_id, i) for i in range(4)]
    spans.insert(2, span_json(trace_id, 7, spanId="00000000000007"))
    reply = post(_traces_url(server), traces_proto(spans))
    assert reply.status == 200
    response = ExportTraceServiceResponse.FromString(reply.body)
    assert response.partial_success.rejected_spans == 1
    assert "spans[2]" in response.partial_success.error_message
    assert "spanId" in response.partial_success.error_message
    assert count_spans(server.http_url, trace_id) == 4


def test_a_fully_valid_request_has_no_partial_success(server: RunningServer) -> None:
    reply = post(_traces_url(server), traces_proto([span_json(unique_trace_id(), 0)]))
    assert reply.status == 200
    assert not ExportTraceServiceResponse.FromString(reply.body).HasField("partial_success")


@pytest.mark.parametrize("content_type", ["text/plain", "application/grpc", ""])
def test_unsupported_content_type_is_415_listing_the_supported_ones(server: RunningServer, content_type: str) -> None:
    reply = post(_traces_url(server), b"{}", content_type)
    _assert_refused(reply, 415, "application/x-protobuf", "application/json")


def test_content_type_parameters_are_accepted(server: RunningServer) -> None:
    trace_id = unique_trace_id()
    body = json.dumps(traces_json([span_json(trace_id, 0)])).encode()
    assert post(_traces_url(server), body, "application/json; charset=utf-8").status == 200
    assert count_spans(server.http_url, trace_id) == 1


def test_unsupported_content_encoding_is_415(server: RunningServer) -> None:
    reply = post(_traces_url(server), b"\x00", headers={"Content-Encoding": "br"})
    _assert_refused(reply, 415, "Content-Encoding", "gzip")


def test_wrong_method_is_405(server: RunningServer) -> None:
    reply = post(_traces_url(server), b"", method="PUT")
    assert reply.status == 405
    assert "POST" in reply.headers["Allow"]
    assert status_of(reply).message == "PUT is not allowed on /v1/traces; use POST"


def test_a_body_over_the_limit_is_413_before_it_is_read(server: RunningServer) -> None:
    reply = post(_traces_url(server), b"\x0a" * (LIMIT + 1))
    _assert_refused(reply, 413, str(LIMIT), "--max-request-bytes")


def test_a_grpc_message_over_the_limit_is_refused_naming_the_flag(server: RunningServer) -> None:
    export = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
    with grpc.insecure_channel(server.grpc_target) as channel:
        for size, code, message in (
            # a little over: refused by the receiver, saying what to change
            (LIMIT + 1, grpc.StatusCode.INVALID_ARGUMENT, f"has {LIMIT + 1} bytes; the limit is {LIMIT}: send smaller"),
            # far over: grpc refuses it before the receiver sees it
            (LIMIT * 2, grpc.StatusCode.RESOURCE_EXHAUSTED, "larger than max"),
        ):
            with pytest.raises(grpc.RpcError) as refused:
                channel.unary_unary(export)(b"\x0a" * size, timeout=60)
            assert refused.value.code() == code, refused.value
            assert message in refused.value.details(), refused.value.details()
            assert (code is grpc.StatusCode.INVALID_ARGUMENT) == ("--max-request-bytes" in refused.value.details())


def test_a_chunked_body_over_the_limit_is_413(server: RunningServer) -> None:
    url = urllib.parse.urlsplit(server.http_url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    chunks = (b"\x0a" * MIB for _ in range(LIMIT // MIB + 2))
    try:
        connection.request(
            "POST", "/v1/traces", body=chunks, encode_chunked=True, headers={"Content-Type": "application/x-protobuf"}
        )
        response = connection.getresponse()
        assert response.status == 413
        assert b"exceeds the" in response.read()
    finally:
        connection.close()


def test_a_gzip_bomb_is_413_without_inflating_it(server: RunningServer) -> None:
    bomb = gzip.compress(b"\0" * (64 * MIB), compresslevel=9)
    assert len(bomb) < MIB
    reply = post(_traces_url(server), bomb, headers={"Content-Encoding": "gzip"})
    _assert_refused(reply, 413, "decompresses to more than")


def test_a_corrupt_gzip_body_is_400(server: RunningServer) -> None:
    body = gzip.compress(traces_proto([span_json(unique_trace_id(), 0)]))
    _assert_refused(post(_traces_url(server), body[:-12], headers={"Content-Encoding": "gzip"}), 400, "gzip")
    plain = post(_traces_url(server), b"not gzip", headers={"Content-Encoding": "gzip"})
    _assert_refused(plain, 400, "is not gzip (no gzip header at its start): compress it, or drop the header")


def test_gzip_compressed_requests_are_accepted(server: RunningServer) -> None:
    trace_id = unique_trace_id()
    assert post(_traces_url(server), traces_proto([span_json(trace_id, 0)]), gzip_body=True).status == 200
    assert count_spans(server.http_url, trace_id) == 1


def test_a_gzip_body_of_several_members_is_read_whole(server: RunningServer) -> None:
    trace_id = unique_trace_id()
    body = traces_proto([span_json(trace_id, i) for i in range(300)])
    cuts = [0, 7, len(body) // 2, len(body) - 3, len(body)]  # members end anywhere, even inside a field
    members = b"".join(gzip.compress(body[a:b]) for a, b in itertools.pairwise(cuts))
    assert post(_traces_url(server), members, headers={"Content-Encoding": "gzip"}).status == 200
    assert count_spans(server.http_url, trace_id) == 300
    # the limit counts every member: two members of 40 MiB of zeros each are a bomb all the same
    bomb = gzip.compress(b"\0" * (40 * MIB), compresslevel=9) * 2
    _assert_refused(post(_traces_url(server), bomb, headers={"Content-Encoding": "gzip"}), 413, "decompresses to")
    trailing = gzip.compress(body) + b"junk after the stream"
    _assert_refused(
        post(_traces_url(server), trailing, headers={"Content-Encoding": "gzip"}), 400, "not another gzip member"
    )


def test_invalid_utf8_in_a_protobuf_string_is_400_saying_where(server: RunningServer) -> None:
    body = traces_proto([span_json(unique_trace_id(), 0, name="PLACEHOLDER")])
    broken = body.replace(b"PLACEHOLDER", b"BAD\xff\xfeUTF8!!")
    message = _assert_refused(post(_traces_url(server), broken), 400, "UTF-8")
    assert "name" in message


def test_invalid_utf8_in_a_json_body_is_400(server: RunningServer) -> None:
    body = json.dumps(traces_json([span_json(unique_trace_id(), 0, name="PLACEHOLDER")])).encode()
    reply = post(_traces_url(server), body.replace(b"PLACEHOLDER", b"BAD\xff"), "application/json")
    _assert_refused(reply, 400, "not valid UTF-8", "offset")


def _stored_attributes(server: RunningServer, trace_id: str) -> tuple[dict[str, Any], int]:
    rows = query(
        server.http_url, "SELECT attributes, dropped_attributes_count FROM spans WHERE trace_id = ?", [trace_id]
    )
    assert len(rows) == 1
    attributes, dropped = rows[0]
    return (json.loads(attributes) if isinstance(attributes, str) else attributes), dropped


def test_a_10_mb_attribute_value_is_stored_truncated_and_marked(server: RunningServer) -> None:
    trace_id = unique_trace_id()
    huge = "x" * (10 * 1000 * 1000)
    span = span_json(trace_id, 0, attributes=[{"key": "huge", "value": {"stringValue": huge}}])
    reply = post(_traces_url(server), traces_proto([span]))
    assert reply.status == 200
    attributes, _ = _stored_attributes(server, trace_id)
    assert attributes["huge"].startswith("x" * 1000)
    assert "truncated" in attributes["huge"]
    assert len(attributes["huge"]) < len(huge)


def test_10000_attributes_on_one_span_keep_the_first_and_count_the_rest(server: RunningServer) -> None:
    trace_id = unique_trace_id()
    many = [{"key": f"attr.{i}", "value": {"intValue": str(i)}} for i in range(10_000)]
    reply = post(
        _traces_url(server),
        json.dumps(traces_json([span_json(trace_id, 0, attributes=many)])).encode(),
        "application/json",
    )
    assert reply.status == 200
    attributes, dropped = _stored_attributes(server, trace_id)
    assert len(attributes) + dropped == 10_000
    assert attributes["attr.0"] == 0
    assert dropped > 0


def _nested_kvlist(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "bottom"}
    for level in range(depth):
        value = {"kvlistValue": {"values": [{"key": f"level{level}", "value": value}]}}
    return value


def test_deeply_nested_kvlists_are_cut_off_and_stored(server: RunningServer) -> None:
    trace_id = unique_trace_id()
    span = span_json(trace_id, 0, attributes=[{"key": "deep", "value": _nested_kvlist(200)}])
    reply = post(_traces_url(server), json.dumps(traces_json([span])).encode(), "application/json")
    assert reply.status == 200
    attributes, _ = _stored_attributes(server, trace_id)
    assert "nested too deeply" in json.dumps(attributes["deep"])


def test_protobuf_nested_beyond_the_parser_limit_is_400(server: RunningServer) -> None:
    value = common_pb2.AnyValue(string_value="bottom")
    for level in range(120):
        outer = common_pb2.AnyValue()
        outer.kvlist_value.values.add(key=f"level{level}").value.CopyFrom(value)
        value = outer
    request = ExportTraceServiceRequest.FromString(traces_proto([span_json(unique_trace_id(), 0)]))
    request.resource_spans[0].scope_spans[0].spans[0].attributes.add(key="deep").value.CopyFrom(value)
    _assert_refused(post(_traces_url(server), request.SerializeToString()), 400, "undecodable")


def test_logs_endpoint_refuses_a_traces_json_body(server: RunningServer) -> None:
    reply = post(f"{server.http_url}/v1/logs", b"[1, 2]", "application/json")
    _assert_refused(reply, 400, "undecodable OTLP json logs request")


def test_an_empty_request_is_a_success(server: RunningServer) -> None:
    assert post(_traces_url(server), b"").status == 200
    assert post(_traces_url(server), b"{}", "application/json").status == 200


def test_unknown_paths_are_404(server: RunningServer) -> None:
    reply = post(f"{server.http_url}/v1/metrics", b"")
    assert reply.status == 404
    assert "/v1/traces" in status_of(reply).message


def _logs_json(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"resourceLogs": [{"resource": {}, "scopeLogs": [{"scope": {"name": "tests"}, "logRecords": records}]}]}


@pytest.mark.parametrize("encoding", ["json", "protobuf"])
def test_log_records_with_times_beyond_int64_are_rejected_one_by_one(server: RunningServer, encoding: str) -> None:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
        ExportLogsServiceRequest,
        ExportLogsServiceResponse,
    )

    trace_id = unique_trace_id()
    good = {"timeUnixNano": "1700000000000000000", "traceId": trace_id, "body": {"stringValue": "kept"}}
    too_late = {"timeUnixNano": str(2**64 - 1), "traceId": trace_id, "body": {"stringValue": "too late"}}
    observed_too_late = {"observedTimeUnixNano": str(2**63), "traceId": trace_id, "body": {"stringValue": "late"}}
    document = _logs_json([good, too_late, observed_too_late])
    if encoding == "json":
        reply = post(f"{server.http_url}/v1/logs", json.dumps(document).encode(), "application/json")
        assert reply.status == 200, reply.body
        partial = reply.json()["partialSuccess"]
        rejected, message = int(partial["rejectedLogRecords"]), partial["errorMessage"]
    else:
        from google.protobuf import json_format

        request = json_format.ParseDict(_hex_ids_to_base64_logs(document), ExportLogsServiceRequest())
        reply = post(f"{server.http_url}/v1/logs", request.SerializeToString())
        assert reply.status == 200, reply.body
        answer = ExportLogsServiceResponse.FromString(reply.body)
        rejected, message = answer.partial_success.rejected_log_records, answer.partial_success.error_message
    assert rejected == 2
    assert "timeUnixNano" in message and "observedTimeUnixNano" in message and "larger than int64" in message
    assert query(server.http_url, "SELECT count(*) FROM logs WHERE trace_id = ?", [trace_id]) == [[1]]


def _hex_ids_to_base64_logs(document: dict[str, Any]) -> dict[str, Any]:
    import base64
    import copy

    converted = copy.deepcopy(document)
    for resource in converted["resourceLogs"]:
        for scope in resource["scopeLogs"]:
            for record in scope["logRecords"]:
                if "traceId" in record:
                    record["traceId"] = base64.b64encode(bytes.fromhex(record["traceId"])).decode()
    return converted


@pytest.mark.parametrize("encoding", ["json", "protobuf"])
def test_dropped_counts_past_int32_are_stored_at_its_bound_with_the_whole_batch(
    server: RunningServer, encoding: str
) -> None:
    # OTLP's dropped counts are uint32; the store's columns are 32-bit signed. A legal count past 2**31 - 1 once made
    # the whole request's conversion fail (HTTP 500), losing the good spans beside it.
    trace_id = unique_trace_id()
    many = span_json(trace_id, 1, droppedAttributesCount=2**32 - 1, droppedEventsCount=2**31, droppedLinksCount=7)
    spans = [span_json(trace_id, 0), many]
    if encoding == "json":
        reply = post(_traces_url(server), json.dumps(traces_json(spans)).encode(), "application/json")
    else:
        reply = post(_traces_url(server), traces_proto(spans))
    assert reply.status == 200, reply.body[:500]
    rows = query(
        server.http_url,
        "SELECT dropped_attributes_count, dropped_events_count, dropped_links_count FROM spans "
        "WHERE trace_id = ? ORDER BY span_id",
        [trace_id],
    )
    assert rows == [[0, 0, 0], [2**31 - 1, 2**31 - 1, 7]]


def test_json_integers_wider_than_their_protobuf_fields_reject_only_their_record(server: RunningServer) -> None:
    trace_id = unique_trace_id()
    spans = [span_json(trace_id, 0), span_json(trace_id, 1, flags=str(2**32)), span_json(trace_id, 2, flags=2**32 - 1)]
    reply = post(_traces_url(server), json.dumps(traces_json(spans)).encode(), "application/json")
    assert reply.status == 200, reply.body[:500]
    partial = reply.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert "spans[1]: flags is out of range for a uint32 (0 to 4294967295): 4294967296" in partial["errorMessage"]
    assert query(server.http_url, "SELECT flags FROM spans WHERE trace_id = ? ORDER BY span_id", [trace_id]) == [
        [0],
        [2**32 - 1],
    ]
    good = {"timeUnixNano": "1700000000000000000", "traceId": trace_id, "body": {"stringValue": "kept"}}
    loud = {**good, "severityNumber": 2**31, "body": {"stringValue": "too loud"}}
    reply = post(f"{server.http_url}/v1/logs", json.dumps(_logs_json([good, loud])).encode(), "application/json")
    assert reply.status == 200, reply.body[:500]
    partial = reply.json()["partialSuccess"]
    assert partial["rejectedLogRecords"] == "1"
    assert "logRecords[1]: severityNumber is out of range for an int32" in partial["errorMessage"]
    assert query(server.http_url, "SELECT body FROM logs WHERE trace_id = ?", [trace_id]) == [['"kept"']]
