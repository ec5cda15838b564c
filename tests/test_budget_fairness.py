"""OTLP/gRPC calls do not starve behind steady OTLP/HTTP traffic in the body budget the two share, nor HTTP
bodies behind steady gRPC traffic: while calls wait, the two take turns.

Against a real receiver on loopback with a small budget: a slow sender holds what the budget has beyond a
gRPC call's room, so that the call gets room only when no other HTTP body holds any, and several clients post
OTLP/HTTP bodies back to back, each sent slowly (a slow link), retrying each 503 after its Retry-After as
exporters do: the budget is (almost) never without an HTTP body being received. A gRPC export then gets room
and is acknowledged within its deadline, and every span acknowledged on either protocol is stored once.
Before, a new HTTP body took the room that a finished one gave back while the call waited in line, and the
call was refused with ``RESOURCE_EXHAUSTED`` shortly before its deadline, however often it was retried.

The other way round: gRPC clients send back to back, messages of which one fits at a time, so the line never
empties; an HTTP exporter's batches still get in within a few retries each, one after a call leaves the line.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc

from tests.support.decode_flood import TRACE_EXPORT, PacedClient, PatientClient, PatientGrpcClient, request_body
from tests.support.export_load import assert_stored_once
from tests.support.server_inprocess import running_server
from tests.support.server_requests import receiver_metric
from tests.support.slow_senders import slow_sender
from tests.support.waiting import wait_for_value, wait_until
from tracegrade.ingest.grpc_services import grpc_receive_limit

KIB = 1024
SLOTS = 2  # --max-inflight-requests: the body budget is SLOTS x LIMIT
LIMIT = 256 * KIB  # --max-request-bytes
BUDGET = SLOTS * LIMIT
HTTP_CLIENTS = 4
HTTP_SPANS = 400  # about 61 KiB a body: the clients' bodies fit beside the slow sender's and each other
PIECE = 4 * KIB  # each body is sent a piece at a time ...
PAUSES = (0.03, 0.037, 0.044, 0.051)  # ... this long apart, a different pace for each client (none in step)
GRPC_DEADLINE = 10.0  # seconds
GRPC_REQUEST = 1_000_000  # the gRPC export's number (its span ids): beyond those the HTTP clients get to


def _bodies(
    first: int, step: int, stop: threading.Event, spans: int = HTTP_SPANS
) -> Iterator[tuple[bytes, list[tuple[str, str]]]]:
    """Requests of ``spans`` spans numbered ``first``, ``first + step``, ... (their span ids differ) until ``stop``
    is set."""
    for number in itertools.count(first, step):
        if stop.is_set():
            return
        yield request_body(number, spans)


def test_a_grpc_export_gets_room_under_steady_http_traffic_and_every_span_is_stored_once(tmp_path: Path) -> None:
    room = grpc_receive_limit(LIMIT)  # what a gRPC call waits for
    held = BUDGET - room  # by the slow sender: the call fits only when no other body holds a byte
    assert held < LIMIT and HTTP_CLIENTS * len(request_body(0, HTTP_SPANS)[0]) <= room
    store = tmp_path / "store.duckdb"
    grpc_body, grpc_ids = request_body(GRPC_REQUEST, 10)
    stop = threading.Event()
    with running_server(store, max_inflight_requests=SLOTS, max_request_bytes=LIMIT) as server:
        port = server.server.http_port
        assert port is not None
        clients = [
            PacedClient(port, _bodies(n, HTTP_CLIENTS, stop), piece=PIECE, pause=PAUSES[n]) for n in range(HTTP_CLIENTS)
        ]
        with slow_sender(server, LIMIT, b"\x00" * held):
            wait_for_value(lambda: receiver_metric(server.http_url, "request_body_bytes"), float(held), "the slow body")
            for client in clients:
                client.start()
            try:
                wait_until(lambda: all(client.acked for client in clients), "each HTTP client's first export")
                with grpc.insecure_channel(server.grpc_target) as channel:
                    try:
                        channel.unary_unary(TRACE_EXPORT)(grpc_body, timeout=GRPC_DEADLINE)
                    except grpc.RpcError as refused:
                        code, details = refused.code(), refused.details()  # type: ignore[attr-defined]
                        raise AssertionError(f"the gRPC export was refused: {code.name}: {details}") from None
            finally:
                stop.set()
                for client in clients:
                    client.join(120)
        assert not any(client.is_alive() for client in clients), "the HTTP clients did not finish"
        wait_for_value(lambda: receiver_metric(server.http_url, "request_body_bytes"), 0.0, "the budget to be free")

    refusals = [refusal for client in clients for refusal in client.refusals]
    assert all(delay is not None for _, delay, _ in refusals), f"refusals not retryable: {refusals[:3]}"
    acked = [ids for client in clients for ids in client.acked]
    assert_stored_once(store, [*acked, *grpc_ids])


GRPC_CLIENTS = 4
GRPC_SPANS = 1300  # about 200 KiB a message: with a call's room of 320 KiB, one is read at a time
HTTP_EXPORTS = 3
ATTEMPTS = 5  # an exporter retries a batch a few times, then drops it


def test_http_exports_get_their_turns_under_steady_grpc_traffic_and_every_span_is_stored_once(tmp_path: Path) -> None:
    assert 2 * len(request_body(0, GRPC_SPANS)[0]) > BUDGET - grpc_receive_limit(LIMIT)  # the line never empties
    store = tmp_path / "store.duckdb"
    stop = threading.Event()
    step = GRPC_CLIENTS + 1  # the HTTP exports take the numbers the gRPC clients leave out
    with running_server(store, max_inflight_requests=SLOTS, max_request_bytes=LIMIT) as server:
        port = server.server.http_port
        assert port is not None
        senders = [
            PatientGrpcClient(server.grpc_target, _bodies(n, step, stop, GRPC_SPANS)) for n in range(GRPC_CLIENTS)
        ]
        for sender in senders:
            sender.start()
        exports = []
        try:
            wait_until(lambda: receiver_metric(server.http_url, "requests_waiting_for_body_room") >= 1, "a line")
            for number in range(HTTP_EXPORTS):
                export = PatientClient(port, [request_body(GRPC_CLIENTS + number * step, HTTP_SPANS)])
                export.run()  # here: each export until it is acknowledged
                exports.append(export)
        finally:
            stop.set()
            for sender in senders:
                sender.join(120)
        assert not any(sender.is_alive() for sender in senders), "the gRPC clients did not finish"

    for export in exports:
        assert len(export.refusals) < ATTEMPTS, (
            f"an HTTP export was refused {len(export.refusals)} times: {export.refusals[-1]}"
        )
        assert all(delay is not None for _, delay, _ in export.refusals), export.refusals
    refusals = [refusal for sender in senders for refusal in sender.refusals]
    assert all(delay is not None for _, delay, _ in refusals), f"gRPC refusals not retryable: {refusals[:3]}"
    acked = [ids for client in (*senders, *exports) for ids in client.acked]
    assert_stored_once(store, acked)
