"""A retention pass killed (SIGKILL) half-way leaves every trace whole or gone, and the next pass finishes it.

The pass runs in a child process on a real store file, one trace per transaction so the kill lands between
and inside transactions; the store is then reopened (replaying DuckDB's WAL) and checked span by span.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.store_records import make_span, trace_hex
from tests.support.waiting import wait_until
from tracegrade.models.span import SpanRecord
from tracegrade.store import TraceStore
from tracegrade.store.rows import utc_now

QUIET = 300
RECENT = 20
SPANS = 3

_CHILD = """
import sys
from datetime import datetime
from tracegrade.store.trace_store import TraceStore

with TraceStore(sys.argv[1], wal=sys.argv[3] == "wal") as store:
    print("expiring", flush=True)
    store.expire(datetime.fromisoformat(sys.argv[2]), batch=1)
    print("done", flush=True)
"""


def _trace(number: int) -> list[SpanRecord]:
    root = number * 10
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
    return [make_span(number, root, name="agent", attributes={"gen_ai.operation.name": "invoke_agent"})] + [
        make_span(number, root + n, parent=root, name="search", attributes=tool) for n in range(1, SPANS)
    ]


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _state(store: TraceStore) -> tuple[dict[str, set[str]], set[str]]:
    """Span ids by trace, and the traces with a trajectory."""
    spans: dict[str, set[str]] = {}
    for trace_id, span_id in store.query("SELECT trace_id, span_id FROM spans").rows:
        spans.setdefault(trace_id, set()).add(span_id)
    built = {row[0] for row in store.query("SELECT trace_id FROM traces").rows}
    return spans, built


@pytest.mark.parametrize("wal", ["wal", "no-wal"])  # maintain on a file / the receiver, under its journal
def test_a_killed_pass_leaves_each_trace_whole_or_gone(tmp_path: Path, wal: str) -> None:
    path = tmp_path / "store.duckdb"
    sent = {trace_hex(n): {s.span_id for s in _trace(n)} for n in range(1, QUIET + RECENT + 1)}
    with TraceStore(path, wal=wal == "wal") as store:
        store.write([s for n in range(1, QUIET + 1) for s in _trace(n)])
        store.rebuild_trajectories(trace_hex(n) for n in range(1, QUIET + 1))
        time.sleep(0.01)
        cutoff = utc_now()
        time.sleep(0.01)
        store.write([s for n in range(QUIET + 1, QUIET + RECENT + 1) for s in _trace(n)])
        store.rebuild_trajectories(trace_hex(n) for n in range(QUIET + 1, QUIET + RECENT + 1))
        store.checkpoint()

    out = tmp_path / "child.out"
    with out.open("w") as log:
        child = subprocess.Popen([sys.executable, "-c", _CHILD, str(path), cutoff.isoformat(), wal], stdout=log)
    wait_until(lambda: "expiring" in out.read_text() or child.poll() is not None, "the pass to start", timeout=60)
    if wal == "wal":  # kill once a batch has committed (to the WAL), however slowly a loaded machine got there
        wal_file = path.with_name(path.name + ".wal")
        opened = _size(wal_file)
        wait_until(lambda: _size(wal_file) > opened or child.poll() is not None, "a batch's commit", timeout=60)
    else:
        time.sleep(0.5)
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    assert "done" not in out.read_text(), "the pass finished before it was killed: give it more traces"

    recent = {trace_hex(n) for n in range(QUIET + 1, QUIET + RECENT + 1)}
    with TraceStore(path, wal=wal == "wal") as store:
        spans, built = _state(store)
        for trace_id, span_ids in spans.items():
            assert span_ids == sent[trace_id], f"trace {trace_id} is partly deleted"
        assert built == set(spans), "a trajectory without its spans, or spans without their trajectory"
        assert recent <= set(spans)
        if wal == "wal":  # each batch was committed to the WAL: the pass got somewhere, and not to the end
            assert RECENT < len(spans) < QUIET + RECENT

        store.expire(cutoff)  # the next pass finishes the job
        spans, built = _state(store)
        assert set(spans) == built == recent
        assert all(spans[t] == sent[t] for t in recent)
