"""OTLP/gRPC messages count in the body budget shared with OTLP/HTTP bodies, and wait in line for room before
they are read; past that, they go to the decode threads under the DecodeBudget, as every export does.

Against a real receiver on loopback: concurrent large gRPC exports keep ``request_body_bytes`` and
``decoding_bytes`` within their budgets (read from ``/metrics`` while they run) and every span is stored; a call
that finds the budget held by an HTTP body still being sent waits with its message unread, leaves the line
when its client cancels it, and is refused retryably (``RESOURCE_EXHAUSTED`` with a ``RetryInfo``) when its
deadline comes first. Before, a gRPC message was read whole by grpc and held outside every budget (64 calls of
up to 20 MB at once; peak RSS in ``bench/bench_decode_memory.py --protocol grpc``).
"""

from __future__ import annotations

import threading
from pathlib import Path

import grpc
from google.rpc import error_details_pb2

from tests.support.decode_flood import RETRY_INFO, TRACE_EXPORT, PatientGrpcClient, request_body
from tests.support.export_load import assert_stored_once
from tests.support.server_inprocess import RunningServer, running_server
from tests.support.server_requests import count_spans, receiver_metric, span_json, traces_proto, unique_trace_id
from tests.support.slow_senders import ANSWER_WAIT, slow_sender
from tests.support.waiting import wait_for_value
from tracegrade.ingest.grpc_services import grpc_receive_limit

KIB = 1024
SLOTS = 2  # --max-inflight-requests: the body budget is SLOTS x --max-request-bytes
DECODE_THREADS = 2  # the DecodeBudget is DECODE_THREADS x --max-request-bytes


def _gauge(server: RunningServer, name: str) -> float:
    return receiver_metric(server.http_url, name)


class GaugeWatch(threading.Thread):
    """Reads the body and decode budgets' gauges from ``/metrics`` until stopped; keeps the largest seen."""

    def __init__(self, server: RunningServer) -> None:
        super().__init__()
        self.server = server
        self.stop = threading.Event()
        self.largest = {"request_body_bytes": 0.0, "decoding_bytes": 0.0}

    def run(self) -> None:
        while not self.stop.is_set():
            for name, largest in self.largest.items():
                self.largest[name] = max(largest, _gauge(self.server, name))


def test_concurrent_large_grpc_exports_stay_within_the_budgets_and_are_all_stored(tmp_path: Path) -> None:
    limit = 1024 * KIB
    requests = [request_body(number, 5_000) for number in range(12)]  # about 900 KiB each
    assert all(len(body) < limit for body, _ in requests)
    store = tmp_path / "store.duckdb"
    with running_server(store, max_inflight_requests=SLOTS, max_request_bytes=limit) as server:
        watch = GaugeWatch(server)
        watch.start()
        clients = [PatientGrpcClient(server.grpc_target, [request]) for request in requests]
        for client in clients:
            client.start()
        for client in clients:
            client.join(300)
        watch.stop.set()
        watch.join(60)
        assert not any(client.is_alive() for client in [*clients, watch]), "the clients did not finish"
        for name in ("request_body_bytes", "decoding_bytes", "requests_waiting_for_body_room"):
            wait_for_value(lambda name=name: _gauge(server, name), 0, f"{name} to return to 0")

    refusals = [refusal for client in clients for refusal in client.refusals]
    assert all(delay is not None for _, delay, _ in refusals), f"refusals not retryable: {refusals[:3]}"
    acked = [ids for client in clients for ids in client.acked]
    assert len(acked) == sum(len(ids) for _, ids in requests), "a client gave up"
    assert_stored_once(store, acked)
    # the messages were counted (they were not before), and never past either budget
    assert 0 < watch.largest["request_body_bytes"] <= SLOTS * limit, watch.largest
    assert 0 < watch.largest["decoding_bytes"] <= DECODE_THREADS * limit, watch.largest


def test_a_grpc_call_without_room_waits_unread_leaves_when_cancelled_and_is_refused_at_its_deadline(
    tmp_path: Path,
) -> None:
    limit = 64 * KIB
    # an HTTP body still being sent holds so much of the budget that a gRPC call's room (the largest message
    # grpc lets through) no longer fits
    held = SLOTS * limit - grpc_receive_limit(limit) + 1
    assert held < limit
    trace_id = unique_trace_id()
    body = traces_proto([span_json(trace_id, index) for index in range(3)])
    with (
        running_server(tmp_path / "store.duckdb", max_inflight_requests=SLOTS, max_request_bytes=limit) as server,
        grpc.insecure_channel(server.grpc_target) as channel,
    ):
        export = channel.unary_unary(TRACE_EXPORT)
        with slow_sender(server, limit, b"\x00" * held):
            wait_for_value(lambda: _gauge(server, "request_body_bytes"), held, "the slow body's bytes to be held")

            cancelled = export.future(body, timeout=ANSWER_WAIT)
            wait_for_value(lambda: _gauge(server, "requests_waiting_for_body_room"), 1, "the call to wait for room")
            assert _gauge(server, "request_body_bytes") == held  # it waits with nothing of its message read
            cancelled.cancel()
            wait_for_value(lambda: _gauge(server, "requests_waiting_for_body_room"), 0, "the call to leave the line")
            assert _gauge(server, "request_body_bytes") == held

            try:
                export(body, timeout=3)
                raise AssertionError("a call was read while the body budget had no room for it")
            except grpc.RpcError as refused:
                assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused.details()  # type: ignore[attr-defined]
                assert "before its deadline; retry later" in (refused.details() or "")  # type: ignore[attr-defined]
                trailers = dict(refused.trailing_metadata() or ())  # type: ignore[attr-defined]
                assert error_details_pb2.RetryInfo.FromString(trailers[RETRY_INFO]).retry_delay.seconds >= 1

        # the slow sender hung up: its room is given back, and the same export now goes through
        wait_for_value(lambda: _gauge(server, "request_body_bytes"), 0, "the budget to be given back")
        export(body, timeout=ANSWER_WAIT)
        wait_for_value(lambda: count_spans(server.http_url, trace_id), 3, "the exported spans to be stored")
        for name in ("request_body_bytes", "requests_waiting_for_body_room", "decoding_bytes"):
            assert _gauge(server, name) == 0, name
