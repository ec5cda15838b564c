"""Setting a journal record aside as a dead letter, on a real (small, full) filesystem and through a real receiver.

* A dead-letter directory on a full disk: the record stays in its segment, and no half-written copy is left
  behind to hold the room the next attempt needs (one used to be left, as large as the disk allowed).
* The same record set aside twice (a later start replays it again): never overwritten.
* Another tenant's dead letter names its tenant in its file name, and the ERROR names it and a command that
  stores it as that tenant while the receiver runs: ``tracegrade import --tenant`` through a running server
  used to be ignored silently, filing the records under the token's tenant; it is now refused, saying what to
  do.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.support.grading_cli import run_cli
from tests.support.server_process import ServerProcess
from tests.support.server_requests import query, span_json, traces_json
from tests.support.small_fs import fill, free, small_filesystem
from tracegrade.errors import StoreError
from tracegrade.ingest.intake import RECORD_KINDS, journal_record, journal_request
from tracegrade.ingest.journaled_writer import JournaledWriter
from tracegrade.ingest.otlp_responses import Signal, WireFormat
from tracegrade.store.journal import RequestJournal, dead_letter_directory, journal_directory
from tracegrade.store.trace_store import TraceStore
from tracegrade.store.writer import StoreWriter

JSON_TRACES = RECORD_KINDS[(Signal.TRACES, WireFormat.JSON)]
ACME, OPS = "acme-token-0123456789abcdef", "ops-token-0123456789abcdefgh"


def _request(trace: int, spans: int = 1, attribute_bytes: int = 10) -> bytes:
    big = [{"key": "payload", "value": {"stringValue": "x" * attribute_bytes}}]
    return json.dumps(traces_json([span_json(f"{trace:032x}", i, attributes=big) for i in range(spans)])).encode()


def _recovered(journal_dir: Path, requests: list[tuple[bytes, str]]) -> RequestJournal:
    """A journal reopened over a segment holding ``requests`` (request, tenant), as a killed receiver left it."""
    journal = RequestJournal(journal_dir)
    journal.append([journal_record(JSON_TRACES, request, tenant) for request, tenant in requests])
    journal.close()
    return RequestJournal(journal_dir)


def test_a_dead_letter_that_does_not_fit_leaves_its_segment_and_no_partial_file(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "fs", "8m") as mount:
        request = _request(1, attribute_bytes=2_000_000)
        journal = _recovered(mount / "store.duckdb.journal", [(request, "default")])
        (record,) = journal.recovered_records()
        fill(mount, leave=256 * 1024)
        with pytest.raises(StoreError, match=r"cannot set a journal record aside in .*No space left.* is kept"):
            journal.set_aside(record, request, ".json")
        dead = dead_letter_directory(journal.directory)
        assert list(dead.iterdir()) == [], "a partial copy was left on the full disk"
        assert record.segment.exists()
        free(mount)
        first = journal.set_aside(record, request, ".json")
        # the same record again (set aside once more at a later start): a second file, the first untouched
        second = journal.set_aside(record, b"{}", ".json")
        assert first != second and first.read_bytes() == request and second.read_bytes() == b"{}"
        assert journal.dead_letters() == 2
        journal.close()


def test_the_error_says_how_to_store_a_dead_letter_as_its_tenant_while_the_receiver_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store_path = tmp_path / "store.duckdb"
    journal = _recovered(journal_directory(store_path), [(_request(2), "acme")])
    (record,) = journal.recovered_records()
    with TraceStore(store_path) as store:
        writer = StoreWriter(store)
        journaled = JournaledWriter(writer, journal)
        with caplog.at_level(logging.ERROR, logger="tracegrade.ingest.journaled_writer"):
            journaled._set_aside(record, StoreError("out of memory"), journal_request)
        journal.close()
    (dead,) = dead_letter_directory(journal.directory).iterdir()
    assert dead.name == "1-0.tenant-acme.json"  # whose it is, long after the log is gone
    message = caplog.records[-1].getMessage()
    assert "of tenant 'acme'" in message, message
    assert f"`tracegrade import --store {store_path} --tenant acme {dead}` once the receiver is stopped" in message
    assert f"`tracegrade import --store {store_path} --token <a token of tenant acme> {dead}`" in message


def test_import_through_a_running_server_refuses_a_tenant_it_cannot_honour(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(f"tenants:\n  acme: [{ACME}]\n  ops: [{OPS}]\n")
    dead = tmp_path / "dead.json"
    dead.write_bytes(_request(3))
    store = tmp_path / "store.duckdb"
    with ServerProcess(store, extra_args=("--tokens", str(tokens))) as server:
        refused = run_cli("import", "--store", store, "--tenant", "acme", "--token", OPS, dead)
        assert refused.exit_code == 2, refused.output
        assert "--tenant acme does not apply through a server" in refused.output
        assert "Pass a token of tenant acme with --token and leave out --tenant" in refused.output
        assert query(server.http_url, "SELECT count(*) FROM spans", token=OPS) == [[0]]  # nothing filed as ops
        done = run_cli("import", "--store", store, "--token", ACME, dead)
        assert done.exit_code == 0, done.output
        assert query(server.http_url, "SELECT count(*) FROM spans", token=ACME) == [[1]]
