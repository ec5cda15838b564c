"""A journaled request the store refuses for a reason of its own must not block the receiver for good.

The poison here is real: a 48 MB request (16 MB is the default largest; a receiver started with a larger
``--max-request-bytes`` acknowledges it once journaled) runs DuckDB out of memory under the default store
memory limit each time it is written, alone or not. Before, the journal replay failed on it at every start
(and every reopen), so the receiver never served again. Now it is set aside in ``<store>.journal.dead/``,
intact, and ``tracegrade import`` stores it once the cause is gone; a failure of the store itself (a full
disk) is still retried and sets nothing aside.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.support.server_process import ServerProcess
from tests.support.server_requests import query, span_json, traces_json
from tests.support.small_fs import fill, free, small_filesystem
from tracegrade.ingest.intake import RECORD_KINDS, journal_record
from tracegrade.ingest.otlp_responses import Signal, WireFormat
from tracegrade.store.journal import RequestJournal, dead_letter_directory, journal_directory

pytestmark = pytest.mark.slow

_CLI = "from tracegrade.cli.main import main; main()"
_JSON_TRACES = RECORD_KINDS[(Signal.TRACES, WireFormat.JSON)]


def _request(trace: int, spans: int, attribute_bytes: int = 10) -> bytes:
    trace_id = f"{trace:032x}"
    big = [{"key": "payload", "value": {"stringValue": "x" * attribute_bytes}}]
    return json.dumps(traces_json([span_json(trace_id, i, attributes=big) for i in range(spans)])).encode()


def _span_ids(request: bytes) -> set[tuple[str, str]]:
    spans = json.loads(request)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    return {(span["traceId"], span["spanId"]) for span in spans}


def _journal(store: Path, requests: list[bytes]) -> None:
    """What a receiver killed after acknowledging ``requests`` leaves behind: one segment holding them."""
    journal = RequestJournal(journal_directory(store))
    journal.append([journal_record(_JSON_TRACES, request, "default") for request in requests])
    journal.close()  # its records are not stored: the segment stays


def _stored(http_url: str) -> set[tuple[str, str]]:
    return {(row[0], row[1]) for row in query(http_url, "SELECT trace_id, span_id FROM spans")}


def test_a_journaled_request_the_store_refuses_is_set_aside_intact_and_the_receiver_serves(tmp_path: Path) -> None:
    store = tmp_path / "store.duckdb"
    before, poison, after = _request(1, 50), _request(2, 48, attribute_bytes=1_000_000), _request(3, 50)
    _journal(store, [before, poison, after])
    server = ServerProcess(store)
    server.log_path = tmp_path / "serve.log"
    with server:  # it starts and serves: the poison no longer fails the replay
        assert _stored(server.http_url) == _span_ids(before) | _span_ids(after)  # span by span, nothing else
        with urllib.request.urlopen(f"{server.http_url}/metrics", timeout=10) as response:
            metrics = response.read().decode()
        assert "tracegrade_store_journal_dead_letters 1" in metrics.splitlines(), metrics
    dead = sorted(dead_letter_directory(journal_directory(store)).iterdir())
    assert [path.suffix for path in dead] == [".json"], dead
    assert dead[0].read_bytes() == poison  # the request as its exporter sent it
    assert not list(journal_directory(store).glob("*.tgj")), "the replayed segment should be gone"
    log = server.log_path.read_text()
    assert f"set aside in {dead[0]}" in log and "ran out of memory" in log, log
    assert f"tracegrade import --store {store} {dead[0]}" in log, log
    # the command the log gives stores it (outside the receiver, DuckDB's default memory limit is ample)
    imported = subprocess.run(
        [sys.executable, "-c", _CLI, "import", "--store", str(store), str(dead[0])],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert imported.returncode == 0, imported.stdout + imported.stderr
    with ServerProcess(store) as again:
        assert _stored(again.http_url) == _span_ids(before) | _span_ids(poison) | _span_ids(after)


def test_a_store_that_fails_during_the_replay_is_retried_and_sets_nothing_aside(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "fs", "24m") as mount:
        store = mount / "store.duckdb"
        ServerProcess(store).start().terminate()  # an empty store, created while there is room
        requests = [_request(trace, 200, attribute_bytes=2000) for trace in range(1, 11)]
        _journal(store, requests)
        fill(mount)  # the replay's checkpoint cannot be written
        refused = ServerProcess(store)
        refused.log_path = tmp_path / "refused.log"
        with pytest.raises(RuntimeError, match="No space left on device"):
            refused.start()
        assert not dead_letter_directory(journal_directory(store)).exists()
        assert list(journal_directory(store).glob("*.tgj")), "the journal must keep what the store did not take"
        free(mount)
        server = ServerProcess(store)
        server.log_path = tmp_path / "serve.log"
        with server:
            assert _stored(server.http_url) == set().union(*map(_span_ids, requests))
        assert not dead_letter_directory(journal_directory(store)).exists()


def test_a_dead_letter_holds_the_request_as_sent_with_its_tenant_and_the_suffix_import_reads() -> None:
    from tracegrade.ingest.intake import journal_request

    request = _request(4, 2)
    assert journal_request(journal_record(_JSON_TRACES, request, "acme")) == (request, ".json", "acme")
    protobuf = RECORD_KINDS[(Signal.TRACES, WireFormat.PROTOBUF)]
    assert journal_request(journal_record(protobuf, b"\n\x00", "default")) == (b"\n\x00", ".pb", "default")
