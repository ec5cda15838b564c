"""OTLP protobuf decoding: SDK-encoded round trips, every AnyValue kind, per-span rejections, bad bodies."""

from __future__ import annotations

import base64
import os
import random

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue, KeyValueList
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, StatusCode

from tests.support.decode_builders import (
    START,
    TRACE_ID,
    any_value,
    key_values,
    logs_request,
    nested_kvlist_bytes,
    span,
    traces_request,
    traces_request_with_raw_attribute,
)
from tracegrade.errors import DecodeError
from tracegrade.ingest.decode import (
    DecodeLimits,
    decode_logs_message,
    decode_logs_proto,
    decode_traces_message,
    decode_traces_proto,
)
from tracegrade.models.span import SpanRecord

SPAN_PATH = "resourceSpans[0].scopeSpans[0].spans[{}]"


def _sdk_spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "round-trip", "deployment": "test"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("decoder.tests", "3.1")
    with tracer.start_as_current_span("invoke_agent", kind=SpanKind.SERVER, attributes={"tags": ("a", "b")}) as root:
        with tracer.start_as_current_span(
            "chat", kind=SpanKind.CLIENT, links=[Link(root.get_span_context(), {"why": "because"})]
        ) as chat:
            chat.set_attribute("gen_ai.usage.input_tokens", 12)
            chat.set_attribute("temperature", 0.5)
            chat.set_attribute("stream", False)
            chat.add_event("gen_ai.choice", {"index": 0, "finish_reasons": ["stop"]})
        with tracer.start_as_current_span("execute_tool") as tool:
            tool.set_status(StatusCode.ERROR, "tool exploded")
    provider.shutdown()
    return exporter.get_finished_spans()


def test_sdk_encoded_spans_round_trip_field_by_field():
    finished = _sdk_spans()
    request = encode_spans(finished)
    encoded_flags = {
        s.span_id.hex(): s.flags for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans
    }
    body = request.SerializeToString()
    decoded = decode_traces_proto(body)
    assert decoded.rejected == []
    assert len(decoded.spans) == len(finished) == 3
    by_id = {record.span_id: record for record in decoded.spans}
    for sdk_span in finished:
        record = by_id[format(sdk_span.context.span_id, "016x")]
        assert record.trace_id == format(sdk_span.context.trace_id, "032x")
        assert record.name == sdk_span.name
        assert record.start_ns == sdk_span.start_time and record.end_ns == sdk_span.end_time
        assert record.kind == sdk_span.kind.name
        assert record.parent_span_id == (format(sdk_span.parent.span_id, "016x") if sdk_span.parent else None)
        assert record.status_code == sdk_span.status.status_code.name
        assert record.status_message == (sdk_span.status.description or "")
        assert record.attributes == {k: list(v) if isinstance(v, tuple) else v for k, v in sdk_span.attributes.items()}
        assert record.resource == dict(sdk_span.resource.attributes)
        assert (record.scope_name, record.scope_version) == ("decoder.tests", "3.1")
        assert record.flags == encoded_flags[record.span_id] != 0
        assert [(e.name, e.time_ns) for e in record.events] == [(e.name, e.timestamp) for e in sdk_span.events]
        assert [(link.trace_id, link.span_id, link.attributes) for link in record.links] == [
            (format(link.context.trace_id, "032x"), format(link.context.span_id, "016x"), dict(link.attributes))
            for link in sdk_span.links
        ]
    chat = next(record for record in decoded.spans if record.name == "chat")
    assert chat.events[0].attributes == {"index": 0, "finish_reasons": ["stop"]}
    assert next(r for r in decoded.spans if r.name == "execute_tool").status_code == "ERROR"


EVERY_KIND = {
    "text": "héllo ✓",
    "empty_text": "",
    "flag": True,
    "count": -(2**63),
    "ratio": 2.5,
    "blob": b"\x00\xffbinary",
    "list": ["a", 1, 2.0, False, None, b"\x01"],
    "map": {"inner": {"deeper": [1, {"x": "y"}]}, "nothing": None},
    "empty_list": [],
    "empty_map": {},
    "unset": None,
}
EXPECTED_KIND = {
    **EVERY_KIND,
    "blob": base64.b64encode(b"\x00\xffbinary").decode(),
    "list": ["a", 1, 2.0, False, None, base64.b64encode(b"\x01").decode()],
}


def test_every_anyvalue_kind_decodes_to_plain_python():
    request = traces_request([span(0, attributes=EVERY_KIND)], resource={"service.name": "kinds", "ids": [1, 2]})
    (record,) = decode_traces_proto(request.SerializeToString()).spans
    assert record.attributes == EXPECTED_KIND
    assert record.resource == {"service.name": "kinds", "ids": [1, 2]}
    assert record.service_name == "kinds"


