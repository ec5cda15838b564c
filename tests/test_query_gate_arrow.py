"""Arrow reads through the receiver's query gate (what MCP's ``grade`` loads a case's rows with) wait for a turn and
stop at the time limit like every other query. Before, ``GatedStore`` handed ``query_arrow`` to the store as it was:
a grade's reads ran beside ``--max-queries`` and without a time limit. A real file store and the receiver's gate."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.waiting import wait_until
from tracegrade.errors import QueryCancelled, QueryPreempted
from tracegrade.ingest.query_gate import GatedStore, QueryGate
from tracegrade.store import TraceStore

SLOW = "SELECT count(*) FROM range(100000000000) a"  # runs until the gate's time limit stops it


def _in_thread(read: Any) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(read())
        except Exception as exc:  # handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_an_arrow_read_waits_for_a_turn_like_any_query(tmp_path: Path) -> None:
    gate = QueryGate(max_queries=1, timeout=60)
    with TraceStore(tmp_path / "s.duckdb") as store:
        gated = GatedStore(store, gate, "acme")
        holder, held = _in_thread(lambda: gated.query(SLOW))
        wait_until(lambda: gate.running == 1, "the slow query to hold the only turn")
        reader, read = _in_thread(lambda: gated.query_arrow("SELECT 42 AS answer"))
        wait_until(lambda: gate.waiting == 1, "the Arrow read to wait for the turn")
        assert not read and reader.is_alive()
        gate.cancel_all("the test frees the turn", 3.0)
        holder.join(60)
        reader.join(60)
        assert (gate.running, gate.waiting) == (0, 0)
        # cancel_all also refused the read that waited meanwhile, as it refuses every waiting query
        # each told to come back: the server closing its store is no fault of theirs
        assert isinstance(held[0], QueryPreempted) and isinstance(read[0], QueryPreempted), (held, read)
        assert (held[0].retry_after, read[0].retry_after, held[0].http_status) == (3.0, 3.0, 503)
        assert "the test frees the turn; send it again shortly" in str(read[0])
        answer = GatedStore(store, QueryGate(1, 60), "acme").query_arrow("SELECT 42 AS answer")
        assert answer.to_pylist() == [{"answer": 42}]


def test_an_arrow_read_stops_at_the_time_limit(tmp_path: Path) -> None:
    with TraceStore(tmp_path / "s.duckdb") as store:
        gated = GatedStore(store, QueryGate(max_queries=2, timeout=1), "acme")
        with pytest.raises(QueryCancelled, match="time limit"):
            gated.query_arrow(SLOW)
