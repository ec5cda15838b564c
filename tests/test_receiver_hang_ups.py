"""An export whose client hangs up before it is handed to the writer is dropped: never decoded, never written.

Against a real ``tracegrade serve`` on a lake (a real PostgreSQL) whose writer is held back at the lake's write gate,
taken exclusive here as a deletion takes it, so that requests wait for room in the write queue for as long as the
test needs. Requests whose clients stay fill the queue and wait; then more requests arrive, wait behind them, and
their clients hang up (an OTLP/HTTP connection closed, an OTLP/gRPC call cancelled). Those leave the line at once
(``requests_waiting_for_room``), are counted in ``requests_abandoned_total{stage="queue"}``, and once the writer goes
on none of their spans is decoded or stored, while every span of the clients that stayed is stored once and every
budget gauge returns to 0. Before, aiohttp went on with a request whose client was gone, so an OTLP/HTTP export
waited, was decoded and written all the same (``bench/bench_hang_ups.py``: 20 clients of 10 MB requests that hung
up after 10 s cost the receiver 103 CPU seconds, 8 now; bench/RESULTS.md).

A gRPC call that finds every in-flight slot taken is refused at once, before it waits to read its message; before,
it waited for room in the body budget and was refused near its deadline (or, had there been room, read whole and
thrown away). An OTLP/HTTP export that finds every slot taken is answered 503 with ``Retry-After`` before its client
has sent its body: one whose client sends the body straight after the headers, and one whose client waits for
``100 Continue`` first (closed once refused, as it sends no body); before, the receiver waited for the body, to read
it whole and throw it away (or, asked, told the client to send it).

A request waiting in the decode threads' line that is cancelled, and whose turn comes before it runs again, is
passed over; before, its bytes were counted as being decoded for ever (found by the benchmark over OTLP/gRPC:
``decoding_bytes`` stayed at 10 MB with nothing in flight), which the last test shows on the budget itself.
"""

from __future__ import annotations

import asyncio
import http.client
import itertools
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import grpc
import pytest

from tests.support import pg_cluster
from tests.support.decode_flood import TRACE_EXPORT, PatientClient, request_body
from tests.support.lake_serve import LakeServerProcess, lake_span_counts, writer_held_back
from tests.support.pg_cluster import PgServer
from tests.support.raw_http import first_answer, request_head
from tests.support.server_requests import receiver_metric
from tests.support.waiting import wait_for_value, wait_until
from tracegrade.ingest.decode_budget import DecodeBudget

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

SPANS = 5  # per request
QUEUE_SPANS = 10  # --queue-spans: two requests fill it
LEAVERS = 3
BUDGET_GAUGES = ("request_body_bytes", "decoding_bytes", "requests_waiting_to_decode", "requests_waiting_for_room")


def _metric(server: LakeServerProcess, name: str) -> float:
    return receiver_metric(server.http_url, name)


def _requests(first: int, count: int) -> list[tuple[bytes, list[tuple[str, str]]]]:
    return [request_body(number, SPANS) for number in range(first, first + count)]


def _stayers_until_one_waits(server: LakeServerProcess) -> list[PatientClient]:
    """Clients that wait for their answers, started one at a time until one of them waits for room."""
    stayers: list[PatientClient] = []
    numbers = itertools.count()
    while not _metric(server, "requests_waiting_for_room"):
        assert len(stayers) < 10, "the write queue never filled: its writer is not held back"
        stayer = PatientClient(server.http_port, [request_body(next(numbers), SPANS)])
        stayer.start()
        stayers.append(stayer)
        wait_until(
            lambda stayer=stayer: stayer.acked or _metric(server, "requests_waiting_for_room"),
            "the request to be acknowledged or to wait for room",
        )
    return stayers


@contextmanager
def _http_leaver(server: LakeServerProcess, body: bytes) -> Iterator[None]:
    """An export sent whole over OTLP/HTTP, its connection closed on exit without reading the answer."""
    connection = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=60)
    connection.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"})
    try:
        yield
    finally:
        connection.close()