def test_all_span_fields_including_events_links_and_dropped_counts():
    link_trace = bytes(range(1, 17))
    full = span(
        3,
        parent_span_id=b"\x00\x00\x00\x00\x00\x00\x00\x09",
        kind=Span.SPAN_KIND_CONSUMER,
        trace_state="vendor=1",
        flags=0x101,
        status=Status(code=Status.STATUS_CODE_ERROR, message="boom"),
        dropped_attributes_count=4,
        dropped_events_count=5,
        dropped_links_count=6,
        events=[
            Span.Event(
                time_unix_nano=START + 7, name="exception", attributes=key_values({"a": 1}), dropped_attributes_count=2
            )
        ],
        links=[
            Span.Link(
                trace_id=link_trace,
                span_id=b"\x01" * 8,
                trace_state="t=2",
                attributes=key_values({"l": "x"}),
                dropped_attributes_count=1,
            )
        ],
    )
    (record,) = decode_traces_message(traces_request([full], scope=("my.scope", "9.9"))).spans
    assert record == SpanRecord(
        trace_id=TRACE_ID.hex(),
        span_id="0000000000000004",
        name="span 3",
        start_ns=START + 3000,
        end_ns=START + 3500,
        parent_span_id="0000000000000009",
        kind="CONSUMER",
        attributes={"index": 3},
        events=record.events,
        links=record.links,
        status_code="ERROR",
        status_message="boom",
        resource={"service.name": "decoder-test"},
        scope_name="my.scope",
        scope_version="9.9",
        trace_state="vendor=1",
        flags=0x101,
        dropped_attributes_count=4,
        dropped_events_count=5,
        dropped_links_count=6,
    )
    (event,) = record.events
    assert (event.name, event.time_ns, event.attributes, event.dropped_attributes_count) == (
        "exception",
        START + 7,
        {"a": 1},
        2,
    )
    (link,) = record.links
    assert (link.trace_id, link.span_id, link.trace_state, link.attributes, link.dropped_attributes_count) == (
        link_trace.hex(),
        "01" * 8,
        "t=2",
        {"l": "x"},
        1,
    )


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"span_id": b"\x01" * 7}, "spanId must be 8 bytes, got 7"),
        ({"span_id": b""}, "spanId must be 8 bytes, got 0"),
        ({"trace_id": b"\x02" * 15}, "traceId must be 16 bytes, got 15"),
        ({"trace_id": b"\x00" * 16}, "traceId is all zeros, which OTLP defines as invalid"),
        ({"span_id": b"\x00" * 8}, "spanId is all zeros, which OTLP defines as invalid"),
        ({"parent_span_id": b"\x01\x02\x03"}, "parentSpanId must be 8 bytes when set, got 3"),
        ({"name": ""}, "name is missing or empty"),
        ({"start_time_unix_nano": 0}, "startTimeUnixNano is missing (0)"),
        ({"end_time_unix_nano": 0}, "endTimeUnixNano is missing (0)"),
        ({"end_time_unix_nano": START - 1}, f"endTimeUnixNano ({START - 1}) is before startTimeUnixNano"),
        ({"links": [Span.Link(trace_id=TRACE_ID, span_id=b"\x01" * 3)]}, "links[0].spanId must be 8 bytes, got 3"),
    ],
)
def test_one_bad_span_is_rejected_and_the_rest_kept(fields, reason):
    spans = [span(0), span(1, **fields), span(2)]
    decoded = decode_traces_proto(traces_request(spans).SerializeToString())
    assert [record.name for record in decoded.spans] == ["span 0", "span 2"]
    (rejection,) = decoded.rejected
    assert rejection.where == SPAN_PATH.format(1)
    assert rejection.reason.startswith(reason)


def test_rejection_carries_the_bad_span_id_for_the_report():
    decoded = decode_traces_proto(traces_request([span(0, span_id=b"\xab" * 7)]).SerializeToString())
    assert decoded.rejected[0].span_id == "ab" * 7


def test_all_zero_parent_means_root():
    (record,) = decode_traces_proto(traces_request([span(0, parent_span_id=b"\0" * 8)]).SerializeToString()).spans
    assert record.parent_span_id is None


def test_truncated_body_is_a_decode_error_naming_the_spot():
    body = traces_request([span(0), span(1)]).SerializeToString()
    with pytest.raises(DecodeError, match=r"resourceSpans\[0\]: field at byte offset 0 declares \d+ bytes"):
        decode_traces_proto(body[:-5])


