"""OTLP/JSON decoding: hex ids, int64 strings, enum names, snake_case, fixtures, parity with protobuf, bad input."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from tests.support.decode_builders import START, TRACE_ID, key_values, span, traces_request
from tests.support.decode_otlp_json import otlp_json_dict
from tracegrade.errors import DecodeError
from tracegrade.ingest.decode import DecodeLimits, decode_logs_json, decode_traces_json, decode_traces_proto
from tracegrade.ingest.decode.limits import TOO_DEEP

FIXTURES = sorted((Path(__file__).parent / "data" / "otlp").glob("*.otlp.json"))
SPAN_PATH = "resourceSpans[0].scopeSpans[0].spans[{}]"


def _one_span(span_json: dict, **request_fields) -> dict:
    return {"resourceSpans": [{"scopeSpans": [{"spans": [span_json]}]}], **request_fields}


def _valid_span(**fields) -> dict:
    base = {
        "traceId": TRACE_ID.hex(),
        "spanId": "00000000000000aa",
        "name": "chat",
        "startTimeUnixNano": str(START),
        "endTimeUnixNano": str(START + 10),
    }
    base.update(fields)
    return base


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixtures_decode_without_rejections(path):
    raw = json.loads(path.read_text())
    raw_spans = [s for rs in raw["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    decoded = decode_traces_json(path.read_bytes())
    assert decoded.rejected == []
    assert len(decoded.spans) == len(raw_spans) > 0
    for record, source in zip(decoded.spans, raw_spans):
        assert record.trace_id == source["traceId"].lower() and record.span_id == source["spanId"].lower()
        assert record.parent_span_id == (source.get("parentSpanId") or None)
        assert record.name == source["name"]
        assert record.start_ns == int(source["startTimeUnixNano"]) and record.end_ns == int(source["endTimeUnixNano"])
        assert set(record.attributes) == {kv["key"] for kv in source.get("attributes", [])}
        assert len(record.events) == len(source.get("events", []))


def test_json_and_protobuf_of_the_same_request_decode_identically():
    spans = [
        span(
            0,
            attributes={
                "s": "x",
                "i": 2**62,
                "d": 1.5,
                "b": False,
                "raw": b"\x00\x01",
                "arr": [1, "two"],
                "kv": {"a": {"b": [None, 3]}},
                "none": None,
            },
        ),
        span(
            1,
            parent_span_id=(1).to_bytes(8, "big"),
            kind=Span.SPAN_KIND_CLIENT,
            trace_state="k=v",
            flags=0x301,
            status=Status(code=Status.STATUS_CODE_ERROR, message="bad"),
            dropped_attributes_count=1,
            events=[Span.Event(name="ev", time_unix_nano=START + 3, attributes=key_values({"e": 1}))],
            links=[Span.Link(trace_id=bytes(range(16)), span_id=b"\x05" * 8, attributes=key_values({"l": 1}))],
        ),
    ]
    request = traces_request(spans, resource={"service.name": "parity", "list": [1.0, 2.0]})
    from_proto = decode_traces_proto(request.SerializeToString())
    for enum_names in (False, True):
        body = json.dumps(otlp_json_dict(request, enum_names=enum_names))
        assert decode_traces_json(body) == from_proto


def test_ids_are_case_insensitive_and_stored_lower_case():
    decoded = decode_traces_json(_one_span(_valid_span(traceId=TRACE_ID.hex().upper(), spanId="00000000000000AA")))
    assert (decoded.spans[0].trace_id, decoded.spans[0].span_id) == (TRACE_ID.hex(), "00000000000000aa")


def test_base64_ids_are_rejected_with_a_hint():
    good = _valid_span()
    as_base64 = _valid_span(traceId=base64.b64encode(TRACE_ID).decode(), spanId="00000000000000bb")
    decoded = decode_traces_json({"resourceSpans": [{"scopeSpans": [{"spans": [good, as_base64]}]}]})
    assert len(decoded.spans) == 1
    (rejection,) = decoded.rejected
    assert rejection.where == SPAN_PATH.format(1)
    assert rejection.reason == (
        "traceId must be 32 hex characters (OTLP/JSON uses hex, not base64): "
        f"got {base64.b64encode(TRACE_ID).decode()!r}"
    )
    assert rejection.span_id == "00000000000000bb"


def test_base64_span_id_too():
    decoded = decode_traces_json(_one_span(_valid_span(spanId=base64.b64encode(b"\x01" * 8).decode())))
    assert "spanId must be 16 hex characters (OTLP/JSON uses hex, not base64)" in decoded.rejected[0].reason


def test_int64_as_strings_or_numbers_and_enum_names():
    decoded = decode_traces_json(
        _one_span(
            _valid_span(
                startTimeUnixNano=START,
                endTimeUnixNano=str(START + 5),
                kind="SPAN_KIND_PRODUCER",
                status={"code": "STATUS_CODE_OK"},
                attributes=[
                    {"key": "as_string", "value": {"intValue": "-9223372036854775808"}},
                    {"key": "as_number", "value": {"intValue": 42}},
                    {"key": "nan", "value": {"doubleValue": "NaN"}},
                    {"key": "inf", "value": {"doubleValue": "-Infinity"}},
                    {"key": "int_double", "value": {"doubleValue": 3}},
                    {"key": "bytes_urlsafe", "value": {"bytesValue": "-_8"}},
                ],
            )
        )
    )
    (record,) = decoded.spans
    assert (record.start_ns, record.end_ns, record.kind, record.status_code) == (START, START + 5, "PRODUCER", "OK")
    attributes = record.attributes
    assert attributes["as_string"] == -(2**63) and attributes["as_number"] == 42
    assert attributes["nan"] != attributes["nan"] and attributes["inf"] == float("-inf")
    assert attributes["int_double"] == 3.0 and isinstance(attributes["int_double"], float)
    assert attributes["bytes_urlsafe"] == base64.b64encode(b"\xfb\xff").decode()


def test_snake_case_field_names_are_accepted():
    body = {
        "resource_spans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"string_value": "snake"}}]},
                "scope_spans": [
                    {
                        "scope": {"name": "s"},
                        "spans": [
                            {
                                "trace_id": TRACE_ID.hex(),
                                "span_id": "00000000000000cc",
                                "parent_span_id": "00000000000000aa",
                                "name": "n",
                                "start_time_unix_nano": "1",
                                "end_time_unix_nano": "2",
                                "dropped_attributes_count": 3,
                                "attributes": [
                                    {
                                        "key": "k",
                                        "value": {
                                            "kvlist_value": {"values": [{"key": "x", "value": {"int_value": "7"}}]}
                                        },
                                    }
                                ],
                            }
                        ],
                    }
                ],
            }
        ]
    }
    (record,) = decode_traces_json(body).spans
    assert (record.parent_span_id, record.dropped_attributes_count, record.service_name) == (
        "00000000000000aa",
        3,
        "snake",
    )
    assert record.attributes == {"k": {"x": 7}}


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"spanId": "00000000000000"}, "spanId must be 16 hex characters, got 14: '00000000000000'"),
        ({"traceId": "zz" * 16}, "traceId must be 32 hex characters, got 32"),
        ({"traceId": "0" * 32}, "traceId is all zeros"),
        ({"traceId": 12}, "traceId must be a string of 32 hex characters, got number"),
        ({"parentSpanId": "abc"}, "parentSpanId must be 16 hex characters, got 3"),
        ({"name": ""}, "name is missing or empty"),
        ({"name": 5}, "name must be a string, got number"),
        ({"startTimeUnixNano": "soon"}, "startTimeUnixNano must be an integer (a number or a decimal string)"),
        ({"endTimeUnixNano": "0"}, "endTimeUnixNano is missing (0)"),
        ({"endTimeUnixNano": str(START - 1)}, "endTimeUnixNano"),
        ({"kind": "SPAN_KIND_SIDEWAYS"}, "kind must be an integer or an enum name"),
        ({"attributes": {"k": "v"}}, "attributes must be an array of {key, value} objects, got object"),
        (
            {"attributes": [{"key": 5, "value": {}}]},
            "attributes[0] must be an object with a string 'key', got key number",
        ),
        (
            {"attributes": [{"key": "n", "value": {"intValue": "12x"}}]},
            "attributes[0].value.intValue must be an integer",
        ),
        ({"attributes": [{"key": "n", "value": {"intValue": str(2**63)}}]}, "out of range for an int64"),
        (
            {"attributes": [{"key": "n", "value": {"arrayValue": {"values": [{"boolValue": 3}]}}}]},
            "attributes[0].value.arrayValue.values[0].boolValue: must be true or false, got number",
        ),
        (
            {"attributes": [{"key": "b", "value": {"bytesValue": "!!"}}]},
            "attributes[0].value.bytesValue: is not valid base64",
        ),
        ({"events": [{"name": "e", "attributes": [{"key": 1}]}]}, "events[0].attributes[0] must be an object"),
        ({"links": [{"traceId": TRACE_ID.hex(), "spanId": "1"}]}, "links[0].spanId must be 16 hex characters, got 1"),
        ({"status": {"code": 2, "message": 3}}, "status.message must be a string, got number"),
    ],
)
def test_one_malformed_span_is_rejected_with_its_path(fields, reason):
    spans = [_valid_span(spanId="00000000000000a1"), _valid_span(**fields), _valid_span(spanId="00000000000000a3")]
    decoded = decode_traces_json({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    assert [record.span_id for record in decoded.spans] == ["00000000000000a1", "00000000000000a3"]
    (rejection,) = decoded.rejected
    assert rejection.where == SPAN_PATH.format(1)
    assert reason in rejection.reason


def test_an_integer_of_thousands_of_digits_rejects_only_its_span():
    wide = "9" * 5000  # more digits than Python converts from text by default (4,300)
    spans = [
        _valid_span(spanId="00000000000000a1"),
        _valid_span(spanId="00000000000000a2", attributes=[{"key": "n", "value": {"intValue": 0}}]),
        _valid_span(spanId="00000000000000a3", attributes=[{"key": "n", "value": {"intValue": "-" + wide}}]),
        _valid_span(spanId="00000000000000a4", attributes=[{"key": "s", "value": {"stringValue": 0}}]),
        _valid_span(spanId="00000000000000a5", attributes=[{"key": "n", "value": {"intValue": 2**70}}]),
    ]
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    body = body.replace('"intValue": 0', f'"intValue": {wide}').replace('"stringValue": 0', f'"stringValue": -{wide}')
    decoded = decode_traces_json(body.encode())
    assert [record.span_id for record in decoded.spans] == ["00000000000000a1"]
    reasons = [(rejection.where, rejection.reason) for rejection in decoded.rejected]
    int64 = f"out of range for an int64 ({-(2**63)} to {2**63 - 1}): a number of more than 20 digits"
    assert reasons == [
        (SPAN_PATH.format(1), f"attributes[0].value.intValue is {int64}"),
        (SPAN_PATH.format(2), f"attributes[0].value.intValue is {int64}"),
        (SPAN_PATH.format(3), "attributes[0].value.stringValue: must be a string, got a number of 5000 digits"),
        (SPAN_PATH.format(4), f"attributes[0].value.intValue is {int64}"),
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"resourceSpans": [', "invalid JSON at line 1, column 20: Expecting value"),
        (b'{\n  "resourceSpans": [],\n  oops\n}', "invalid JSON at line 3, column 3"),
        (b"[1, 2]", "must be a JSON object with a 'resourceSpans' array, got array"),
        (b'{"resourceSpans": {"a": 1}}', "'resourceSpans' must be an array, got object"),
        (b'{"resourceSpans": [{"scopeSpans": 5}]}', "resourceSpans[0].scopeSpans must be an array, got number"),
        (b'{"resourceSpans": [{"resource": {"attributes": [{"key": 1}]}}]}', "resourceSpans[0].resource.attributes[0]"),
        (b'{"resourceLogs": []}', "this request holds 'resourceLogs', not 'resourceSpans': send it to /v1/logs"),
        (b'{"name": "\xff\xfe"}', "body is not valid UTF-8: byte 0xff at offset 10"),
        (b'{"resourceSpans": [], "x": "\\ud800"}', "unpaired surrogate"),
        (
            b"[" * 10_000 + b"]" * 10_000,
            "nested too deeply for the parser (500 levels of arrays or objects open at line 1, column 500)",
        ),
        # brackets inside strings are text, and the place is given by line and column
        (b'{"a": "[[[[{{",\n  "b": ' + b"[" * 10_000 + b"]" * 10_000 + b"}", "open at line 2, column 506"),
    ],
)
def test_whole_request_errors(body, message):
    with pytest.raises(DecodeError) as caught:
        decode_traces_json(body)
    assert message in str(caught.value)


def test_empty_object_is_an_empty_request_and_a_bom_is_tolerated():
    assert decode_traces_json(b"{}").spans == []
    assert len(decode_traces_json("\ufeff" + json.dumps(_one_span(_valid_span()))).spans) == 1


def test_ten_thousand_deep_kvlist_is_bounded():
    depth = 10_000
    opening = '{"kvlistValue": {"values": [{"key": "k", "value": '
    deep_text = opening * depth + '{"stringValue": "bottom"}' + "}]}}" * depth
    span_text = json.dumps(_one_span(_valid_span(attributes=[{"key": "deep", "value": "PLACEHOLDER"}])))
    with pytest.raises(DecodeError, match="nested too deeply"):
        decode_traces_json(span_text.replace('"PLACEHOLDER"', deep_text))

    value: dict = {"stringValue": "bottom"}
    for _ in range(depth):
        value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
    # an already-parsed request skips the parser's limit; the decoder still stops at max_nesting_depth
    (record,) = decode_traces_json(_one_span(_valid_span(attributes=[{"key": "deep", "value": value}]))).spans
    node, levels = record.attributes["deep"], 0
    while isinstance(node, dict):
        node, levels = node["k"], levels + 1
    assert (levels, node) == (DecodeLimits().max_nesting_depth, TOO_DEEP)


def test_ten_megabyte_value_and_ten_thousand_attributes():
    attributes = [{"key": f"k{i}", "value": {"intValue": i}} for i in range(10_000)]
    attributes[0] = {"key": "big", "value": {"stringValue": "é" * (5 * 1024 * 1024)}}
    (record,) = decode_traces_json(json.dumps(_one_span(_valid_span(attributes=attributes))).encode()).spans
    limit = DecodeLimits()
    assert len(record.attributes) == limit.max_attributes_per_span
    assert record.dropped_attributes_count == 10_000 - limit.max_attributes_per_span
    assert record.attributes["big"].startswith("é" * (limit.max_attribute_value_bytes // 2))
    assert record.attributes["big"].endswith(f"…[truncated {10 * 1024 * 1024 - limit.max_attribute_value_bytes} bytes]")


def test_a_huge_span_name_event_name_and_status_message_are_cut_like_values():
    long = "n" * 100
    item = _valid_span(name=long, events=[{"name": long}], status={"code": 2, "message": long})
    limits = DecodeLimits(max_attribute_value_bytes=10)
    (record,) = decode_traces_json(json.dumps(_one_span(item)).encode(), limits).spans
    cut = "n" * 10 + "…[truncated 90 bytes]"
    assert (record.name, record.events[0].name, record.status_message) == (cut, cut, cut)


def test_logs_json():
    body = {
        "resourceLogs": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
                "scopeLogs": [
                    {
                        "scope": {"name": "log.scope"},
                        "logRecords": [
                            {
                                "timeUnixNano": "10",
                                "observedTimeUnixNano": "11",
                                "traceId": TRACE_ID.hex().upper(),
                                "spanId": "00000000000000AA",
                                "eventName": "gen_ai.user.message",
                                "severityNumber": "SEVERITY_NUMBER_WARN2",
                                "severityText": "WARN",
                                "body": {
                                    "kvlistValue": {"values": [{"key": "content", "value": {"stringValue": "hi"}}]}
                                },
                            },
                            {
                                "observedTimeUnixNano": 12,
                                "attributes": [{"key": "event.name", "value": {"stringValue": "x"}}],
                                "traceId": "",
                                "spanId": "0000000000000000",
                                "severityNumber": 9,
                            },
                            {"timeUnixNano": "13", "spanId": "abc"},
                        ],
                    }
                ],
            }
        ]
    }
    decoded = decode_logs_json(json.dumps(body))
    first, second = decoded.records
    assert (first.time_ns, first.observed_time_ns, first.trace_id, first.span_id) == (
        10,
        11,
        TRACE_ID.hex(),
        "00" * 7 + "aa",
    )
    assert (first.event_name, first.severity_number, first.severity_text, first.body) == (
        "gen_ai.user.message",
        14,
        "WARN",
        {"content": "hi"},
    )
    assert (first.resource, first.scope_name) == ({"service.name": "svc"}, "log.scope")
    assert (second.time_ns, second.event_name, second.trace_id, second.span_id, second.severity_number) == (
        12,
        "x",
        None,
        None,
        9,
    )
    (rejection,) = decoded.rejected
    assert rejection.where == "resourceLogs[0].scopeLogs[0].logRecords[2]"
    assert rejection.reason.startswith("spanId must be 16 hex characters, got 3")


def test_traces_request_sent_to_logs_is_refused():
    with pytest.raises(DecodeError, match="send it to /v1/traces"):
        decode_logs_json(_one_span(_valid_span()))


def test_a_huge_attribute_key_is_cut_like_a_value():
    long = "k" * 100
    nested = {"kvlistValue": {"values": [{"key": long, "value": {"intValue": "2"}}]}}
    attributes = [
        {"key": long, "value": {"intValue": "1"}},
        {"key": "short", "value": {"stringValue": "v"}},
        {"key": "nested", "value": nested},
    ]
    limits = DecodeLimits(max_attribute_value_bytes=10)
    (record,) = decode_traces_json(json.dumps(_one_span(_valid_span(attributes=attributes))).encode(), limits).spans
    cut = "k" * 10 + "…[truncated 90 bytes]"
    assert record.attributes == {cut: 1, "short": "v", "nested": {cut: 2}}
