"""A lake receiver replaces its DuckDB connection once it took ``renew_after_commits`` snapshots in on it (its own
commits, and its reads at a snapshot another process's commit made newer than its last read's; DuckDB keeps memory
per DuckLake snapshot it took in until its database closes), while real OTLP exporters send and a tenant's queries
(``/v1/query``, MCP's ``run_sql``: several statements each, on a cursor of the connection) keep reading: no query
fails, and every acknowledged span is stored once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.export_load import ExportLoad, make_batches
from tests.support.lake_serve import lake_span_counts
from tests.support.pg_cluster import PgServer
from tests.support.posted_query import PostedQuery, mcp_run_sql
from tests.support.server_inprocess import running_server
from tests.support.store_records import make_span
from tests.support.tenant_traffic import ACME_TOKENS, write_tokens
from tracegrade.store.lake import LakeStore

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

_TOKEN = ACME_TOKENS[0]
_RENEW_AFTER = 4  # commits per connection: a renewal every few exports (the default is 200)
# a query that takes a while (every span, many times over), so that renewals come while queries run
_LONG_QUERY = "SELECT count(*) FROM spans s, range(3000) r WHERE s.name <> ''"


class _Queries(threading.Thread):
    """Queries over HTTP and MCP, one after another until stopped; every answer that was not a success."""

    def __init__(self, http_url: str) -> None:
        super().__init__(daemon=True)
        self.http_url = http_url
        self.answered = 0
        self.failures: list[object] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            status, body = PostedQuery(self.http_url, "/v1/query", _TOKEN, _LONG_QUERY).answer()
            if status != 200:
                self.failures.append((status, body))
            status, reply = mcp_run_sql(self.http_url, _TOKEN, "SELECT count(*) FROM traces").answer()
            if status != 200 or reply.get("result", {}).get("isError"):
                self.failures.append((status, reply))
            self.answered += 2


def test_connection_renewed_while_exports_and_queries_run_every_span_once(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    monkeypatch.setattr(LakeStore, "renew_after_commits", _RENEW_AFTER)
    monkeypatch.setattr(LakeStore, "commit_seconds", 0.05)  # a commit for nearly every export
    location = f"ducklake:postgres:{pg_server.new_database()}"
    tokens = write_tokens(tmp_path / "tokens.yaml", {"acme": [_TOKEN]})
    settings = {"lake_data": tmp_path / "lake-data", "journal": tmp_path / "journal", "tokens": tokens}
    with running_server(location, **settings) as receiver:  # type: ignore[arg-type]
        queries = [_Queries(receiver.http_url) for _ in range(2)]
        loads = [
            ExportLoad(
                OTLPSpanExporter(
                    endpoint=f"{receiver.http_url}/v1/traces",
                    headers={"Authorization": f"Bearer {_TOKEN}"},
                    timeout=120,
                ),
                make_batches(40, 5),
                pause=0.1,
            )
            for _ in range(2)
        ]
        try:
            for thread in (*queries, *loads):
                thread.start()
            for load in loads:
                load.join(300)
                assert not load.is_alive(), "the exporter never got its spans in"
        finally:
            for query in queries:
                query.halt.set()
            for query in queries:
                query.join(300)
        store = receiver.server._storage.store
        assert store.failure is None
        assert receiver.server.reopened == 0  # renewed in place, never failed and reopened
        renewals = store.renewals
    assert renewals >= 3  # 80 exports, a commit for one or a few each, and the trajectory builds' commits
    assert all(query.answered for query in queries)
    assert [failure for query in queries for failure in query.failures] == []
    assert all(load.acked_batches == len(load.batches) for load in loads)
    acked = [ids for load in loads for ids in load.acked]
    stored = lake_span_counts(location, "raw.spans")  # every copy written, not the deduplicating view
    assert len(acked) == 400
    assert [ids for ids in acked if stored.get(ids) != 1] == []
    assert len(stored) == len(acked)


def test_a_read_open_across_a_renewal_goes_on_and_its_connection_is_closed_when_it_ends() -> None:
    import duckdb

    from tracegrade.store.read_cursors import ReadCursors

    old, new = duckdb.connect(":memory:"), duckdb.connect(":memory:")
    new.execute("CREATE TABLE renewed AS SELECT 1 AS one")
    released: list[str] = []
    reads = ReadCursors(old.cursor(), None, lambda: "the store")
    reading = reads.open()
    reads.renew(new.cursor(), lambda: (released.append("old"), old.close()))
    assert reading.execute("SELECT 42").fetchall() == [(42,)]  # a statement after the renewal, on the old database
    assert released == []
    fresh = reads.open()
    assert fresh.execute("SELECT one FROM renewed").fetchall() == [(1,)]  # new reads are on the new database
    reads.end(reading)
    assert released == ["old"]  # the last read of the old connection closed it
    with pytest.raises(duckdb.ConnectionException):
        old.execute("SELECT 1")
    idle = duckdb.connect(":memory:")
    reads.renew(idle.cursor(), lambda: (released.append("new"), new.close()))  # closed when ``fresh`` ends
    reads.end(fresh)
    assert released == ["old", "new"]
    last = duckdb.connect(":memory:")
    reads.renew(last.cursor(), lambda: (released.append("idle"), idle.close()))  # none reading: at once
    assert released == ["old", "new", "idle"]
    reads.close()
    last.close()


def _counts_after_each_commit(writer: LakeStore, reader: LakeStore, traces: range) -> list[int]:
    """The spans ``reader`` counts after each of ``writer``'s commits, one span of each trace."""
    counts = []
    for trace in traces:
        writer.write([make_span(trace, trace * 10)])
        counts.append(reader.query("SELECT count(*) FROM spans").rows[0][0])
    return counts


