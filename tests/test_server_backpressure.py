"""Backpressure and draining: a request that finds the write queue full waits (undecoded) for room, and
one that waited too long gets 503/RESOURCE_EXHAUSTED with a retry delay; too many requests in flight are
told to retry; a stopping receiver answers 503/UNAVAILABLE while it finishes what it acknowledged.

The receiver is slowed legitimately: the test holds the store's write lock (as a long write transaction
would), so the writer thread blocks in its next commit while requests keep arriving; or it holds the
request journal's lock (as a slow disk would), so requests wait to be made durable.
"""

from __future__ import annotations

import concurrent.futures
import json
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2

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
from tracegrade.ingest import server as server_module

TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@contextmanager
def writes_paused(server: RunningServer) -> Iterator[None]:
    """Hold the store's write lock: the writer thread blocks at its next commit until released."""
    lock = server.server.writer.store._write_lock
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


@contextmanager
def journal_paused(server: RunningServer) -> Iterator[None]:
    """Hold the request journal's lock: requests wait, unacknowledged, to be journaled."""
    lock = server.server.journal._lock
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


def _journal_bytes(server: RunningServer) -> int:
    return sum(path.stat().st_size for path in server.server.settings.journal_path.glob("*.tgj"))


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _readyz(server: RunningServer) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"{server.http_url}/readyz", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _spans(count: int) -> tuple[str, bytes]:
    trace_id = unique_trace_id()
    return trace_id, traces_proto([span_json(trace_id, i) for i in range(count)])


def _post_traces(server: RunningServer, body: bytes) -> HttpReply:
    return post(f"{server.http_url}/v1/traces", body)


def _grpc_refusal(server: RunningServer, body: bytes, timeout: float = 30) -> grpc.RpcError:
    with grpc.insecure_channel(server.grpc_target) as channel, pytest.raises(grpc.RpcError) as refused:
        channel.unary_unary(TRACE_EXPORT)(body, timeout=timeout)
    return refused.value


def _retry_delay(error: grpc.RpcError) -> float:
    trailers = dict(error.trailing_metadata())
    info = error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
    return info.retry_delay.seconds + info.retry_delay.nanos / 1e9


@pytest.fixture
def pool() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    with concurrent.futures.ThreadPoolExecutor(4) as executor:
        yield executor


def test_a_full_queue_is_503_and_resource_exhausted_with_retry_delays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a query waits this long for acknowledged spans to be committed, then answers with what is committed
    monkeypatch.setattr(server_module, "QUERY_CONSISTENCY_TIMEOUT", 0.2)
    with running_server(tmp_path / "store.duckdb", queue_spans=5, queue_wait=0.1) as server:
        with writes_paused(server):
            first_trace, first = _spans(5)
            second_trace, second = _spans(5)
            # acknowledged once journaled; taken by the writer, which then blocks before its commit
            assert _post_traces(server, first).status == 200
            _wait_for(lambda: server.server.writer.queue_depth == 0, "the writer to take the first batch")
            assert _post_traces(server, second).status == 200  # journaled, waits in the queue
            assert server.server.writer.queue_depth == 5
            assert count_spans(server.http_url, first_trace) == 0  # acknowledged, not in DuckDB yet ...
            assert _journal_bytes(server) > len(first) + len(second)  # ... but on disk in the journal

            third_trace, third = _spans(5)
            refused = _post_traces(server, third)
            assert refused.status == 503
            assert int(refused.headers["Retry-After"]) >= 1
            assert "write queue is full" in status_of(refused).message
            error = _grpc_refusal(server, third)
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "write queue is full" in error.details()
            assert _retry_delay(error) >= 0.25  # how long the queue takes to drain, a quarter second at least
            status, body = _readyz(server)
            assert (status, body["ready"]) == (503, False)
            assert "write queue" in body["reason"]
        _wait_for(lambda: server.server.writer.queue_depth == 0, "the queue to drain")
        assert _post_traces(server, third).status == 200  # the retry succeeds
        _wait_for(lambda: count_spans(server.http_url, third_trace) == 5, "the retried batch to be stored")
        for trace_id in (first_trace, second_trace):
            assert count_spans(server.http_url, trace_id) == 5
        assert _readyz(server)[0] == 200