def test_random_bytes_are_a_decode_error_or_an_empty_result():
    rng = random.Random(1234)
    errors = 0
    for _ in range(200):
        body = rng.randbytes(rng.randrange(1, 400))
        try:
            decoded = decode_traces_proto(body)
        except DecodeError as exc:
            assert "internal decoder error" not in str(exc)
            errors += 1
        else:
            assert all(len(record.span_id) == 16 for record in decoded.spans)
    assert errors > 150


def test_invalid_utf8_in_a_string_field_names_the_field():
    body = traces_request([span(0), span(1, name="bad name")]).SerializeToString().replace(b"bad name", b"bad \xffame")
    with pytest.raises(DecodeError, match=r"spans\[1\]\.name: invalid UTF-8 at byte offset \d+"):
        decode_traces_proto(body)


def test_json_sent_as_protobuf_gets_a_hint():
    with pytest.raises(DecodeError, match="looks like JSON") as caught:
        decode_traces_proto(b'{"resourceSpans": []}')
    # the hint holds for a gRPC export too, which has no content type to change
    assert "OTLP/JSON over OTLP/HTTP with Content-Type: application/json (OTLP/gRPC carries protobuf only)" in str(
        caught.value
    )


def test_empty_body_is_an_empty_request():
    assert decode_traces_proto(b"").spans == []


def test_ten_megabyte_value_is_truncated_with_a_marker():
    huge = "x" * (10 * 1024 * 1024)
    (record,) = decode_traces_proto(
        traces_request([span(0, attributes={"big": huge, "ok": "y"})]).SerializeToString()
    ).spans
    limit = DecodeLimits().max_attribute_value_bytes
    assert record.attributes["big"].startswith("x" * limit)
    assert record.attributes["big"].endswith(f"…[truncated {len(huge) - limit} bytes]")
    assert record.attributes["ok"] == "y"
    assert record.dropped_attributes_count == 0


def test_a_huge_span_name_event_name_and_status_message_are_cut_like_values():
    limits = DecodeLimits(max_attribute_value_bytes=10)
    long = "n" * 100
    body = traces_request(
        [span(0, name=long, events=[Span.Event(name=long)], status=Status(code=2, message=long))]
    ).SerializeToString()
    (record,) = decode_traces_proto(body, limits).spans
    cut = "n" * 10 + "…[truncated 90 bytes]"
    assert (record.name, record.events[0].name, record.status_message) == (cut, cut, cut)
    (plain,) = decode_traces_proto(traces_request([span(0, name="short")]).SerializeToString(), limits).spans
    assert plain.name == "short"


def test_truncation_never_splits_a_multibyte_character():
    limits = DecodeLimits(max_attribute_value_bytes=10)
    (record,) = decode_traces_proto(
        traces_request([span(0, attributes={"t": "ééééééé", "b": b"0123456789abcdef"})]).SerializeToString(), limits
    ).spans
    assert record.attributes["t"] == "ééééé…[truncated 4 bytes]"
    assert record.attributes["b"].startswith(base64.b64encode(b"0123456789abcdef").decode()[:10] + "…[truncated")


def test_ten_thousand_attributes_are_capped_and_counted():
    attributes = {f"key.{index}": index for index in range(10_000)}
    (record,) = decode_traces_proto(
        traces_request([span(0, attributes=attributes, dropped_attributes_count=3)]).SerializeToString()
    ).spans
    limit = DecodeLimits().max_attributes_per_span
    assert len(record.attributes) == limit
    assert record.attributes["key.0"] == 0 and f"key.{limit}" not in record.attributes
    assert record.dropped_attributes_count == 3 + 10_000 - limit


def test_events_links_and_collections_over_their_limits():
    limits = DecodeLimits(max_events_per_span=2, max_links_per_span=1, max_collection_items=3)
    many = span(
        0,
        attributes={"arr": list(range(5)), "map": {str(i): i for i in range(5)}},
        events=[Span.Event(name=f"e{i}", time_unix_nano=START) for i in range(5)],
        links=[Span.Link(trace_id=TRACE_ID, span_id=bytes([1, 2, 3, 4, 5, 6, 7, i + 1])) for i in range(3)],
    )
    (record,) = decode_traces_message(traces_request([many]), limits).spans
    assert [event.name for event in record.events] == ["e0", "e1"] and record.dropped_events_count == 3
    assert len(record.links) == 1 and record.dropped_links_count == 2
    assert record.attributes["arr"] == [0, 1, 2, "<2 more items dropped>"]
    assert record.attributes["map"] == {"0": 0, "1": 1, "2": 2, "<truncated>": "<2 more items dropped>"}


