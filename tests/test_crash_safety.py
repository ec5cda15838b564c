"""Crash safety: SIGKILL the receiver in the middle of a load, restart it on the same store and ports,
let the real OTLP exporters retry, and check every span acknowledged before the kill is stored once."""

from __future__ import annotations

import time
from pathlib import Path

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

from tests.support.export_load import ExportLoad, assert_stored_once, make_batches
from tests.support.server_process import ServerProcess

BATCHES_PER_EXPORTER = 60
SPANS_PER_BATCH = 40
KILL_AFTER_ACKED_BATCHES = 16


def test_acknowledged_spans_survive_sigkill_and_are_stored_exactly_once(tmp_path: Path) -> None:
    store = tmp_path / "crash.duckdb"
    batches = make_batches(2 * BATCHES_PER_EXPORTER, SPANS_PER_BATCH)
    first = ServerProcess(store).start()
    loads = [
        ExportLoad(HttpSpanExporter(endpoint=f"{first.http_url}/v1/traces", timeout=30), batches[0::2]),
        ExportLoad(GrpcSpanExporter(endpoint=first.grpc_target, insecure=True, timeout=30), batches[1::2]),
    ]
    for load in loads:
        load.start()
    try:
        while sum(load.acked_batches for load in loads) < KILL_AFTER_ACKED_BATCHES:
            assert any(load.is_alive() for load in loads), "the load finished before the kill"
            time.sleep(0.01)
        first.kill()
        acked_before_kill = [list(load.acked) for load in loads]
        second = ServerProcess(store, grpc_port=first.grpc_port, http_port=first.http_port).start()
        for load in loads:
            load.join(90)
            assert not load.is_alive()
        assert second.terminate() == 0
    finally:
        first.kill()

    assert all(
        load.acked_batches > len(acked) // SPANS_PER_BATCH for load, acked in zip(loads, acked_before_kill, strict=True)
    )
    stored = assert_stored_once(store, [ids for acked in acked_before_kill for ids in acked])
    every_acked = {ids for load in loads for ids in load.acked}
    assert every_acked <= set(stored)


def test_the_mapping_process_ends_when_the_receiver_is_killed(tmp_path: Path) -> None:
    """A receiver killed with SIGKILL cannot stop its trajectory-mapping child; the child must notice and
    end, not linger holding memory and the receiver's inherited pipes."""
    import psutil

    from tests.support.server_otlp import post
    from tests.support.server_requests import count_spans, span_json, traces_proto, unique_trace_id
    from tracegrade.store.mapping_process import IN_PROCESS_SPANS

    server = ServerProcess(tmp_path / "store.duckdb", extra_args=("--mapping-process",)).start()
    try:
        trace_id = unique_trace_id()
        size = IN_PROCESS_SPANS + 1  # a rebuild job the receiver hands to its mapping process
        spans = [span_json(trace_id, i) for i in range(size)]
        assert post(f"{server.http_url}/v1/traces", traces_proto(spans)).status == 200
        assert count_spans(server.http_url, trace_id) == size
        receiver = psutil.Process(server.pid)
        deadline = time.monotonic() + 30
        while True:  # the mapping process is spawned at the first large rebuild
            children = receiver.children(recursive=True)
            if any("spawn_main" in " ".join(child.cmdline()) for child in children):
                break
            assert time.monotonic() < deadline, "the mapping process never started"
            time.sleep(0.05)
    finally:
        server.kill()
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"still running after the receiver was killed: {[p.cmdline()[-3:] for p in alive]}"
