"""Property-based decoder tests: generated requests round-trip; arbitrary input yields a result or DecodeError."""

from __future__ import annotations

import base64
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.decode_builders import span, traces_request
from tests.support.decode_otlp_json import otlp_json_dict
from tracegrade.errors import DecodeError
from tracegrade.ingest.decode import decode_logs_json, decode_logs_proto, decode_traces_json, decode_traces_proto

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)
scalars = (
    text
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.binary(max_size=12)
    | st.none()
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
attributes = st.dictionaries(text, values, max_size=6)


def _expected(value):
    """What the decoder promises for a Python value: bytes as base64 text, the rest as is."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, list):
        return [_expected(item) for item in value]
    if isinstance(value, dict):
        return {key: _expected(item) for key, item in value.items()}
    return value


@st.composite
def span_lists(draw):
    count = draw(st.integers(min_value=1, max_value=4))
    spans, expected = [], []
    for index in range(count):
        span_attributes = draw(attributes)
        name = draw(text.filter(bool))
        duration = draw(st.integers(min_value=0, max_value=10**12))
        spans.append(
            span(
                index,
                name=name,
                attributes=span_attributes,
                end_time_unix_nano=1_700_000_000_000_000_000 + index * 1000 + duration,
            )
        )
        expected.append((name, _expected(span_attributes)))
    return spans, expected


@SETTINGS
@given(span_lists())
def test_generated_requests_round_trip_through_protobuf_and_json(generated):
    spans, expected = generated
    request = traces_request(spans)
    from_proto = decode_traces_proto(request.SerializeToString())
    assert from_proto.rejected == []
    assert [(record.name, record.attributes) for record in from_proto.spans] == expected
    assert decode_traces_json(json.dumps(otlp_json_dict(request))) == from_proto


def _only_decode_errors(decode, body):
    try:
        decode(body)
    except DecodeError as exc:
        assert "internal decoder error" not in str(exc), str(exc)


@SETTINGS
@given(st.binary(max_size=600))
def test_arbitrary_bytes_as_protobuf(body):
    _only_decode_errors(decode_traces_proto, body)
    _only_decode_errors(decode_logs_proto, body)


@SETTINGS
@given(span_lists(), st.data())
def test_corrupted_protobuf_bodies(generated, data):
    body = bytearray(traces_request(generated[0]).SerializeToString())
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        position = data.draw(st.integers(min_value=0, max_value=len(body) - 1))
        body[position] = data.draw(st.integers(min_value=0, max_value=255))
    _only_decode_errors(decode_traces_proto, bytes(body[: data.draw(st.integers(0, len(body)))]))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=10,
)
SPAN_KEYS = [
    "traceId",
    "spanId",
    "parentSpanId",
    "name",
    "kind",
    "startTimeUnixNano",
    "endTimeUnixNano",
    "attributes",
    "events",
    "links",
    "status",
    "traceState",
    "flags",
    "droppedAttributesCount",
]
ANY_KEYS = ["stringValue", "intValue", "doubleValue", "boolValue", "bytesValue", "arrayValue", "kvlistValue"]
any_values = st.recursive(
    st.dictionaries(st.sampled_from(ANY_KEYS), json_values, max_size=2),
    lambda inner: (
        st.fixed_dictionaries({"arrayValue": st.fixed_dictionaries({"values": st.lists(inner, max_size=3)})})
        | st.fixed_dictionaries(
            {
                "kvlistValue": st.fixed_dictionaries(
                    {"values": st.lists(st.fixed_dictionaries({"key": text, "value": inner}), max_size=3)}
                )
            }
        )
    ),
    max_leaves=8,
)
key_value_lists = st.lists(st.fixed_dictionaries({"key": text, "value": any_values}) | json_values, max_size=3)
span_like = st.dictionaries(
    st.sampled_from(SPAN_KEYS),
    json_values | key_value_lists | st.sampled_from(["0af7651916cd43dd8448eb211c80319c", "00f067aa0ba902b7", "1"]),
)


@SETTINGS
@given(st.lists(span_like | json_values, max_size=4), st.booleans())
def test_arbitrary_otlp_shaped_json(spans, as_logs):
    key, inner, items = (
        ("resourceLogs", "scopeLogs", "logRecords") if as_logs else ("resourceSpans", "scopeSpans", "spans")
    )
    body = json.dumps({key: [{"resource": {}, inner: [{"scope": {"name": "s"}, items: spans}]}]})
    _only_decode_errors(decode_logs_json if as_logs else decode_traces_json, body)


@SETTINGS
@given(json_values | st.binary(max_size=200))
def test_arbitrary_json_documents_and_bytes(document):
    body = document if isinstance(document, bytes) else json.dumps(document)
    _only_decode_errors(decode_traces_json, body)
    _only_decode_errors(decode_logs_json, body)
