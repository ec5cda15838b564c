"""A query cancelled while the store still prepares it (its cursor attached, its statement not yet executing) stops
all the same. DuckDB drops an interrupt that reaches a cursor before its statement starts, so a cancel that landed
in that window (the gate's ``cancel_all`` at shutdown, a client hanging up, the time limit) was lost, and the query
ran to its end: 29 s of ``count(*) FROM range(100000000000)`` in a CI run of tests/test_query_gate_arrow.py.
A real DuckDB cursor; the window is made wide by cancelling before the statement is given to it."""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb
import pytest

from tracegrade.errors import QueryCancelled
from tracegrade.store import TraceStore
from tracegrade.store.query_control import QueryControl

# about 30 s of counting if nothing stops it: the test then fails (a result instead of an interrupt)
RUNAWAY = "SELECT count(*) FROM range(100000000000)"


def test_duckdb_drops_an_interrupt_that_comes_before_the_statement() -> None:
    # the reason for the repeated interrupts: if DuckDB ever keeps such an interrupt, this fails and they can go
    cursor = duckdb.connect().cursor()
    cursor.interrupt()
    assert cursor.execute("SELECT count(*) FROM range(1000)").fetchall() == [(1000,)]


def test_a_control_cancelled_before_its_statement_starts_still_stops_it() -> None:
    cursor = duckdb.connect().cursor()
    control = QueryControl()
    assert control.attach(cursor)
    control.cancel("the client hung up")
    try:
        with pytest.raises(duckdb.InterruptException):
            cursor.execute(RUNAWAY).fetchall()
    finally:
        control.detach()
    assert control.reason == "the client hung up"
    # once the query is over, the cursor is left alone: its next statement runs
    assert cursor.execute("SELECT 1").fetchall() == [(1,)]


def test_a_store_query_cancelled_while_it_is_prepared_raises_query_cancelled(tmp_path: Path) -> None:
    class CancelledOnAttach(QueryControl):
        """Cancelled by another thread as soon as the store attaches its cursor, before the statement runs."""

        def attach(self, cursor: object) -> bool:
            attached = super().attach(cursor)
            canceller = threading.Thread(target=self.cancel, args=("the server is stopping",))
            canceller.start()
            canceller.join()
            return attached

    with TraceStore(tmp_path / "s.duckdb") as store:
        with pytest.raises(QueryCancelled, match="the server is stopping"):
            store.query(RUNAWAY, control=CancelledOnAttach())
        assert store.query("SELECT 42 AS answer").rows == [(42,)]
