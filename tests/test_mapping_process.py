"""MappingProcess: small rebuild jobs (every job with ``in_process_spans=None``) are mapped in process,
large ones in a child process that exits when idle; the rebuilder ends an idle child. Results are the
same either way."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime

import psutil
import pytest

from tracegrade.store import TraceStore
from tracegrade.store.mapping_process import MappingProcess, map_arrow
from tracegrade.store.rebuilder import TrajectoryRebuilder

from .support.store_records import make_span, trace_hex

UPDATED_AT = datetime(2026, 1, 1)


def spawned_children() -> list[psutil.Process]:
    return [c for c in psutil.Process().children() if "spawn_main" in " ".join(c.cmdline())]


@pytest.fixture
def stored(tmp_path) -> Iterator[tuple[TraceStore, list[str]]]:
    """A store with three small agent traces (a node span with two tool spans each)."""
    with TraceStore(tmp_path / "store.duckdb") as store:
        spans = []
        for trace in (1, 2, 3):
            spans.append(make_span(trace, 1, name="agent", attributes={"tracegrade.span.kind": "node"}))
            for tool in (2, 3):
                spans.append(
                    make_span(
                        trace,
                        tool,
                        parent=1,
                        name=f"lookup-{tool}",
                        attributes={"tracegrade.span.kind": "tool", "tracegrade.tool.name": f"lookup-{tool}"},
                    )
                )
        store.write(spans)
        yield store, [trace_hex(t) for t in (1, 2, 3)]


def test_small_jobs_map_in_process_and_large_ones_in_a_child_with_the_same_rows(stored):
    store, trace_ids = stored
    spans, logs = store.load_arrow(trace_ids)
    expected = map_arrow(spans, logs, UPDATED_AT)
    assert expected["tool_calls"].num_rows == 6

    in_process = MappingProcess(in_process_spans=spans.num_rows)
    assert in_process.map(spans, logs, UPDATED_AT) == expected
    assert not in_process.child_running and not spawned_children()

    never_a_child = MappingProcess(in_process_spans=None)  # what `tracegrade serve` uses by default
    assert never_a_child.map(spans, logs, UPDATED_AT) == expected
    assert not never_a_child.child_running and not spawned_children()

    child = MappingProcess(in_process_spans=spans.num_rows - 1)
    try:
        tables = child.map(spans, logs, UPDATED_AT)
        assert child.child_running and spawned_children()
    finally:
        child.close()
    assert set(tables) == set(expected)
    for name, table in expected.items():
        assert tables[name].equals(table), name


def test_an_idle_child_exits_and_the_next_large_job_starts_another(stored):
    store, trace_ids = stored
    spans, logs = store.load_arrow(trace_ids)
    mapping = MappingProcess(in_process_spans=0, idle_seconds=0.2)
    try:
        mapping.map(spans, logs, UPDATED_AT)
        (first,) = spawned_children()
        assert not mapping.close_if_idle()  # just used
        time.sleep(0.3)
        assert mapping.close_if_idle()
        assert not mapping.child_running and not first.is_running()
        assert mapping.map(spans, logs, UPDATED_AT)["traces"].num_rows == 3
        assert mapping.child_running
    finally:
        mapping.close()


def test_the_rebuilder_ends_an_idle_child(stored):
    store, _ = stored
    mapping = MappingProcess(in_process_spans=0, idle_seconds=0.2)
    rebuilder = TrajectoryRebuilder(store, mapping=mapping)
    rebuilder.start()  # the store's writes queued its traces for a build
    try:
        deadline = time.monotonic() + 30
        while rebuilder.stats.traces_rebuilt < 3 or mapping.child_running:
            assert time.monotonic() < deadline, "the idle child was never ended"
            time.sleep(0.05)
    finally:
        rebuilder.stop()
    assert rebuilder.stats.rebuild_errors == 0
    assert store.query("SELECT count(*) FROM tool_calls").rows == [(6,)]
    assert not spawned_children()
