"""``tracegrade maintain --purge-deleted`` on a DuckDB store file that a running ``tracegrade serve`` holds: the server
purges its own file (``POST /v1/purge``) while exporters keep sending, without being stopped.

A real receiver in a subprocess, real OTLP/HTTP exporters that send again what is refused (503 with Retry-After
while the purge runs). The forgotten trace's unique value leaves the file's bytes; every span acknowledged
before, during and after the purge is stored once; a receiver SIGKILLed in the middle of the copy restarts on a
whole file with every acknowledged span; a token without the ``purge`` scope is refused naming it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from tests.support import pg_cluster
from tests.support.export_load import ExportLoad, assert_stored_once, make_batches
from tests.support.lake_serve import LakeServerProcess
from tests.support.pg_cluster import PgServer
from tests.support.server_otlp import HttpReply, post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import query
from tests.support.store_records import make_span, trace_hex
from tests.support.waiting import wait_until
from tracegrade.cli.main import cli
from tracegrade.store import TraceStore

TOKEN = "purge-test-token-every-scope-0123456789"
NO_FORGET = "purge-test-token-ingest-and-read-0123456789"  # may send and read, not erase
FORGET_ONLY = "purge-test-token-may-forget-0123456789"  # may erase traces, not rewrite the file (a tenant's)
SECRET_TRACE = 1  # the trace that is forgotten, then purged from the file
STORED_TRACES = 40  # traces in the store before the receiver starts
BIG_TRACES = 12_000  # of 5 spans of 800 random bytes each: a purge that copies for a second or two
pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

SUMMARY = re.compile(r"purged the deleted rows: the file went from [\d,]+ to [\d,]+ bytes")


def _store_with_secret(path: Path, secret: str, traces: int, blob: int = 0) -> None:
    """A store file of ``traces`` traces of 5 spans (``blob`` random bytes as hex in each), the first holding
    ``secret``, written before any receiver holds it (so its bytes are in the file, checkpointed)."""
    with TraceStore(path) as store:
        # stored uncompressed, so that the secret's bytes are in the file verbatim (DuckDB may pick FSST for a
        # column of attributes, which would hide them from the byte search whether deleted or not)
        store._con.execute("SET force_compression = 'uncompressed'")
        for first in range(1, traces + 1, 2000):
            spans = []
            for trace in range(first, min(first + 2000, traces + 1)):
                attributes = {"blob": os.urandom(blob).hex()} if blob else {}
                if trace == SECRET_TRACE:
                    attributes["user.email"] = secret
                spans += [make_span(trace, trace * 10 + n, attributes=attributes) for n in range(5)]
            store.write(spans)
    assert secret.encode() in path.read_bytes()  # what a purge must take away, there to begin with


def _server(store: Path, tmp_path: Path) -> ServerProcess:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(
        f"tenants:\n  default:\n    - {TOKEN}\n    - {{token: {NO_FORGET}, scopes: [ingest, read]}}\n"
        f"    - {{token: {FORGET_ONLY}, scopes: [ingest, read, forget]}}\n"
    )
    return ServerProcess(store, extra_args=("--tokens", str(tokens)))


def _exporting(server: ServerProcess, batches: int) -> ExportLoad:
    """A real OTLP/HTTP exporter sending one trace a request, each sent again until acknowledged."""
    exporter = OTLPSpanExporter(
        endpoint=f"{server.http_url}/v1/traces", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
    )
    load = ExportLoad(exporter, make_batches(batches, 3), pause=0.02, resend=True)
    load.start()
    return load


def _cli(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _purge_request(server: ServerProcess, token: str) -> HttpReply:
    return post(f"{server.http_url}/v1/purge", b"{}", "application/json", token=token)


@dataclass
class PurgeUnderWay:
    """A served store file, a real exporter sending to it, and ``maintain --purge-deleted`` copying its live rows
    through the server (the copy is there) after the trace holding ``secret`` was forgotten."""

    server: ServerProcess
    load: ExportLoad
    maintain: subprocess.Popen[str]
    copy: Path
    secret: str
    inode: int  # the store file's before the purge: a purge that goes through renames its copy over it

    def stop_exports(self) -> None:
        """Stop the exporter and the server (killed, if it still runs)."""
        self.load.stop()
        self.load.join(120)
        self.server.kill()


def _purge_under_way(store: Path, tmp_path: Path) -> PurgeUnderWay:
    """:class:`PurgeUnderWay` on ``store`` (made here, of BIG_TRACES traces: a copy that takes a second or two)."""
    secret = f"erase-me-{uuid.uuid4().hex}@example.com"
    _store_with_secret(store, secret, BIG_TRACES, blob=400)
    inode = store.stat().st_ino
    server = _server(store, tmp_path).start()
    load = _exporting(server, 3000)
    try:
        wait_until(lambda: load.acked_batches >= 10, "exports acknowledged before the purge")
        forgot = _cli("forget", "--store", str(store), "--token", TOKEN, trace_hex(SECRET_TRACE))
        assert forgot.exit_code == 0, forgot.output
        command = [sys.executable, "-c", "from tracegrade.cli.main import main; main()", "maintain"]
        maintain = subprocess.Popen(
            [*command, "--store", str(store), "--purge-deleted", "--token", TOKEN],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        copy = store.with_name(store.name + ".purging")
        wait_until(copy.exists, "the purge's copy of the file", timeout=120, interval=0.005)
    except BaseException:
        load.stop()
        load.join(120)
        server.kill()
        raise
    return PurgeUnderWay(server, load, maintain, copy, secret, inode)


def test_a_purge_through_the_cli_takes_a_forgotten_trace_out_of_a_served_file_while_exports_go_on(
    tmp_path: Path,
) -> None:
    store = tmp_path / "traces.duckdb"
    secret = f"erase-me-{uuid.uuid4().hex}@example.com"
    _store_with_secret(store, secret, STORED_TRACES)
    with _server(store, tmp_path) as server:
        load = _exporting(server, 3000)
        try:
            wait_until(lambda: load.acked_batches >= 10, "exports acknowledged before the purge")
            forgot = _cli("forget", "--store", str(store), "--token", TOKEN, trace_hex(SECRET_TRACE))
            assert forgot.exit_code == 0 and "forgot 1 trace(s)" in forgot.output, forgot.output

            purged = _cli("maintain", "--store", str(store), "--purge-deleted", "--token", TOKEN)

            assert purged.exit_code == 0, purged.output
            assert SUMMARY.fullmatch(purged.output.strip()), purged.output  # the summary a local purge prints
            after_purge = load.acked_batches
            wait_until(lambda: load.acked_batches >= after_purge + 10, "exports acknowledged after the purge")
        finally:
            load.stop()
            load.join(60)
        assert not load.is_alive()
        assert "the store file is being purged of its deleted rows" in server.log()
        stored = query(server.http_url, "SELECT count(*) FROM spans", token=TOKEN)  # the server still answers
        assert stored == [[(STORED_TRACES - 1) * 5 + len(load.acked)]]
        assert server.terminate() == 0, server.log()
    assert secret.encode() not in store.read_bytes()
    assert not store.with_name(store.name + ".purging").exists()
    counts = assert_stored_once(store, load.acked)
    assert len(counts) == (STORED_TRACES - 1) * 5 + len(load.acked)  # nothing else, the forgotten trace gone


@pytest.mark.parametrize("kill_at", ["copying", "replaced"])
def test_a_receiver_killed_in_the_middle_of_a_purge_restarts_with_every_acknowledged_span(
    tmp_path: Path, kill_at: str
) -> None:
    """SIGKILLed while the purge copies the live rows (the old file stays), or just after it renamed the copy over
    the file (the new one is there): either file opens whole at restart, with every acknowledged span once."""
    store = tmp_path / "traces.duckdb"
    purge = _purge_under_way(store, tmp_path)
    server, load, maintain, copy, secret = purge.server, purge.load, purge.maintain, purge.copy, purge.secret
    try:
        if kill_at == "copying":
            again = _purge_request(server, TOKEN)  # one purge at a time: refused at once, not queued
            meanwhile = post(f"{server.http_url}/v1/query", b'{"sql": "SELECT 1"}', "application/json", token=TOKEN)
            server.kill()
            assert copy.exists(), "the purge had finished before the kill: it proves nothing"
            assert again.status == 409 and "under way" in again.json()["error"], again.body
            assert meanwhile.status == 503 and "being purged" in meanwhile.body.decode(), meanwhile.body
            assert int(meanwhile.headers["Retry-After"]) >= 1
            # the old file, as it was: no copy renamed over it (the forgotten secret's bytes are no test of that: CI
            # once found them gone from a file no purge had replaced)
            assert store.stat().st_ino == purge.inode
        else:
            wait_until(lambda: not copy.exists(), "the copy renamed over the file", timeout=120, interval=0.001)
            server.kill()
            assert store.stat().st_ino != purge.inode and secret.encode() not in store.read_bytes()  # the new file
        output, _ = maintain.communicate(timeout=60)
        assert maintain.returncode == 1 and "did not answer the request to purge" in output, output
    finally:
        purge.stop_exports()
    assert not load.is_alive()

    with _server(store, tmp_path) as restarted:  # the file opens whole, and the journal is replayed
        count = query(restarted.http_url, "SELECT count(*) FROM spans WHERE trace_id = ?", [trace_hex(1)], TOKEN)
        assert count == [[0]]
        purged = _cli("maintain", "--store", str(store), "--purge-deleted", "--token", TOKEN)  # and purges
        assert purged.exit_code == 0 and SUMMARY.fullmatch(purged.output.strip()), purged.output
        assert restarted.terminate() == 0, restarted.log()
    assert secret.encode() not in store.read_bytes() and not copy.exists()
    counts = assert_stored_once(store, load.acked)
    assert len(counts) == (BIG_TRACES - 1) * 5 + len(load.acked)


def test_a_token_without_the_purge_scope_may_not_purge(tmp_path: Path) -> None:
    """``forget`` is not enough: a purge pauses every tenant's exports, so it has a scope of its own."""
    store = tmp_path / "traces.duckdb"
    _store_with_secret(store, "not-erased-at-all", STORED_TRACES)
    with _server(store, tmp_path) as server:
        refused = _purge_request(server, NO_FORGET)
        refused_forgetter = _purge_request(server, FORGET_ONLY)
        through_cli = _cli("maintain", "--store", str(store), "--purge-deleted", "--token", FORGET_ONLY)
        bad_body = post(f"{server.http_url}/v1/purge", b'{"now": true}', "application/json", token=TOKEN)
        as_form = post(f"{server.http_url}/v1/purge", b"", "application/x-www-form-urlencoded", token=TOKEN)
        assert query(server.http_url, "SELECT count(*) FROM spans", token=NO_FORGET) == [[STORED_TRACES * 5]]
        assert "being purged" not in server.log()

    for reply in (refused, refused_forgetter):
        assert reply.status == 403, reply.body
        assert "may not purge the store file" in reply.json()["error"] and "'purge'" in reply.json()["error"]
    assert through_cli.exit_code == 1 and "403" in through_cli.output and "'purge'" in through_cli.output
    assert bad_body.status == 400 and "takes no parameters" in bad_body.json()["error"]
    assert as_form.status == 415, as_form.body  # what another site's form could post is refused


