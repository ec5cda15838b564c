"""Decode-only throughput of the OTLP decoders and the SDK span converter (run by hand).

Builds realistic agent traces (an ``invoke_agent`` root, ``chat`` spans with ~2 KB
``gen_ai.input.messages``/``gen_ai.output.messages`` and 13 other attributes, ``execute_tool`` spans),
512 spans per ExportTraceServiceRequest, serializes them as protobuf and as OTLP/JSON, and reports the
median spans/s of ``--repeat`` runs for each decoder (parse included), plus ``span_from_readable`` on
the same number of real SDK spans.

    python bench/bench_decode.py [--spans 512] [--requests 8] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support when run as a script

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status
from tests.support.decode_otlp_json import otlp_json_dict

from tracegrade.capture.sdk_convert import span_from_readable
from tracegrade.ingest.decode import decode_traces_json, decode_traces_message, decode_traces_proto

_WORDS = ("find", "the", "cheapest", "flight", "to", "lisbon", "book", "a", "window", "seat", "email", "itinerary")


def _text(rng: random.Random, size: int) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < size:
        words.append(rng.choice(_WORDS))
    return " ".join(words)


def _kv(key: str, value: Any) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def _chat_attributes(rng: random.Random) -> dict[str, Any]:
    messages = [{"role": "user", "parts": [{"type": "text", "content": _text(rng, 1900)}]}]
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 1024,
        "gen_ai.response.id": f"chatcmpl-{rng.getrandbits(48):012x}",
        "gen_ai.response.finish_reasons": "stop",
        "gen_ai.usage.input_tokens": rng.randrange(200, 6000),
        "gen_ai.usage.output_tokens": rng.randrange(20, 600),
        "server.address": "api.openai.com",
        "server.port": 443,
        "gen_ai.conversation.id": "conv_1234",
        "gen_ai.input.messages": json.dumps(messages),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": _text(rng, 1900)}]),
    }


def build_request(span_count: int, seed: int = 7) -> ExportTraceServiceRequest:
    rng = random.Random(seed)
    spans = []
    clock = 1_800_000_000_000_000_000
    root_id = trace_id = b""
    for index in range(span_count):
        clock += 1_000_000
        if index % 16 == 0:
            trace_id, root_id = rng.randbytes(16), rng.randbytes(8)
            name, parent, kind = "invoke_agent travel_agent", b"", Span.SPAN_KIND_INTERNAL
            attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel_agent"}
        elif index % 2:
            name, parent, kind, attributes = "chat gpt-4o-mini", root_id, Span.SPAN_KIND_CLIENT, _chat_attributes(rng)
        else:
            name, parent, kind = "execute_tool search_flights", root_id, Span.SPAN_KIND_INTERNAL
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search_flights",
                "gen_ai.tool.call.id": f"call_{rng.getrandbits(32):08x}",
                "gen_ai.tool.call.arguments": json.dumps({"query": _text(rng, 80)}),
                "gen_ai.tool.call.result": json.dumps({"items": [_text(rng, 60) for _ in range(3)]}),
            }
        spans.append(
            Span(
                trace_id=trace_id,
                span_id=rng.randbytes(8),
                parent_span_id=parent,
                name=name,
                kind=kind,
                start_time_unix_nano=clock,
                end_time_unix_nano=clock + rng.randrange(10**6, 10**9),
                attributes=[_kv(key, value) for key, value in attributes.items()],
                status=Status(code=Status.STATUS_CODE_OK),
            )
        )
    resource = Resource(attributes=[_kv("service.name", "bench-agent"), _kv("telemetry.sdk.language", "python")])
    scope = InstrumentationScope(name="tracegrade.bench", version="1.0")
    return ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(resource=resource, scope_spans=[ScopeSpans(scope=scope, spans=spans)])]
    )


def sdk_spans(count: int) -> list[Any]:
    """Finished ReadableSpans with the same attribute shape, from a real TracerProvider."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    rng = random.Random(3)
    with tracer.start_as_current_span("invoke_agent travel_agent"):
        for _ in range(count - 1):
            with tracer.start_as_current_span("chat gpt-4o-mini", attributes=_chat_attributes(rng)):
                pass
    provider.shutdown()
    return list(exporter.get_finished_spans())


def measure(label: str, run: Callable[[], int], repeat: int) -> float:
    rates = []
    for _ in range(repeat):
        start = time.perf_counter()
        spans = run()
        rates.append(spans / (time.perf_counter() - start))
    median = statistics.median(rates)
    print(f"{label:<44} median {median:>10,.0f} spans/s   (min {min(rates):,.0f}, max {max(rates):,.0f})")
    return median


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=512, help="spans per request")
    parser.add_argument("--requests", type=int, default=8, help="requests decoded per measured run")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    request = build_request(args.spans)
    proto_body = request.SerializeToString()
    json_body = json.dumps(otlp_json_dict(request)).encode()
    readable = sdk_spans(args.spans)
    print(
        f"{args.spans} spans/request, {args.requests} requests/run; protobuf {len(proto_body) / 1e6:.2f} MB, "
        f"OTLP/JSON {len(json_body) / 1e6:.2f} MB per request"
    )

    def proto() -> int:
        return sum(len(decode_traces_proto(proto_body).spans) for _ in range(args.requests))

    def message() -> int:
        return sum(len(decode_traces_message(request).spans) for _ in range(args.requests))

    def otlp_json() -> int:
        return sum(len(decode_traces_json(json_body).spans) for _ in range(args.requests))

    def sdk() -> int:
        return sum(len([span_from_readable(span) for span in readable]) for _ in range(args.requests))

    measure("decode_traces_proto (parse + decode)", proto, args.repeat)
    measure("decode_traces_message (already parsed)", message, args.repeat)
    measure("decode_traces_json (parse + decode)", otlp_json, args.repeat)
    measure("span_from_readable (SDK spans)", sdk, args.repeat)


if __name__ == "__main__":
    main()
