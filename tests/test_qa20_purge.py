"""Review of session 19's purge through a server (session 20): what it left behind, pinned by tests that failed
before the fix.

- a receiver SIGKILLed while it purges its file left the purge's copy (``<store>.purging``, as large as the live
  rows) on disk until the next purge; the next opening of the file for writing removes it and says so, while a
  purge under way keeps its copy (whoever tries to open the file meanwhile is refused by its lock).
- a purge that failed (a full disk) removed its copy but not the copy's WAL (``<store>.purging.wal``, where DuckDB
  writes the copied rows first), and said nothing in the receiver's log; the old file stays whole and the receiver
  keeps serving. Its answer was a 500 (a fault of the server's); it is 507 Insufficient Storage, saying to free
  space and that the file was left as it was (session 21).
- a query running or waiting for its turn when a purge began was answered 400 ("the query was cancelled"), which
  says the query is at fault and is not retried; it is answered 503 with ``Retry-After``, as a query sent during
  the purge is.
- a stop that interrupted a purge just as it failed (and closed its connection) failed on DuckDB's refusal to
  interrupt a closed connection.
"""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import pytest

from tests.support.export_load import assert_stored_once
from tests.support.posted_query import PostedQuery, mcp_run_sql
from tests.support.server_otlp import HttpReply, post
from tests.support.server_requests import query, receiver_metric
from tests.support.small_fs import fill, free, small_filesystem
from tests.support.store_records import make_span, trace_hex
from tests.support.waiting import wait_until
from tests.test_purge_through_server import (
    BIG_TRACES,
    SECRET_TRACE,
    TOKEN,
    _cli,
    _exporting,
    _purge_request,
    _purge_under_way,
    _server,
    _store_with_secret,
)
from tracegrade.errors import StoreError, StoreLockedError
from tracegrade.store import TraceStore
from tracegrade.store.file_purge import PurgeInterrupt, purge_deleted_rows

REMOVED = "the copy a purge of the store file left when it died"
STORED_QUERY_TRACES = 40  # 200 spans: a four-way join of them runs for hours
ENDLESS = (
    "SELECT count(*) FROM spans a, spans b, spans c, spans d WHERE hash(a.span_id, b.span_id, c.span_id, d.span_id) = 0"
)


def test_the_copy_a_killed_purge_left_goes_when_the_receiver_restarts_and_not_while_a_purge_runs(
    tmp_path: Path,
) -> None:
    store = tmp_path / "traces.duckdb"
    purge = _purge_under_way(store, tmp_path)
    server, load, maintain, copy = purge.server, purge.load, purge.maintain, purge.copy
    try:
        with pytest.raises(StoreLockedError):  # the purge holds the file: no writer opens it to take the copy
            TraceStore(store)
        server.kill()
        assert copy.exists(), "the purge had finished before the kill: it proves nothing"
        maintain.communicate(timeout=60)
    finally:
        purge.stop_exports()
    assert not load.is_alive()
    assert REMOVED not in server.log()

    with _server(store, tmp_path) as restarted:
        assert not list(tmp_path.glob("traces.duckdb.purging*"))  # gone as the file opened, not at the next purge
        assert REMOVED in restarted.log() and str(copy) in restarted.log(), restarted.log()
        count = query(restarted.http_url, "SELECT count(*) FROM spans WHERE trace_id = ?", [trace_hex(1)], TOKEN)
        assert count == [[0]]
        assert restarted.terminate() == 0, restarted.log()
    counts = assert_stored_once(store, load.acked)
    assert len(counts) == (BIG_TRACES - 1) * 5 + len(load.acked)


def test_a_local_store_opened_for_writing_removes_a_left_copy_and_one_opened_for_reading_keeps_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "traces.duckdb"
    _store_with_secret(store, "kept", 3)
    copy = store.with_name(store.name + ".purging")
    copy.write_bytes(b"what a purge killed mid-copy left")
    link = tmp_path / "link.duckdb"
    link.symlink_to(store)  # the purge copies beside the file a link names: that is where it is looked for

    TraceStore(link, read_only=True).close()
    assert copy.exists()
    TraceStore(link).close()
    assert not copy.exists()
    assert REMOVED in caplog.text and str(copy) in caplog.text