@pytest.mark.parametrize("body", [b"", b"{}"])
def test_a_purge_request_answers_the_sizes(tmp_path: Path, body: bytes) -> None:
    store = tmp_path / "traces.duckdb"
    _store_with_secret(store, "erased", STORED_TRACES)
    with _server(store, tmp_path) as server:
        reply = post(f"{server.http_url}/v1/purge", body, "application/json", token=TOKEN)
        assert reply.status == 200, reply.body
        sizes = reply.json()["purged"]
        assert sizes["bytes_before"] > 0 and sizes["bytes_after"] > 0
        assert query(server.http_url, "SELECT count(*) FROM spans", token=TOKEN) == [[STORED_TRACES * 5]]


def test_a_lake_receiver_leaves_the_purge_to_maintain_beside_it(pg_server: PgServer, tmp_path: Path) -> None:
    location = f"ducklake:postgres:{pg_server.new_database()}"
    with LakeServerProcess(location, tmp_path / "lake-data", tmp_path / "one.journal") as server:
        reply = post(f"{server.http_url}/v1/purge", b"{}", "application/json")
        assert query(server.http_url, "SELECT count(*) FROM spans") == [[0]]  # still serving
    assert reply.status == 400, reply.body
    assert "purged beside its receivers" in reply.json()["error"] and "--purge-deleted" in reply.json()["error"]
