"""A receiver that starts on a backlog of traces maps them in batches bounded by their stored bytes, not only by
their count: every batch of several traces within ``--mapping-batch-bytes``, a trace larger than that mapped
alone, and every trace mapped once, with all its spans (a DuckDB file and a lake).

The backlog (``tests.support.mapping_backlog``) makes the receiver's first claim hold every trace, which the
trace-count limit alone (250 on a file, 1,000 on a lake) would map in one batch.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.export_load import make_batches
from tests.support.lake_serve import LakeServerProcess
from tests.support.mapping_backlog import file_backlog, lake_backlog
from tests.support.server_process import ServerProcess
from tests.support.server_requests import query, receiver_metric
from tests.support.store_kinds import STORE_KINDS
from tests.support.waiting import wait_for_value

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture), for the lake

BUDGET = 256 * 1024
SMALL_TRACES, SMALL_SPANS, LARGE_SPANS, PAYLOAD = 24, 20, 200, 2000


def _store_metric(http_url: str, name: str) -> float:
    return receiver_metric(http_url, name, prefix="tracegrade_store_")


@STORE_KINDS
def test_a_backlog_is_mapped_in_batches_within_the_byte_budget_and_every_trace_once(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    small = make_batches(SMALL_TRACES, SMALL_SPANS, PAYLOAD)
    large = make_batches(1, LARGE_SPANS, PAYLOAD)  # some 500 KB stored: over the budget by itself
    traces = small[: SMALL_TRACES // 2] + large + small[SMALL_TRACES // 2 :]
    expected = {f"{spans[0].context.trace_id:032x}": len(spans) for spans in traces}
    budget = ("--mapping-batch-bytes", f"{BUDGET // 1024}KiB")
    server: ServerProcess
    if store_kind == "file":
        store = tmp_path / "store.duckdb"
        file_backlog(store, traces)
        server = ServerProcess(store, extra_args=budget)
    else:
        location = f"ducklake:postgres:{request.getfixturevalue('pg_server').new_database()}"
        data = tmp_path / "lake-data"
        lake_backlog(location, data, tmp_path / "first.journal", traces)
        server = LakeServerProcess(location, data, tmp_path / "second.journal", extra_args=budget)

    with server:
        wait_for_value(lambda: _store_metric(server.http_url, "traces_rebuilt"), len(traces), "traces mapped", 120)
        rows = query(server.http_url, "SELECT trace_id, span_count FROM traces")
        largest = _store_metric(server.http_url, "mapping_batch_bytes_max")
        alone = _store_metric(server.http_url, "mapping_traces_over_budget")
        batches = _store_metric(server.http_url, "mapping_batches")
        assert server.terminate() == 0, server.log()

    mapped: dict[str, int] = {}
    for trace_id, span_count in rows:
        assert trace_id not in mapped, f"trace {trace_id} has two trajectories"
        mapped[trace_id] = span_count
    assert mapped == expected  # every trace mapped, with every span it was sent
    assert 0 < largest <= BUDGET, f"a batch of several traces held {largest:.0f} bytes of spans"
    assert alone == 1  # the large trace, mapped whole by itself
    # the small traces' payloads alone fill the budget several times over
    assert batches >= 1 + SMALL_TRACES * SMALL_SPANS * PAYLOAD // BUDGET + 1