@contextmanager
def _grpc_leaver(server: LakeServerProcess, body: bytes) -> Iterator[None]:
    """An export over OTLP/gRPC, cancelled on exit."""
    with grpc.insecure_channel(server.grpc_target) as channel:
        call = channel.unary_unary(TRACE_EXPORT).future(body, timeout=300)
        try:
            yield
        finally:
            call.cancel()


LEAVER = {"http": _http_leaver, "grpc": _grpc_leaver}


@pytest.mark.parametrize("protocol", sorted(LEAVER))
def test_requests_whose_clients_hang_up_while_waiting_for_room_are_dropped_and_the_rest_stored_once(
    pg_server: PgServer, tmp_path: Path, protocol: str
) -> None:
    location = f"ducklake:postgres:{pg_server.new_database()}"
    server = LakeServerProcess(
        location,
        tmp_path / "lake-data",
        tmp_path / "receiver.journal",
        extra_args=("--queue-spans", str(QUEUE_SPANS), "--queue-wait", "300"),
    )
    leavers = _requests(100, LEAVERS)
    with server:
        with writer_held_back(location):
            stayers = _stayers_until_one_waits(server)
            waiting = _metric(server, "requests_waiting_for_room")
            with ExitStack() as hang_ups:
                for body, _ in leavers:
                    hang_ups.enter_context(LEAVER[protocol](server, body))
                wait_for_value(
                    lambda: _metric(server, "requests_waiting_for_room"),
                    waiting + LEAVERS,
                    "the leaving clients' requests to wait for room",
                )
            # their clients are gone: they leave the line at once, counted, while the writer is still held back
            wait_for_value(
                lambda: _metric(server, "requests_waiting_for_room"), waiting, "the abandoned requests to leave"
            )
            assert _metric(server, 'requests_abandoned_total{stage="queue"}') == LEAVERS

        for stayer in stayers:
            stayer.join(120)
        assert not any(stayer.is_alive() for stayer in stayers), "a staying client got no answer"
        assert all(not stayer.refusals for stayer in stayers), [stayer.refusals for stayer in stayers]
        acked = [ids for stayer in stayers for ids in stayer.acked]
        assert len(acked) == len(stayers) * SPANS
        wait_for_value(lambda: _metric(server, "spans_stored_total"), len(acked), "the stayers' spans to be stored")
        for name in BUDGET_GAUGES:
            wait_for_value(lambda name=name: _metric(server, name), 0, f"{name} to return to 0")
        # nothing of the abandoned requests was decoded (each span decoded is counted received)
        assert _metric(server, "spans_received_total") == len(acked)

    stored = lake_span_counts(location)
    assert sorted(stored) == sorted(acked), "the stored spans are not exactly the staying clients'"
    assert set(stored.values()) == {1}, "a span was stored twice"


def _one_slot_lake_receiver(pg_server: PgServer, tmp_path: Path) -> tuple[str, LakeServerProcess]:
    """A lake of its own and a receiver on it with one in-flight slot, whose exports wait long for queue room."""
    location = f"ducklake:postgres:{pg_server.new_database()}"
    server = LakeServerProcess(
        location,
        tmp_path / "lake-data",
        tmp_path / "receiver.journal",
        extra_args=("--queue-spans", str(QUEUE_SPANS), "--queue-wait", "300", "--max-inflight-requests", "1"),
    )
    return location, server


