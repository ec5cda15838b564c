"""OTLP load generator for the ingest benchmark: realistic agent traces over OTLP/gRPC or OTLP/HTTP.

Each trace is an ``invoke_agent`` root with alternating ``chat <model>`` spans (GenAI attributes, ~2 KB
``gen_ai.input.messages`` and a shorter ``gen_ai.output.messages``) and ``execute_tool <tool>`` spans
(arguments and result). Requests (``--batch`` spans each) are built and serialized by every exporter
process *before* sending starts, so the measured rate is the receiver's. Exporters retry
429/502/503/504 and RESOURCE_EXHAUSTED/UNAVAILABLE, honouring ``Retry-After`` and gRPC ``RetryInfo``.

    python bench/loadgen.py --protocol grpc --target 127.0.0.1:4317 --spans 200000
    python bench/loadgen.py --protocol http --target http://127.0.0.1:4318 --spans 200000

Prints one JSON line: spans sent and acknowledged, requests, retries, failures, first-send time.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import random
import sys
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import asdict, dataclass

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
RETRYABLE_HTTP = {429, 502, 503, 504}
MAX_ATTEMPTS = 50

_PROSE = (
    "please find the cheapest flight to lisbon next friday and book a window seat then email the "
    "itinerary to my manager check the refund policy for order number status shipping weather forecast "
    "the customer asked about invoice totals compare quarterly revenue summarize the findings briefly"
)
_VOCABULARY = tuple(_PROSE.split())
_MODELS = ("gpt-4o-mini", "claude-sonnet-4", "gemini-2.5-flash")
_TOOLS = ("search_flights", "book_seat", "send_email", "lookup_order", "get_weather", "query_revenue")
_AGENTS = ("travel_agent", "support_agent", "analyst_agent")


def _prose(rng: random.Random, size: int) -> str:
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(_VOCABULARY)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


def _input_messages(rng: random.Random, size: int = 2048) -> str:
    """A ~2 KB OTel GenAI ``gen_ai.input.messages`` JSON document."""
    share = size // 3
    return json.dumps(
        [
            {"role": "system", "parts": [{"type": "text", "content": _prose(rng, share)}]},
            {"role": "user", "parts": [{"type": "text", "content": _prose(rng, share)}]},
            {
                "role": "tool",
                "parts": [
                    {
                        "type": "tool_call_response",
                        "id": f"call_{rng.getrandbits(32):08x}",
                        "response": _prose(rng, share - 120),
                    }
                ],
            },
        ]
    )


def _attribute(key: str, value: str | int | float | bool) -> common_pb2.KeyValue:
    any_value = common_pb2.AnyValue()
    if isinstance(value, bool):
        any_value.bool_value = value
    elif isinstance(value, int):
        any_value.int_value = value
    elif isinstance(value, float):
        any_value.double_value = value
    else:
        any_value.string_value = value
    return common_pb2.KeyValue(key=key, value=any_value)


class TraceFactory:
    """Builds agent traces as protobuf spans from a pool of pre-generated message texts."""

    def __init__(self, seed: int, pool_size: int = 64) -> None:
        self.rng = random.Random(seed)
        self.inputs = [_input_messages(self.rng) for _ in range(pool_size)]
        self.outputs = [
            json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": _prose(self.rng, 400)}]}])
            for _ in range(pool_size)
        ]
        self.arguments = [json.dumps({"query": _prose(self.rng, 100), "limit": 5}) for _ in range(pool_size)]
        self.results = [json.dumps({"items": [_prose(self.rng, 80) for _ in range(4)]}) for _ in range(pool_size)]
        self.clock = time.time_ns() - 3600 * 10**9

    def trace(self, span_count: int) -> list[trace_pb2.Span]:
        rng = self.rng
        trace_id, root_id = rng.randbytes(16), rng.randbytes(8)
        agent, model = rng.choice(_AGENTS), rng.choice(_MODELS)
        start = self.clock = self.clock + rng.randrange(10**6, 10**9)
        cursor = start + 10**6
        children = []
        for index in range(span_count - 1):
            duration = rng.randrange(5, 3000) * 10**6
            is_chat = index % 2 == 0 or index == span_count - 2
            pick = rng.randrange(len(self.inputs))
            if is_chat:
                name, kind = f"chat {model}", trace_pb2.Span.SPAN_KIND_CLIENT
                attributes = [
                    _attribute("gen_ai.operation.name", "chat"),
                    _attribute("gen_ai.provider.name", "openai"),
                    _attribute("gen_ai.request.model", model),
                    _attribute("gen_ai.request.temperature", 0.2),
                    _attribute("gen_ai.usage.input_tokens", rng.randrange(200, 6000)),
                    _attribute("gen_ai.usage.output_tokens", rng.randrange(20, 600)),
                    _attribute("gen_ai.response.id", f"chatcmpl-{rng.getrandbits(48):012x}"),
                    _attribute("gen_ai.input.messages", self.inputs[pick]),
                    _attribute("gen_ai.output.messages", self.outputs[pick]),
                ]
            else:
                tool = rng.choice(_TOOLS)
                name, kind = f"execute_tool {tool}", trace_pb2.Span.SPAN_KIND_INTERNAL
                attributes = [
                    _attribute("gen_ai.operation.name", "execute_tool"),
                    _attribute("gen_ai.tool.name", tool),
                    _attribute("gen_ai.tool.call.id", f"call_{rng.getrandbits(32):08x}"),
                    _attribute("gen_ai.tool.call.arguments", self.arguments[pick]),
                    _attribute("gen_ai.tool.call.result", self.results[pick]),
                ]
            children.append(
                trace_pb2.Span(
                    trace_id=trace_id,
                    span_id=rng.randbytes(8),
                    parent_span_id=root_id,
                    name=name,
                    kind=kind,
                    start_time_unix_nano=cursor,
                    end_time_unix_nano=cursor + duration,
                    attributes=attributes,
                )
            )
            cursor += duration + 10**5
        root = trace_pb2.Span(
            trace_id=trace_id,
            span_id=root_id,
            name=f"invoke_agent {agent}",
            kind=trace_pb2.Span.SPAN_KIND_INTERNAL,
            start_time_unix_nano=start,
            end_time_unix_nano=cursor,
            attributes=[
                _attribute("gen_ai.operation.name", "invoke_agent"),
                _attribute("gen_ai.agent.name", agent),
                _attribute("gen_ai.conversation.id", f"conv_{rng.getrandbits(64):016x}"),
            ],
            status=trace_pb2.Status(code=trace_pb2.Status.STATUS_CODE_OK),
        )
        return [root, *children]


def build_requests(total_spans: int, batch_size: int, seed: int, spans_per_trace: int = 10) -> list[bytes]:
    """Serialized ExportTraceServiceRequests holding ``total_spans`` spans, ``batch_size`` per request."""
    factory = TraceFactory(seed)
    resource = resource_pb2.Resource(
        attributes=[_attribute("service.name", "bench-agent"), _attribute("telemetry.sdk.language", "python")]
    )
    scope = common_pb2.InstrumentationScope(name="tracegrade.bench", version="1.0")
    pending: list[trace_pb2.Span] = []
    produced = 0
    bodies = []
    while produced < total_spans:
        spans = factory.trace(min(spans_per_trace, max(2, total_spans - produced)))[: total_spans - produced]
        produced += len(spans)
        pending.extend(spans)
        while len(pending) >= batch_size or (produced >= total_spans and pending):
            batch, pending = pending[:batch_size], pending[batch_size:]
            request = trace_service_pb2.ExportTraceServiceRequest(
                resource_spans=[
                    trace_pb2.ResourceSpans(
                        resource=resource, scope_spans=[trace_pb2.ScopeSpans(scope=scope, spans=batch)]
                    )
                ]
            )
            bodies.append(request.SerializeToString())
    return bodies


# -- senders ---------------------------------------------------------------------------------------------


class RetryableRefusal(Exception):
    def __init__(self, detail: str, retry_after: float | None) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


def _retry_info_seconds(trailers: object) -> float | None:
    try:
        from google.rpc import error_details_pb2
    except ImportError:
        return None
    for key, value in trailers or ():  # type: ignore[attr-defined]
        if key == "google.rpc.retryinfo-bin":
            info = error_details_pb2.RetryInfo.FromString(value)
            return info.retry_delay.seconds + info.retry_delay.nanos / 1e9
    return None


def grpc_sender(target: str, token: str | None) -> Callable[[bytes], None]:
    import grpc

    channel = grpc.insecure_channel(target, options=[("grpc.max_send_message_length", 64 * 1024 * 1024)])
    export = channel.unary_unary(EXPORT_METHOD)
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    retryable = {grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}

    def send(body: bytes) -> None:
        try:
            export(body, timeout=120, metadata=metadata)
        except grpc.RpcError as error:
            if error.code() in retryable:  # type: ignore[attr-defined]
                raise RetryableRefusal(str(error.code()), _retry_info_seconds(error.trailing_metadata())) from None  # type: ignore[attr-defined]
            raise

    return send


def http_sender(base_url: str, token: str | None) -> Callable[[bytes], None]:
    url = urllib.parse.urlsplit(base_url)
    headers = {"Content-Type": "application/x-protobuf"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=120)

    def send(body: bytes) -> None:
        nonlocal connection
        try:
            connection.request("POST", "/v1/traces", body=body, headers=headers)
            response = connection.getresponse()
            detail = response.read()
        except (ConnectionError, TimeoutError, http.client.HTTPException) as exc:
            connection.close()
            connection = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
            raise RetryableRefusal(f"connection: {exc!r}", None) from None
        if response.status in RETRYABLE_HTTP:
            retry_after = response.getheader("Retry-After")
            raise RetryableRefusal(f"HTTP {response.status}", float(retry_after) if retry_after else None)
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {detail[:300]!r}")

    return send


@dataclass
class ExporterReport:
    spans_acked: int = 0
    requests: int = 0
    retries: int = 0
    failed_requests: int = 0
    first_send: float = 0.0
    last_ack: float = 0.0


def send_all(send: Callable[[bytes], None], bodies: list[bytes], spans_per_body: list[int]) -> ExporterReport:
    """Send every body, retrying retryable refusals with the server's delay or jittered backoff."""
    report = ExporterReport(first_send=time.time())
    for body, span_count in zip(bodies, spans_per_body, strict=True):
        for attempt in range(MAX_ATTEMPTS):
            try:
                send(body)
            except RetryableRefusal as refusal:
                report.retries += 1
                backoff = min(2.0, 0.05 * 2**attempt) * random.uniform(0.8, 1.2)
                time.sleep(refusal.retry_after if refusal.retry_after is not None else backoff)
                continue
            except Exception as exc:
                print(f"loadgen: request failed: {exc}", file=sys.stderr)
                report.failed_requests += 1
                break
            report.spans_acked += span_count
            break
        else:
            report.failed_requests += 1
        report.requests += 1
    report.last_ack = time.time()
    return report