def test_a_request_that_finds_the_queue_full_waits_undecoded_for_room_instead_of_being_refused(
    tmp_path: Path, pool: concurrent.futures.ThreadPoolExecutor
) -> None:
    with running_server(tmp_path / "store.duckdb", queue_spans=5, queue_wait=60) as server:
        with writes_paused(server):
            _, first = _spans(5)
            assert _post_traces(server, first).status == 200
            _wait_for(lambda: server.server.writer.queue_depth == 0, "the writer to take the first batch")
            assert _post_traces(server, _spans(5)[1]).status == 200  # the queue is full now
            third_trace, third = _spans(5)
            pending = pool.submit(_post_traces, server, third)
            _wait_for(
                lambda: receiver_metric(server.http_url, "requests_waiting_for_room") == 1, "the third request to wait"
            )
            assert receiver_metric(server.http_url, "spans_received_total") == 10  # held before decoding
            assert not pending.done()
        assert pending.result(30).status == 200  # let on once the writer took the queued batch: no retry
        assert receiver_metric(server.http_url, "requests_waiting_for_room") == 0
        _wait_for(lambda: count_spans(server.http_url, third_trace) == 5, "the held batch to be stored")


def test_requests_beyond_the_inflight_limit_are_told_to_retry(
    tmp_path: Path, pool: concurrent.futures.ThreadPoolExecutor
) -> None:
    with running_server(tmp_path / "store.duckdb", max_inflight_requests=1) as server:
        with journal_paused(server):
            trace_id, body = _spans(3)
            pending = pool.submit(_post_traces, server, body)
            _wait_for(lambda: server.server.inflight == 1, "the first request to be in flight")
            assert not pending.done()  # not acknowledged before it is durable
            refused = _post_traces(server, _spans(1)[1])
            assert refused.status == 503
            assert "requests in flight" in status_of(refused).message
            # a gRPC call waits for the body budget's room, which the request in flight holds, and is refused
            # retryably shortly before its deadline
            grpc_refused = _grpc_refusal(server, _spans(1)[1], timeout=4)
            assert grpc_refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert _retry_delay(grpc_refused) > 0
        assert pending.result(30).status == 200
        _wait_for(lambda: count_spans(server.http_url, trace_id) == 3, "the batch to be stored")


def test_stopping_refuses_new_requests_but_finishes_acknowledging_admitted_ones(
    tmp_path: Path, pool: concurrent.futures.ThreadPoolExecutor
) -> None:
    store = tmp_path / "store.duckdb"
    with running_server(store) as server:
        trace_id, body = _spans(4)
        with journal_paused(server):
            pending = pool.submit(_post_traces, server, body)
            _wait_for(lambda: server.server.inflight == 1, "the request to be in flight")
            stopping = threading.Thread(target=server.stop)
            stopping.start()
            _wait_for(lambda: _readyz(server)[0] == 503, "readiness to turn false")
            assert _readyz(server)[1]["reason"] == "shutting down"
            refused = _post_traces(server, _spans(1)[1])
            assert refused.status == 503
            assert int(refused.headers["Retry-After"]) >= 1
            assert _grpc_refusal(server, _spans(1)[1]).code() == grpc.StatusCode.UNAVAILABLE
            assert stopping.is_alive()  # waiting for the admitted request
        assert pending.result(30).status == 200
        stopping.join(30)
        assert not stopping.is_alive()
        assert not server.server.settings.sidecar_path.exists()

    from tracegrade.store import TraceStore

    reader = TraceStore(store, read_only=True)
    try:
        assert reader.query("SELECT count(*) FROM spans WHERE trace_id = ?", [trace_id]).rows == [(4,)]
    finally:
        reader.close()
