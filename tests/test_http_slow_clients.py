"""Slow senders on OTLP/HTTP: a body is read before its request takes an in-flight slot, under a byte budget
shared by every body being received and under read deadlines.

Connections that send headers and then dribble their bodies hold no slot, so more of them than there are
slots leave exports over both protocols unharmed; a body that stalls (or takes too long in all) is answered
408 with a Status saying so; a body the budget cannot hold is refused 503 with Retry-After, and the budget is
given back in full when its requests end. Real receivers on loopback, raw sockets for the slow senders.
"""

from __future__ import annotations

import functools
import http.client
import select
import socket
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.support.server_inprocess import RunningServer, running_server
from tests.support.server_otlp import HttpReply, post
from tests.support.server_requests import (
    count_spans,
    receiver_metric,
    span_json,
    status_of,
    traces_proto,
    unique_trace_id,
)
from tests.support.slow_senders import ANSWER_WAIT, slow_sender
from tests.support.waiting import wait_for_value, wait_until
from tracegrade.ingest import server as server_module
from tracegrade.ingest.http_app import HttpFrontEnd

TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _answer(sender: socket.socket, drip_every: float | None = None) -> HttpReply:
    """The receiver's answer on ``sender``; until it comes, one more body byte every ``drip_every`` seconds."""
    give_up = time.monotonic() + ANSWER_WAIT
    while drip_every is not None and not select.select([sender], [], [], drip_every)[0]:
        assert time.monotonic() < give_up, "the receiver never answered the slow sender"
        sender.sendall(b"\x00")
    response = http.client.HTTPResponse(sender)
    response.begin()
    return HttpReply(response.status, dict(response.getheaders()), response.read())


def _body_bytes(server: RunningServer) -> float:
    return receiver_metric(server.http_url, "request_body_bytes")


def _spans(count: int, **fields: Any) -> tuple[str, bytes]:
    trace_id = unique_trace_id()
    return trace_id, traces_proto([span_json(trace_id, i, **fields) for i in range(count)])


def _grpc_export(server: RunningServer, body: bytes) -> None:
    with grpc.insecure_channel(server.grpc_target) as channel:
        channel.unary_unary(TRACE_EXPORT)(body, timeout=ANSWER_WAIT)


def _stored(server: RunningServer, trace_id: str, count: int) -> None:
    wait_for_value(lambda: count_spans(server.http_url, trace_id), count, f"the spans of trace {trace_id}")


def test_more_slow_senders_than_slots_leave_exports_over_both_protocols_unharmed(tmp_path: Path) -> None:
    slots = 2
    with running_server(tmp_path / "store.duckdb", max_inflight_requests=slots) as server, ExitStack() as senders:
        for _ in range(2 * slots):
            senders.enter_context(slow_sender(server, 1_000_000, b"\x0a"))
        # one byte each: as many bodies being received as there are slots would have held them all
        wait_until(lambda: _body_bytes(server) >= slots, "the slow bodies' first bytes to be received")

        http_trace, http_body = _spans(3)
        reply = post(f"{server.http_url}/v1/traces", http_body)
        assert reply.status == 200, status_of(reply).message
        grpc_trace, grpc_body = _spans(2)
        _grpc_export(server, grpc_body)  # raises RESOURCE_EXHAUSTED if the slow senders held the slots

        _stored(server, http_trace, 3)
        _stored(server, grpc_trace, 2)


@pytest.mark.parametrize(
    ("timeouts", "drip_every", "said"),
    [
        ({"body_idle_timeout": 1.0}, None, "no part of the request body arrived for 1 s"),
        ({"body_total_timeout": 1.0}, 0.2, "the request body did not arrive in full within 1 s"),
    ],
    ids=["stalled", "too-slow-in-all"],
)
def test_a_body_that_arrives_too_slowly_is_answered_408_and_the_receiver_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timeouts: dict[str, float], drip_every: float | None, said: str
) -> None:
    monkeypatch.setattr(server_module, "HttpFrontEnd", functools.partial(HttpFrontEnd, **timeouts))
    with running_server(tmp_path / "store.duckdb") as server:
        with slow_sender(server, 1_000_000, b"\x0a") as sender:
            reply = _answer(sender, drip_every)
        assert reply.status == 408
        status = status_of(reply)
        assert status.code == grpc.StatusCode.DEADLINE_EXCEEDED.value[0]
        assert said in status.message and "retry" in status.message

        trace_id, body = _spans(2)
        assert post(f"{server.http_url}/v1/traces", body).status == 200
        _stored(server, trace_id, 2)
        wait_for_value(lambda: _body_bytes(server), 0, "the timed-out body's bytes to be given back")


def test_a_body_past_the_budget_is_told_to_retry_and_the_budget_is_given_back(tmp_path: Path) -> None:
    # one slot of 64 KiB: a budget of 64 KiB for every body being received
    budget = 64 * 1024
    with running_server(tmp_path / "store.duckdb", max_inflight_requests=1, max_request_bytes=budget) as server:
        early_trace, early = _spans(2)
        assert post(f"{server.http_url}/v1/traces", early).status == 200
        big_trace, big = _spans(40, attributes=[{"key": "pad", "value": {"stringValue": "x" * 1000}}])
        assert len(big) < budget  # refused for what the budget has left, not for its size
        held = budget - len(big) // 2  # leaves half of what the big export needs

        with slow_sender(server, budget, b"\x00" * held):
            wait_for_value(lambda: _body_bytes(server), held, "the slow body's bytes to be received")
            refused = post(f"{server.http_url}/v1/traces", big)
            assert refused.status == 503
            assert int(refused.headers["Retry-After"]) >= 1
            assert "budget" in status_of(refused).message
        wait_for_value(lambda: _body_bytes(server), 0, "the budget to be given back in full")

        assert post(f"{server.http_url}/v1/traces", big).status == 200  # the retry
        # gRPC messages share the budget (tests/test_grpc_decode_budget.py): with its room back, one gets in too
        grpc_trace, grpc_body = _spans(40, attributes=[{"key": "pad", "value": {"stringValue": "y" * 1000}}])
        _grpc_export(server, grpc_body)
        _stored(server, early_trace, 2)
        _stored(server, grpc_trace, 40)
        _stored(server, big_trace, 40)
