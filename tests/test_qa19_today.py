"""Review of the day's commits (session 19): what they broke, each pinned by a test that failed before its fix.

- a receiver stopped (SIGTERM) while it purges its store file (``POST /v1/purge``) abandons the copy and stops,
  rather than finishing a copy that may take hours, and its old file opens whole with every acknowledged span.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.export_load import assert_stored_once
from tests.support.server_requests import query
from tests.support.store_records import trace_hex
from tests.test_purge_through_server import BIG_TRACES, TOKEN, _purge_under_way, _server


def test_a_receiver_stopped_in_the_middle_of_a_purge_abandons_it_and_keeps_every_acknowledged_span(
    tmp_path: Path,
) -> None:
    store = tmp_path / "traces.duckdb"
    purge = _purge_under_way(store, tmp_path)
    server, load, maintain, copy = purge.server, purge.load, purge.maintain, purge.copy
    try:
        returncode = server.terminate()
        output, _ = maintain.communicate(timeout=60)
    finally:
        purge.stop_exports()
    assert not load.is_alive()
    assert returncode == 0, server.log()
    assert "purge was interrupted" in server.log(), server.log()
    assert maintain.returncode == 1 and "purge was interrupted" in output, output
    assert not copy.exists()
    assert store.stat().st_ino == purge.inode  # the old file: the copy was abandoned, not renamed over it

    with _server(store, tmp_path) as restarted:
        count = query(restarted.http_url, "SELECT count(*) FROM spans WHERE trace_id = ?", [trace_hex(1)], TOKEN)
        assert count == [[0]]
        assert restarted.terminate() == 0, restarted.log()
    counts = assert_stored_once(store, load.acked)
    assert len(counts) == (BIG_TRACES - 1) * 5 + len(load.acked)