def test_nesting_beyond_the_limit_becomes_a_marker():
    (record,) = decode_traces_proto(traces_request_with_raw_attribute(nested_kvlist_bytes(25))).spans
    value, depth = record.attributes["deep"], 0
    while isinstance(value, dict):
        value, depth = value["k"], depth + 1
    assert (depth, value) == (DecodeLimits().max_nesting_depth, "<nested too deeply>")


def test_ten_thousand_deep_kvlist_is_refused_without_crashing():
    with pytest.raises(DecodeError, match="nested more than 100 levels deep"):
        decode_traces_proto(traces_request_with_raw_attribute(nested_kvlist_bytes(10_000)))


def test_too_many_spans_in_one_request():
    with pytest.raises(DecodeError, match="holds 3 spans, more than the limit of 2"):
        decode_traces_proto(
            traces_request([span(i) for i in range(3)]).SerializeToString(), DecodeLimits(max_spans_per_request=2)
        )


def test_non_bytes_body_is_a_decode_error():
    with pytest.raises(DecodeError, match="must be bytes"):
        decode_traces_proto("not bytes")  # type: ignore[arg-type]


# -- logs ------------------------------------------------------------------------------------------


def _log(**fields) -> LogRecord:
    attributes = fields.pop("attributes", {})
    body = fields.pop("body", None)
    record = LogRecord(attributes=key_values(attributes), **fields)
    if body is not None:
        record.body.CopyFrom(any_value(body))
    return record


def test_log_records_decode_with_ids_body_and_event_name():
    records = [
        _log(
            time_unix_nano=START,
            observed_time_unix_nano=START + 1,
            trace_id=TRACE_ID,
            span_id=b"\x07" * 8,
            event_name="gen_ai.user.message",
            body={"content": "hi", "role": "user"},
            severity_number=9,
            severity_text="INFO",
            flags=1,
            dropped_attributes_count=2,
            attributes={"a": 1},
        ),
        _log(observed_time_unix_nano=START + 5, attributes={"event.name": "gen_ai.choice"}, body="plain"),
        _log(time_unix_nano=START, trace_id=b"\0" * 16, span_id=b"\0" * 8),
    ]
    decoded = decode_logs_proto(logs_request(records, resource={"service.name": "logs"}).SerializeToString())
    assert decoded.rejected == []
    first, second, third = decoded.records
    assert (first.time_ns, first.observed_time_ns, first.trace_id, first.span_id) == (
        START,
        START + 1,
        TRACE_ID.hex(),
        "07" * 8,
    )
    assert (first.event_name, first.body, first.severity_number, first.severity_text) == (
        "gen_ai.user.message",
        {"content": "hi", "role": "user"},
        9,
        "INFO",
    )
    assert (first.flags, first.dropped_attributes_count, first.attributes) == (1, 2, {"a": 1})
    assert (first.resource, first.scope_name) == ({"service.name": "logs"}, "test.logs")
    assert (second.time_ns, second.event_name, second.body, second.trace_id) == (
        START + 5,
        "gen_ai.choice",
        "plain",
        None,
    )
    assert (third.trace_id, third.span_id, third.body) == (None, None, None)


def test_log_record_with_a_bad_span_id_is_rejected_alone():
    decoded = decode_logs_message(
        logs_request([_log(time_unix_nano=1, span_id=b"\x01" * 5), _log(time_unix_nano=2, body="kept")])
    )
    assert [record.body for record in decoded.records] == ["kept"]
    (rejection,) = decoded.rejected
    assert (rejection.where, rejection.reason) == (
        "resourceLogs[0].scopeLogs[0].logRecords[0]",
        "spanId must be 8 bytes, got 5",
    )


def test_random_bytes_as_logs_never_raise_anything_else():
    for seed in range(100):
        try:
            decode_logs_proto(os.urandom(seed + 1))
        except DecodeError as exc:
            assert "internal decoder error" not in str(exc)


def test_a_huge_attribute_key_is_cut_like_a_value():
    limits = DecodeLimits(max_attribute_value_bytes=10)
    long = "k" * 100
    nested = AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key=long, value=AnyValue(int_value=2))]))
    request = traces_request([span(0, attributes={long: 1, "short": "v"})])
    request.resource_spans[0].scope_spans[0].spans[0].attributes.append(KeyValue(key="nested", value=nested))
    (record,) = decode_traces_proto(request.SerializeToString(), limits).spans
    cut = "k" * 10 + "…[truncated 90 bytes]"
    assert record.attributes == {cut: 1, "short": "v", "nested": {cut: 2}}
