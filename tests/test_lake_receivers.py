"""Two ``tracegrade serve`` receivers on one lake, each trace's spans split between them by real OTLP
exporters, one receiver SIGKILLed mid-load and restarted, a reader querying throughout: every acknowledged
span visible once (and no span ever visible twice), every trace's trajectory the one a single file store
builds from the same spans."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.pg_cluster import PgServer
from tracegrade.store import TraceStore
from tracegrade.store.lake import LakeStore

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

# the trajectory columns that do not depend on when or by whom a trace was mapped
TRAJECTORY_QUERIES = {
    "traces": "SELECT trace_id, root_name, status, span_count, llm_calls, tool_calls, node_visits FROM traces",
    "node_visits": "SELECT trace_id, seq, name FROM node_visits",
    "tool_calls": "SELECT trace_id, seq, name FROM tool_calls",
    "llm_calls": "SELECT trace_id, seq, span_id FROM llm_calls",
}


@pytest.fixture
def lake(pg_server: PgServer, tmp_path: Path) -> tuple[str, Path]:
    return f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"


def test_two_receivers_one_killed_every_span_once_and_trajectories_as_one_file_store_builds(
    lake: tuple[str, Path], tmp_path: Path
) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

    from tests.support.export_load import ExportLoad, make_batches
    from tests.support.lake_serve import LakeServerProcess, lake_span_counts

    location, data = lake
    traces = make_batches(40, 10)
    # each trace's spans alternate between the receivers: every trace lands half on one, half on the other
    halves = [[spans[0::2] for spans in traces], [spans[1::2] for spans in traces]]
    first = LakeServerProcess(location, data, tmp_path / "one.journal").start(timeout=90)
    second = LakeServerProcess(location, data, tmp_path / "two.journal").start(timeout=90)
    restarted = None
    loads = [
        ExportLoad(HttpSpanExporter(endpoint=f"{first.http_url}/v1/traces", timeout=30), halves[0]),
        ExportLoad(GrpcSpanExporter(endpoint=second.grpc_target, insecure=True, timeout=30), halves[1]),
    ]
    seen: list[tuple[int, int]] = []  # (spans visible, of which duplicates) as a reader queried during the load
    done = threading.Event()

    def query_throughout() -> None:
        with LakeStore(location, read_only=True) as reader:
            while not done.is_set():
                sql = "SELECT count(*), count(*) - count(DISTINCT (trace_id, span_id)) FROM spans"
                seen.append(reader.query(sql).rows[0])
                time.sleep(0.1)

    querying = threading.Thread(target=query_throughout, daemon=True)
    for load in [*loads, querying]:
        load.start()
    try:
        while loads[1].acked_batches < 10:
            assert loads[1].is_alive(), "the load finished before the kill"
            time.sleep(0.01)
        second.kill()
        restarted = LakeServerProcess(
            location, data, second.journal, grpc_port=second.grpc_port, http_port=second.http_port
        ).start(timeout=90)  # replays its journal, then takes the exporter's retries
        for load in loads:
            load.join(180)
            assert not load.is_alive()
        assert first.terminate() == 0, first.log()
        assert restarted.terminate() == 0, restarted.log()
    finally:
        done.set()
        querying.join(60)
        first.kill()
        second.kill()
        if restarted is not None:
            restarted.kill()

    every_acked = {ids for load in loads for ids in load.acked}
    assert len(every_acked) == 400
    assert len(seen) > 5 and all(duplicates == 0 for _, duplicates in seen), seen
    assert [count for count, _ in seen] == sorted(count for count, _ in seen)  # nothing visible ever vanished
    visible = lake_span_counts(location)
    assert every_acked <= set(visible), f"{len(every_acked - set(visible))} acknowledged spans lost"
    assert set(visible.values()) == {1}

    trace_ids = sorted({trace_id for trace_id, _ in every_acked})
    with LakeStore(location, read_only=True) as reader, TraceStore(tmp_path / "single.duckdb") as single:
        spans = reader.load_spans(trace_ids)
        single.write([span for trace_id in trace_ids for span in spans[trace_id]])
        single.rebuild_trajectories(trace_ids)
        assert reader.stale_trajectories() == []
        # each trace is whole in the lake: both receivers' halves in one trajectory
        assert reader.query("SELECT DISTINCT span_count FROM traces").rows == [(10,)]
        assert reader.query("SELECT count(*) FROM traces").rows == [(len(trace_ids),)]
        for table, sql in TRAJECTORY_QUERIES.items():
            lake_rows = reader.query(f"{sql} ORDER BY ALL").rows
            file_rows = single.query(f"{sql} ORDER BY ALL").rows
            differing = sorted({row[0] for row in set(lake_rows) ^ set(file_rows)})
            assert not differing, f"{table}: {len(differing)} of {len(trace_ids)} traces differ, e.g. {differing[:3]}"