def test_a_read_only_store_renews_its_connection_after_as_many_reads_of_new_snapshots(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader commits nothing, but each read at a new snapshot (another process committed) takes it in
    (``tracegrade ui`` on a lake, for days): it is renewed after ``renew_after_commits`` such reads, and each read sees
    every commit. Reads of a lake nobody writes take nothing in, nor do a rare writer's commits count the lake's."""
    monkeypatch.setattr(LakeStore, "renew_after_commits", _RENEW_AFTER)
    location, data = f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"
    with LakeStore(location, data_path=data) as writer, LakeStore(location, read_only=True) as reader:
        counts = _counts_after_each_commit(writer, reader, range(1, 13))
        # the first read notes where it starts (the open took that snapshot in): a renewal before the 6th and 10th
        assert reader.renewals == 2
        assert writer.renewals == (12 - 1) // _RENEW_AFTER  # its own commits count, not the reader's reads
        for _ in range(3 * _RENEW_AFTER):  # no commit meanwhile: the same snapshot each time
            counts.append(reader.query("SELECT count(*) FROM spans").rows[0][0])
        assert reader.renewals == 2
        writer.write([make_span(13, 130)])
        assert writer.renewals == 3  # before its 13th commit, the 4th since the last renewal
        with LakeStore(location, data_path=data) as busy:
            for trace in range(14, 14 + 3 * _RENEW_AFTER):
                busy.write([make_span(trace, trace * 10)])
        for trace in range(100, 100 + _RENEW_AFTER - 1):
            writer.write([make_span(trace, 1)])
        assert writer.renewals == 3  # others' commits meanwhile are not its own
    assert counts == [*range(1, 13), *[12] * (3 * _RENEW_AFTER)]


def test_a_writer_that_rarely_commits_is_renewed_by_its_reads_of_others_commits_never_inside_its_own_transaction(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A receiver that answers queries (UI, MCP, ``/v1/query``) while other receivers commit takes a snapshot in at
    each: it is renewed before a read as a read-only store is, though it never commits. Not by a read inside its own
    write transaction (on the thread holding its write lock, which is reentrant), nor by one beside its commit (its
    write lock held on another thread): its next commit is renewed instead."""
    monkeypatch.setattr(LakeStore, "renew_after_commits", _RENEW_AFTER)
    location, data = f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"
    with LakeStore(location, data_path=data) as quiet, LakeStore(location, data_path=data) as busy:
        counts = _counts_after_each_commit(busy, quiet, range(1, 13))
        assert counts == list(range(1, 13))
        assert quiet.renewals == 2  # before its 6th and 10th reads (its first noted where it starts)
        assert busy.renewals == (12 - 1) // _RENEW_AFTER  # its commits alone: it read nothing
        with quiet._transaction("reading inside its own write transaction"):
            for trace in (13, 14):  # its 4th snapshot since the renewal, then one past due
                busy.write([make_span(trace, trace * 10)])
                counts.append(quiet.query("SELECT count(*) FROM spans").rows[0][0])
            assert quiet.renewals == 2
        for trace in (15, 16):  # more commits than its own empty one since its last read: a new snapshot
            busy.write([make_span(trace, trace * 10)])
        beside: list[int] = []
        beside_a_commit = threading.Thread(
            target=lambda: beside.append(quiet.query("SELECT count(*) FROM spans").rows[0][0])
        )
        with quiet._write_lock:  # as its writer's commit holds it: the read neither waits nor renews
            beside_a_commit.start()
            beside_a_commit.join(300)
            assert not beside_a_commit.is_alive()
        assert quiet.renewals == 2
        quiet.write([make_span(17, 170)])
        assert quiet.renewals == 3  # its next commit is renewed first
    assert counts[12:] == [13, 14]
    assert beside == [16]