def test_a_grpc_call_that_finds_every_slot_taken_is_refused_before_its_message_is_read(
    pg_server: PgServer, tmp_path: Path
) -> None:
    location, server = _one_slot_lake_receiver(pg_server, tmp_path)
    body, _ = request_body(100, SPANS)
    with server:
        with writer_held_back(location):
            stayers = _stayers_until_one_waits(server)  # the last one holds the only slot, its body the budget
            with grpc.insecure_channel(server.grpc_target) as channel, pytest.raises(grpc.RpcError) as refused:
                channel.unary_unary(TRACE_EXPORT)(body, timeout=10)
            # before, it waited for room to read its message (none, beside the slot holder's body): refused near
            # its deadline; or, had the budget had room, read whole and then thrown away
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
            assert "requests in flight (the limit)" in (refused.value.details() or "")  # type: ignore[attr-defined]
            assert _metric(server, "requests_waiting_for_body_room") == 0
        for stayer in stayers:
            stayer.join(120)
    assert all(stayer.acked and not stayer.refusals for stayer in stayers)


def test_an_http_export_that_finds_every_slot_taken_is_refused_before_its_body_is_sent(
    pg_server: PgServer, tmp_path: Path
) -> None:
    location, server = _one_slot_lake_receiver(pg_server, tmp_path)
    body, _ = request_body(100, SPANS)
    with server:
        with writer_held_back(location):
            stayers = _stayers_until_one_waits(server)  # the last one holds the only slot
            # a client that sends its body straight after the headers (as exporters do), its body not sent yet
            with socket.create_connection(("127.0.0.1", server.http_port), timeout=60) as sending:
                sending.sendall(request_head("/v1/traces", len(body)))
                status, headers, refusal = first_answer(sending)
                assert status == b"HTTP/1.1 503 Service Unavailable", refusal
                assert int(headers["retry-after"]) >= 1
                assert b"requests in flight (the limit)" in refusal
                # the body it sends all the same is thrown away as it arrives: the connection carries its next request
                sending.sendall(body + b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                assert first_answer(sending)[0] == b"HTTP/1.1 200 OK"
            # a client that asks first (Expect: 100-continue) is refused instead of told to go on, and the
            # connection closed: it sends no body, which the receiver would wait for
            with socket.create_connection(("127.0.0.1", server.http_port), timeout=60) as asking:
                asking.sendall(request_head("/v1/traces", len(body), "Expect: 100-continue"))
                status, headers, refusal = first_answer(asking)
                assert status == b"HTTP/1.1 503 Service Unavailable", refusal
                assert int(headers["retry-after"]) >= 1
                assert headers["connection"] == "close"
                assert b"requests in flight (the limit)" in refusal
                assert asking.recv(1) == b""
            assert _metric(server, 'requests_total{protocol="http",signal="traces",status="503"}') == 2
        for stayer in stayers:
            stayer.join(120)
        assert all(stayer.acked and not stayer.refusals for stayer in stayers)
        acked = [ids for stayer in stayers for ids in stayer.acked]
        wait_for_value(lambda: _metric(server, "spans_stored_total"), len(acked), "the stayers' spans to be stored")
        for name in ("inflight_requests", *BUDGET_GAUGES):
            wait_for_value(lambda name=name: _metric(server, name), 0, f"{name} to return to 0")
        assert _metric(server, "spans_received_total") == len(acked)  # nothing of the refused body was decoded
    stored = lake_span_counts(location)
    assert sorted(stored) == sorted(acked)
    assert set(stored.values()) == {1}
    assert "Traceback" not in server.log(), server.log()


def test_a_cancelled_request_whose_turn_to_decode_comes_in_the_same_moment_gives_its_bytes_back() -> None:
    async def cancelled_as_its_turn_comes() -> DecodeBudget:
        budget = DecodeBudget(10)
        await budget.acquire(10)
        waiter = asyncio.ensure_future(budget.acquire(5))
        await asyncio.sleep(0)  # it waits in line
        waiter.cancel()  # its client hangs up...
        budget.release(10)  # ...and a decode ends before the waiter runs again
        with pytest.raises(asyncio.CancelledError):
            await waiter
        return budget

    budget = asyncio.run(cancelled_as_its_turn_comes())
    assert (budget.held, budget.waiting) == (0, 0)
