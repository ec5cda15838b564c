"""The tenant share against a real ``tracegrade serve --tokens`` with two tenants and two export slots: while one
of acme's requests is in flight (a large one, still being decoded), acme's next request is refused retryably
with its share named, and globex's is stored; acme's large request is stored too."""

from __future__ import annotations

import threading
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1 import trace_pb2

from tests.support.server_otlp import HttpReply, post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import (
    count_spans,
    receiver_metric,
    span_json,
    status_of,
    traces_proto,
    unique_trace_id,
)
from tests.support.tenant_traffic import write_tokens
from tests.support.waiting import wait_until

ACME, GLOBEX = "acme-share-token-00001", "globex-share-token-0002"
LARGE_SPANS = 90_000


def _large_request(trace_id: str) -> bytes:
    """One request of ``LARGE_SPANS`` small spans of one trace: seconds of decoding, a few MB on the wire."""
    template = ExportTraceServiceRequest.FromString(traces_proto([span_json(trace_id, 0)]))
    scope = template.resource_spans[0].scope_spans[0]
    one = scope.spans[0]
    spans = []
    for n in range(LARGE_SPANS):
        span = trace_pb2.Span()
        span.CopyFrom(one)
        span.span_id = (n + 1).to_bytes(8, "big")
        spans.append(span)
    del scope.spans[:]
    scope.spans.extend(spans)
    return template.SerializeToString()


def test_a_tenant_past_its_share_is_refused_retryably_and_the_other_tenant_gets_in(tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.yaml", {"acme": [ACME], "globex": [GLOBEX]})
    args = ("--tokens", str(tokens), "--max-inflight-requests", "2")
    with ServerProcess(tmp_path / "store.duckdb", extra_args=args) as server:
        url = f"{server.http_url}/v1/traces"
        large_trace, acme_trace, globex_trace = unique_trace_id(), unique_trace_id(), unique_trace_id()
        body = _large_request(large_trace)
        replies: dict[str, HttpReply] = {}
        sender = threading.Thread(target=lambda: replies.setdefault("large", post(url, body, token=ACME)))
        sender.start()
        wait_until(lambda: receiver_metric(server.http_url, "inflight_requests") == 1, "the large request", 60, 0.01)
        refused = post(url, traces_proto([span_json(acme_trace, 0)]), token=ACME)
        admitted = post(url, traces_proto([span_json(globex_trace, 0)]), token=GLOBEX)
        sender.join(120)

        assert refused.status == 503 and refused.headers["Retry-After"] == "1", refused.body
        assert status_of(refused).message == (
            "tenant 'acme' has 1 requests in flight, its share of the 2 this receiver handles at once; retry later"
        )
        assert admitted.status == 200, admitted.body
        assert replies["large"].status == 200, replies["large"].body
        wait_until(lambda: count_spans(server.http_url, large_trace, ACME) == LARGE_SPANS, "the large request", 60)
        assert count_spans(server.http_url, globex_trace, GLOBEX) == 1
        assert count_spans(server.http_url, acme_trace, ACME) == 0  # refused: the exporter sends it again
