"""The request journal: records survive a reopen, a torn tail is cut off, committed segments are deleted,
a receiver started on a store with a leftover journal writes its records before it serves, and a store that
fails keeps every acknowledged request journaled, with one error for the writes it failed together."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from tests.support.server_inprocess import running_server
from tests.support.server_requests import count_spans, span_json, traces_json, traces_proto, unique_trace_id
from tests.support.store_records import make_span
from tracegrade.ingest.journaled_writer import JournaledWriter
from tracegrade.store.journal import RequestJournal
from tracegrade.store.prepared import prepare_write
from tracegrade.store.tenancy import DEFAULT_TENANT
from tracegrade.store.trace_store import TraceStore
from tracegrade.store.writer import StoreWriter


def _segments(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("*.tgj"))


def _records(journal: RequestJournal) -> list[tuple[int, bytes]]:
    return [(record.kind, record.payload) for record in journal.recovered_records()]


def test_records_survive_a_reopen_in_order(tmp_path: Path) -> None:
    journal = RequestJournal(tmp_path / "j")
    assert journal.append([(1, b"first"), (2, b"second")]) == 1
    assert journal.append([(3, b"")]) == 1
    # no close: as after a crash
    reopened = RequestJournal(tmp_path / "j")
    assert _records(reopened) == [(1, b"first"), (2, b"second"), (3, b"")]
    reopened.drop_recovered()
    assert _segments(tmp_path / "j") == []
    assert reopened.append([(1, b"next")]) == 2  # numbering continues past the recovered segments


def test_a_record_cut_short_by_a_crash_is_ignored_with_a_warning(tmp_path: Path, caplog) -> None:
    journal = RequestJournal(tmp_path / "j")
    journal.append([(1, b"whole record")])
    journal.append([(1, b"torn record that the crash cut")])
    segment = tmp_path / "j" / "1.tgj"
    segment.write_bytes(segment.read_bytes()[:-5])
    with caplog.at_level(logging.WARNING):
        assert _records(RequestJournal(tmp_path / "j")) == [(1, b"whole record")]
    assert "cut short by a crash" in caplog.text


def test_segments_rotate_and_are_deleted_once_every_record_is_committed(tmp_path: Path) -> None:
    journal = RequestJournal(tmp_path / "j", segment_bytes=100)
    first = journal.append([(1, b"x" * 120)])
    second = journal.append([(1, b"y" * 10), (1, b"z" * 10)])  # the first segment is full: a new one
    assert (first, second) == (1, 2)
    assert _segments(tmp_path / "j") == ["1.tgj", "2.tgj"]
    journal.release(first, 1)
    assert _segments(tmp_path / "j") == ["2.tgj"]
    journal.release(second, 1)
    assert _segments(tmp_path / "j") == ["2.tgj"]  # one record of it still uncommitted
    journal.release(second, 1)
    assert _segments(tmp_path / "j") == ["2.tgj"]  # the active segment stays open ...
    journal.close()
    assert _segments(tmp_path / "j") == []  # ... until close


def test_close_keeps_a_segment_with_uncommitted_records(tmp_path: Path) -> None:
    journal = RequestJournal(tmp_path / "j")
    journal.append([(1, b"never committed")])
    journal.close()
    assert _records(RequestJournal(tmp_path / "j")) == [(1, b"never committed")]


def test_the_receiver_replays_a_leftover_journal_before_serving(tmp_path: Path) -> None:
    store = tmp_path / "store.duckdb"
    proto_trace, json_trace = unique_trace_id(), unique_trace_id()
    journal = RequestJournal(Path(f"{store}.journal"))
    journal.append(
        [
            (1, traces_proto([span_json(proto_trace, i) for i in range(3)])),
            (2, json.dumps(traces_json([span_json(json_trace, i) for i in range(2)])).encode()),
        ]
    )
    del journal  # left behind, as by a receiver killed before committing
    with running_server(store) as server:
        assert count_spans(server.http_url, proto_trace) == 3
        assert count_spans(server.http_url, json_trace) == 2
        assert _segments(Path(f"{store}.journal")) == []


def test_a_failed_store_logs_one_error_for_the_writes_it_failed_together_and_keeps_them_journaled(
    tmp_path: Path, caplog
) -> None:
    store = TraceStore(tmp_path / "store.duckdb")
    writer = StoreWriter(store)
    writer.start()
    journaled = JournaledWriter(writer, RequestJournal(tmp_path / "journal"))
    journaled.start()
    try:
        with caplog.at_level(logging.ERROR, logger="tracegrade.ingest.journaled_writer"):
            with store._write_lock:  # the writer thread blocks in its first transaction meanwhile
                acknowledged = []
                for n in range(6):
                    prepared = prepare_write([make_span(n + 1, 1)], [], DEFAULT_TENANT)
                    acknowledged.append(journaled.submit(prepared, (1, f"request {n}".encode())))
                for future in acknowledged:
                    future.result(30)  # journaled, so acknowledged, though not yet committed
                store.mark_failed("the disk is full")  # as a failed checkpoint marks it: the queued writes fail
            assert journaled.wait_stored(30)
        errors = [r.getMessage() for r in caplog.records if "could not be committed" in r.getMessage()]
        assert len(errors) == 1, errors
        assert "the disk is full" in errors[0] and "replayed when it is reopened" in errors[0]
    finally:
        journaled.close(drain=False)
        store.close()
    assert [payload for _, payload in _records(RequestJournal(tmp_path / "journal"))] == [
        f"request {n}".encode() for n in range(6)
    ]
