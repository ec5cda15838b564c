"""``forget`` on a DuckDB file store is one transaction: the traces are remembered as forgotten and their rows
deleted together, or neither is.

The fault comes from DuckDB itself: a table of the test's own holds a foreign key to ``traces``, so the
``DELETE FROM traces`` of the forget fails after the forgotten-traces row was written. On the old code that
row had been committed by then (a transaction of its own), which left the trace listed as forgotten with every
row still stored, and the writes of the same process dropping its records from then on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.store_records import make_span, trace_hex
from tracegrade.errors import StoreError
from tracegrade.models.span import SpanRecord
from tracegrade.store import TraceStore

_PIN = "forget_pin"  # the test's table whose foreign key makes the deletion of a trajectory fail


@pytest.fixture
def store(tmp_path: Path) -> Iterator[TraceStore]:
    with TraceStore(tmp_path / "store.duckdb") as opened:
        yield opened


def _trace(trace: int) -> list[SpanRecord]:
    root = trace * 100
    return [
        make_span(trace, root, name="agent", attributes={"gen_ai.operation.name": "invoke_agent"}),
        make_span(trace, root + 1, parent=root, name="search", attributes={"gen_ai.tool.name": "search"}),
    ]


def _spans_of(store: TraceStore, trace: int) -> int:
    return int(store.query("SELECT count(*) FROM spans WHERE trace_id = ?", [trace_hex(trace)]).rows[0][0])


def _forgotten(store: TraceStore) -> list[str]:
    return [row[0] for row in store.query("SELECT trace_id FROM forgotten_traces ORDER BY ALL").rows]


def test_a_forget_whose_deletion_fails_leaves_the_trace_neither_forgotten_nor_deleted(
    store: TraceStore, tmp_path: Path
) -> None:
    store.write(_trace(1))
    store.rebuild_trajectories([trace_hex(1)])
    store.execute_write(
        f"CREATE TABLE {_PIN} (tenant VARCHAR, trace_id VARCHAR, FOREIGN KEY (tenant, trace_id) "
        "REFERENCES traces (tenant, trace_id))"
    )
    store.execute_write(f"INSERT INTO {_PIN} VALUES ('default', ?)", [trace_hex(1)])

    with pytest.raises(StoreError, match=r"forgetting traces .* failed: .*foreign key"):
        store.forget([trace_hex(1)])

    assert _forgotten(store) == []  # the old code had committed this row before the deletion failed
    assert _spans_of(store, 1) == 2
    # nor does the process take the trace for forgotten: a record of it written now is stored
    store.write([make_span(1, 150, parent=100, name="late")])
    assert _spans_of(store, 1) == 3

    # once the deletion can go through, the same forget does both
    store.execute_write(f"DROP TABLE {_PIN}")
    deleted = store.forget([trace_hex(1)])
    assert (deleted.traces, deleted.spans) == (1, 3)
    assert _forgotten(store) == [trace_hex(1)]
    assert _spans_of(store, 1) == 0
    store.write([make_span(1, 160, parent=100, name="later still")])
    assert _spans_of(store, 1) == 0

    store.close()  # and so it stays in the file
    with TraceStore(tmp_path / "store.duckdb", read_only=True) as reopened:
        assert (_forgotten(reopened), _spans_of(reopened, 1)) == ([trace_hex(1)], 0)