def _span_count(body: bytes) -> int:
    request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
    return sum(len(scope.spans) for rs in request.resource_spans for scope in rs.scope_spans)


def _exporter(args: argparse.Namespace, index: int, spans: int, start: object, results: object) -> None:
    bodies = build_requests(spans, args.batch, seed=args.seed * 1000 + index)
    counts = [_span_count(body) for body in bodies]
    send = grpc_sender(args.target, args.token) if args.protocol == "grpc" else http_sender(args.target, args.token)
    start.wait()  # type: ignore[attr-defined]  # a barrier: everyone starts once all requests are built
    results.put(asdict(send_all(send, bodies, counts)))  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--protocol", choices=("grpc", "http"), required=True)
    parser.add_argument("--target", required=True, help="host:port for grpc, http://host:port for http")
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--concurrency", type=int, default=4, help="exporter processes")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--token", default=os.environ.get("TRACEGRADE_TOKEN"))
    args = parser.parse_args(argv)

    context = multiprocessing.get_context("spawn")
    start, results = context.Barrier(args.concurrency + 1), context.Queue()
    shares = [args.spans // args.concurrency + (i < args.spans % args.concurrency) for i in range(args.concurrency)]
    workers = [
        context.Process(target=_exporter, args=(args, i, share, start, results)) for i, share in enumerate(shares)
    ]
    for worker in workers:
        worker.start()
    start.wait(timeout=600)  # returns when every exporter has built and serialized its requests
    reports = [results.get() for _ in workers]
    for worker in workers:
        worker.join()
    summary = {
        "event": "done",
        "protocol": args.protocol,
        "spans_sent": args.spans,
        "spans_acked": sum(r["spans_acked"] for r in reports),
        "requests": sum(r["requests"] for r in reports),
        "retries": sum(r["retries"] for r in reports),
        "failed_requests": sum(r["failed_requests"] for r in reports),
        "first_send": min(r["first_send"] for r in reports),
        "last_ack": max(r["last_ack"] for r in reports),
    }
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
