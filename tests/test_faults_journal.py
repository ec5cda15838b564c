"""Faults in the request journal: a full disk mid-append, damaged bytes, a flipped header, undecodable
records, stray files. Each is made for real (a small tmpfs, bytes changed on disk) and checked record by
record, then a real ``tracegrade serve`` is started on a damaged journal: it must start, store every
intact request and say exactly what it skipped."""

from __future__ import annotations

import json
import logging
import struct
import zlib
from pathlib import Path

import pytest

from tests.support.server_process import ServerProcess
from tests.support.server_requests import query, span_json, traces_json, unique_trace_id
from tests.support.small_fs import fill, free, small_filesystem
from tracegrade.errors import StoreError
from tracegrade.store.journal import RequestJournal, encode_record

RECORD = 10_000  # bytes of payload per record in the disk-full test


def _records(journal: RequestJournal) -> list[tuple[int, bytes]]:
    return [(record.kind, record.payload) for record in journal.recovered_records()]


def test_a_full_disk_mid_append_leaves_no_partial_record_and_later_appends_are_recovered(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "fs", "1m") as mount:
        journal = RequestJournal(mount / "journal")
        appended: list[bytes] = []
        refused = 0
        fill(mount, leave=5 * RECORD // 2)  # room for about two records
        for index in range(12):
            payload = f"{index:04d}".encode() * (RECORD // 4)
            try:
                journal.append([(1, payload)])
            except StoreError as exc:
                assert "No space left on device" in str(exc)
                refused += 1
            else:
                appended.append(payload)
        assert refused > 0 and appended, (refused, len(appended))
        free(mount)  # the disk has room again: appends work without a restart
        for index in range(12, 15):
            payload = f"{index:04d}".encode() * (RECORD // 4)
            journal.append([(1, payload)])
            appended.append(payload)
        # no close: as after a crash
        reopened = RequestJournal(mount / "journal")
        assert _records(reopened) == [(1, payload) for payload in appended]
        reopened.drop_recovered()
        assert list((mount / "journal").iterdir()) == []  # nothing was damaged, nothing kept aside


def test_damage_in_the_middle_is_skipped_and_every_later_record_recovered(tmp_path: Path, caplog) -> None:
    journal = RequestJournal(tmp_path / "j")
    journal.append([(1, b"good"), (1, b"flipped"), (1, b"after"), (2, b"last")])
    segment = tmp_path / "j" / "1.tgj"
    data = bytearray(segment.read_bytes())
    damaged_at = data.index(b"flipped")
    data[damaged_at] ^= 0xFF
    segment.write_bytes(bytes(data))
    reopened = RequestJournal(tmp_path / "j")
    with caplog.at_level(logging.WARNING):
        assert _records(reopened) == [(1, b"good"), (1, b"after"), (2, b"last")]
    record_start = damaged_at - 13  # the damaged record's header
    assert f"{segment}: 20 damaged bytes at offset {record_start} skipped" in caplog.text
    assert "may hold acknowledged spans that are now lost" in caplog.text
    reopened.drop_recovered()
    assert sorted(p.name for p in (tmp_path / "j").iterdir()) == ["1.tgj.damaged"]


def test_a_flipped_record_kind_is_caught_by_the_checksum(tmp_path: Path, caplog) -> None:
    journal = RequestJournal(tmp_path / "j")
    journal.append([(1, b"first"), (2, b"second"), (3, b"third")])
    segment = tmp_path / "j" / "1.tgj"
    data = bytearray(segment.read_bytes())
    second = data.index(b"second") - 13
    data[second + 8] = 0x7F  # the kind byte: 2 becomes 127
    segment.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        assert _records(RequestJournal(tmp_path / "j")) == [(1, b"first"), (3, b"third")]
    assert f"damaged bytes at offset {second}" in caplog.text


def test_segments_of_the_first_format_are_still_read(tmp_path: Path) -> None:
    (tmp_path / "j").mkdir()
    legacy = b"".join(
        struct.pack("<4sIIB", b"TGJ1", len(payload), zlib.crc32(payload), kind) + payload
        for kind, payload in [(1, b"old one"), (4, b"old two")]
    )
    (tmp_path / "j" / "3.tgj").write_bytes(legacy)
    journal = RequestJournal(tmp_path / "j")
    assert _records(journal) == [(1, b"old one"), (4, b"old two")]
    assert journal.append([(1, b"new")]) == 4


def test_files_that_are_not_segments_are_ignored_with_a_warning(tmp_path: Path, caplog) -> None:
    directory = tmp_path / "j"
    directory.mkdir()
    (directory / "1.tgj").write_bytes(encode_record(1, b"real"))
    (directory / "notes.txt").write_text("an operator's note")
    (directory / "backup.tgj").write_bytes(b"not numbered")
    (directory / "2.tgj").mkdir()
    with caplog.at_level(logging.WARNING):
        journal = RequestJournal(directory)
        assert _records(journal) == [(1, b"real")]
    for name in ("notes.txt", "backup.tgj", "2.tgj"):
        assert f"ignoring {name}, which is not a journal segment" in caplog.text
    assert journal.append([(1, b"next")]) == 3  # numbering goes past the directory called 2.tgj


def _request(trace_id: str, spans: int) -> bytes:
    return json.dumps(traces_json([span_json(trace_id, index) for index in range(spans)])).encode()


@pytest.mark.slow
def test_serve_starts_on_a_damaged_journal_and_stores_every_intact_request(tmp_path: Path) -> None:
    """A crash left a journal with an intact request, a damaged one, one whose kind byte flipped, one
    that is intact but undecodable, one of an unknown kind and a stray file: ``serve`` must start (not
    hang), store the intact requests and name each skipped record."""
    store = tmp_path / "store.duckdb"
    intact = [unique_trace_id() for _ in range(3)]
    lost = [unique_trace_id(), unique_trace_id()]
    directory = Path(f"{store}.journal")
    directory.mkdir()
    damaged = bytearray(encode_record(2, _request(lost[0], 3)))
    damaged[40] ^= 0x55  # inside the payload
    flipped = bytearray(encode_record(2, _request(lost[1], 3)))
    flipped[8] = 9  # the kind byte
    segment = (
        encode_record(2, _request(intact[0], 4))
        + bytes(damaged)
        + bytes(flipped)
        + encode_record(1, b"\xff\xfe not a protobuf request")
        + encode_record(42, b"a kind this receiver does not know")
        + encode_record(2, _request(intact[1], 5))
    )
    (directory / "1.tgj").write_bytes(segment)
    (directory / "2.tgj").write_bytes(encode_record(2, _request(intact[2], 6)))
    (directory / "README").write_text("left by an operator")

    with ServerProcess(store) as server:  # start() fails the test if serve does not become ready
        counts = dict(query(server.http_url, "SELECT trace_id, count(*) FROM spans GROUP BY trace_id"))
        assert counts == {intact[0]: 4, intact[1]: 5, intact[2]: 6}
        log = server.log()
    assert "ignoring README, which is not a journal segment" in log
    assert "damaged bytes at offset" in log and "may hold acknowledged spans that are now lost" in log
    assert "cannot be decoded and is skipped" in log and "unknown journal record kind 42" in log
    assert sorted(p.name for p in directory.iterdir()) == ["1.tgj.damaged", "README"]