def test_a_purge_that_fills_the_disk_leaves_no_copy_and_the_receiver_serves_on(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "disk", "64m") as mount:
        store = mount / "traces.duckdb"
        secret = f"erase-me-{uuid.uuid4().hex}@example.com"
        _store_with_secret(store, secret, 3000, blob=400)
        server = _server(store, tmp_path)
        server.log_path = tmp_path / "serve.log"  # off the full disk: the log says what happened there
        server.start()
        load = _exporting(server, 3000)
        try:
            wait_until(lambda: load.acked_batches >= 10, "exports acknowledged before the purge")
            forgot = _cli("forget", "--store", str(store), "--token", TOKEN, trace_hex(SECRET_TRACE))
            assert forgot.exit_code == 0, forgot.output
            inode = store.stat().st_ino
            fill(mount, leave=store.stat().st_size // 4)  # less room than the live rows' copy takes
            failed = _purge_request(server, TOKEN)
            left = sorted(path.name for path in mount.glob("traces.duckdb.purging*"))
            held = store.stat().st_ino == inode  # the old file, as it was: no copy renamed over it
            free(mount)
            after = load.acked_batches
            wait_until(lambda: load.acked_batches >= after + 10, "exports acknowledged after the failed purge")
            purged = _purge_request(server, TOKEN)  # with room again, the purge goes through
            returncode = server.terminate()
        finally:
            load.stop()
            load.join(120)
            server.kill()
        assert not load.is_alive()
        assert returncode == 0, server.log()
        # 507, saying what to do: not the 500 of a fault of the server's, nor a 503 that tools retry at once (each
        # attempt would pause exports and queries for a copy that cannot fit until space is freed)
        assert failed.status == 507, failed.body
        error = failed.json()["error"]
        assert "no space left on device" in error.lower(), error
        assert "Free space on that disk, then send the request again" in error, error
        assert "left as it was" in error and "nothing was lost" in error, error
        assert "Retry-After" not in failed.headers
        assert left == [], left
        assert held
        assert "of its deleted rows failed" in server.log(), server.log()
        assert purged.status == 200, purged.body
        assert secret.encode() not in store.read_bytes()
        counts = assert_stored_once(store, load.acked)
        assert len(counts) == (3000 - 1) * 5 + len(load.acked)


def test_a_stop_that_interrupts_a_purge_as_it_fails_does_not_fail(tmp_path: Path) -> None:
    """The receiver's stop interrupts the purge it finds under way; the purge may have failed and closed its
    connection just then (the stop runs on the event loop, the purge in a thread, which has not told the loop yet)."""
    with small_filesystem(tmp_path / "disk", "16m") as mount:
        store = mount / "traces.duckdb"
        with TraceStore(store) as written:
            blob = {"blob": os.urandom(400).hex()}
            written.write([make_span(trace, trace * 10 + n, attributes=blob) for trace in range(300) for n in range(5)])
        fill(mount, leave=store.stat().st_size // 4)
        interrupt = PurgeInterrupt()
        with pytest.raises(StoreError, match="failed"):
            purge_deleted_rows(store, interrupt)

        interrupt.interrupt()  # what the stop does

        assert interrupt.requested
        assert not list(mount.glob("traces.duckdb.purging*"))


def test_queries_under_way_when_a_purge_begins_are_told_to_retry(tmp_path: Path) -> None:
    store = tmp_path / "traces.duckdb"
    _store_with_secret(store, f"kept-{uuid.uuid4().hex}@example.com", STORED_QUERY_TRACES)
    # one query runs at a time: the second waits for its turn, the first runs until the purge stops it
    server = _server(store, tmp_path)
    server.extra_args += ("--max-queries", "1", "--query-timeout", "600")
    replies: list[HttpReply] = []

    def endless_query() -> None:
        endless = b'{"sql": "SELECT count(*) FROM spans a, spans b, spans c, spans d"}'
        replies.append(post(f"{server.http_url}/v1/query", endless, "application/json", token=TOKEN))

    with server:
        asking = [threading.Thread(target=endless_query) for _ in range(2)]
        for thread in asking:
            thread.start()
            wait_until(lambda: receiver_metric(server.http_url, "queries_running") == 1, "the query running")
        wait_until(lambda: receiver_metric(server.http_url, "queries_waiting") == 1, "the second query waiting")
        purged = _purge_request(server, TOKEN)
        for thread in asking:
            thread.join(60)
        after = query(server.http_url, "SELECT count(*) FROM spans", token=TOKEN)
    assert purged.status == 200, purged.body
    assert [reply.status for reply in replies] == [503, 503], [reply.body for reply in replies]
    for reply in replies:
        assert int(reply.headers["Retry-After"]) >= 1
        assert "being purged" in reply.json()["message"], reply.body
    assert after == [[STORED_QUERY_TRACES * 5]]  # asked again, the query is answered


def test_the_web_ui_and_mcp_queries_under_way_when_a_purge_begins_are_told_to_retry(tmp_path: Path) -> None:
    """As ``/v1/query``'s: the SQL page's API answers 503 with Retry-After (not the 400 of a query at fault), and
    MCP's ``run_sql`` says to send the query again."""
    store = tmp_path / "traces.duckdb"
    _store_with_secret(store, f"kept-{uuid.uuid4().hex}@example.com", STORED_QUERY_TRACES)
    server = _server(store, tmp_path)
    server.extra_args += ("--max-queries", "2", "--query-timeout", "600")
    with server:
        ui = PostedQuery(server.http_url, "/ui/api/sql", TOKEN, ENDLESS)
        wait_until(lambda: receiver_metric(server.http_url, "queries_running") == 1, "the UI's query running")
        mcp = mcp_run_sql(server.http_url, TOKEN, ENDLESS)
        wait_until(lambda: receiver_metric(server.http_url, "queries_running") == 2, "MCP's query running")
        purged = _purge_request(server, TOKEN)
        ui_status, ui_answer = ui.answer()
        ui_headers = ui.reply_headers
        mcp_status, mcp_answer = mcp.answer()
        after = query(server.http_url, "SELECT count(*) FROM spans", token=TOKEN)
    assert purged.status == 200, purged.body
    assert ui_status == 503, ui_answer
    assert "being purged" in ui_answer["error"] and "send it again" in ui_answer["error"], ui_answer
    assert ui_headers is not None and int(ui_headers["Retry-After"]) >= 1
    assert mcp_status == 200, mcp_answer
    result = mcp_answer["result"]
    text = " ".join(part.get("text", "") for part in result["content"])
    assert result["isError"] and "being purged" in text and "send it again" in text, result
    assert after == [[STORED_QUERY_TRACES * 5]]
