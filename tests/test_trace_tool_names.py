"""``traces.tool_names`` (schema version 6): filled when a trajectory is built, given to traces built before it
by the migration, and what the trace list's tool filter reads (the same answers as a join with tool_calls)."""

from __future__ import annotations

from pathlib import Path

from tests.support.grading_traces import AgentRun, fill_store
from tracegrade.store import TraceStore
from tracegrade.ui import api

RUNS = [
    AgentRun(1, "Refund?", "Sent.", tools=[("lookup_order", {"id": 1}), ("refund", {"id": 1}), ("lookup_order", {})]),
    AgentRun(2, "Weather?", "Sunny.", tools=[("forecast", {"city": "Oslo"})], start_offset_s=1),
    AgentRun(3, "Hello", "Hi.", start_offset_s=2),
]
JOINED = (
    "SELECT t.trace_id, coalesce(list(DISTINCT c.name ORDER BY c.name) FILTER (WHERE c.name IS NOT NULL), []) "
    "FROM traces t LEFT JOIN tool_calls c USING (tenant, trace_id) GROUP BY t.trace_id ORDER BY 1"
)


def _tool_names(store: TraceStore) -> list[tuple[str, list[str]]]:
    return [(t, list(n)) for t, n in store.query("SELECT trace_id, tool_names FROM traces ORDER BY 1").rows]


def test_builds_fill_tool_names_and_the_filter_reads_them(tmp_path: Path) -> None:
    with fill_store(tmp_path / "store.duckdb", RUNS) as store:
        names = _tool_names(store)
        assert names == [(t, list(n)) for t, n in store.query(JOINED).rows]
        assert [n for _, n in names] == [["lookup_order", "refund"], ["forecast"], []]
        for tool, expected in (("lookup_order", [1]), ("forecast", [2]), ("refund", [1]), ("nothing", [])):
            page = api.list_traces(store, api.TraceFilters(tool=tool))
            assert [t["trace_id"] for t in page["traces"]] == [f"{n:032x}" for n in expected]


def test_migrating_gives_traces_built_before_their_tool_names(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    with fill_store(path, RUNS) as store:
        built = _tool_names(store)
        # the store as version 5 left it: the same trajectories, no tool_names column
        store.execute_write("ALTER TABLE traces DROP COLUMN tool_names")
        store.execute_write("DELETE FROM schema_version WHERE version >= 6")
    with TraceStore(path) as store:
        assert _tool_names(store) == built
