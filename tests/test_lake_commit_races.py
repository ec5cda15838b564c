"""A lake receiver's commits losing races to another writer, for real: DuckLake's own retries turned off
(``ducklake_max_retry_count = 0``) and a second writer committing to the same tables all the while, so
the receiver's commits conflict. A commit that loses is tried again after a pause; one that loses every
attempt fails the store, and the receiver reopens it and replays its journal. Every span a real OTLP
exporter got acknowledged is stored once: never dropped, never stored (nor shown) twice."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import pg_cluster
from tests.support.export_load import ExportLoad, make_batches
from tests.support.lake_serve import lake_span_counts
from tests.support.pg_cluster import PgServer
from tests.support.server_inprocess import running_server
from tests.support.store_records import make_span
from tracegrade.store import lake, writer
from tracegrade.store.lake import LakeStore
from tracegrade.store.results import CommitConflict

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

_WAIT_SECONDS = 180.0  # bound on waiting for the races to happen on a busy machine (not a timing assertion)


class _RacingWriter(threading.Thread):
    """Another writer of the lake, committing one span at a time until stopped (pausing while ``paused()``);
    the spans it committed."""

    def __init__(self, location: str, data: Path, paused: Callable[[], bool]) -> None:
        super().__init__(daemon=True)
        self.store = LakeStore(location, data_path=data)
        self.paused = paused
        self.committed: list[tuple[str, str]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        number = 0
        while not self.halt.is_set():
            if self.paused():
                time.sleep(0.05)
                continue
            number += 1
            span = make_span(1_000_000 + number, number)
            try:
                self.store.write([span], [])
            except CommitConflict:  # it loses races too
                continue
            self.committed.append((span.trace_id, span.span_id))
        self.store.close()


def _settled(server: Any) -> bool:
    """The receiver is ready, and every request it acknowledged is committed to a store that has not failed."""
    storage = server._storage
    if storage is None or not server.readiness()[0]:
        return False
    return bool(storage.journaled.wait_stored(1.0)) and storage.failure is None and server.readiness()[0]


def test_commits_that_lose_races_are_retried_then_replayed_from_the_journal_never_dropped_nor_doubled(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    monkeypatch.setattr(lake, "MAX_RETRY_COUNT", 0)  # every race DuckLake loses reaches the receiver's writer
    monkeypatch.setattr(writer, "COMMIT_ATTEMPTS", 2)  # two lost races in a row fail the store: often enough here
    caplog.set_level(logging.WARNING, logger="tracegrade")
    location = f"ducklake:postgres:{pg_server.new_database()}"
    data = tmp_path / "lake-data"
    LakeStore(location, data_path=data).close()  # the lake exists before both writers open it
    loads: list[ExportLoad] = []
    settings = {"lake_data": data, "journal": tmp_path / "journal", "build_trajectories": False}
    with running_server(location, **settings) as receiver:
        # the racer pauses while the receiver reopens its store: with DuckLake's retries off, the replay of
        # the journal (one large commit) would otherwise lose to it again and again
        racer = _RacingWriter(location, data, paused=lambda: receiver.server.writer is None)
        try:
            racer.start()
            deadline = time.monotonic() + _WAIT_SECONDS
            # exports in rounds until a commit was retried after a lost race and the store failed and reopened
            while not (receiver.server.reopened and "lost a race with another writer" in caplog.text):
                assert time.monotonic() < deadline, f"no such races: reopened {receiver.server.reopened} times"
                exporter = OTLPSpanExporter(endpoint=f"{receiver.http_url}/v1/traces", timeout=120)
                load = ExportLoad(exporter, make_batches(20, 5), pause=0.05, resend=True)
                loads.append(load)
                load.start()
                load.join(max(0.0, deadline - time.monotonic()))
                assert not load.is_alive(), "the exporter never got its spans in"
            racer.halt.set()
            racer.join(_WAIT_SECONDS)
            # a store that failed on the racer's last commits is open again by itself, and has committed every
            # request acknowledged (a receiver stopped while reopening keeps what it acknowledged in its journal,
            # for its next start: not this test). A commit that was retrying when the racer stopped can still
            # fail the store after a first look found it ready, on a loaded machine: so look until all is settled.
            while not _settled(receiver.server):
                assert time.monotonic() < deadline + _WAIT_SECONDS, receiver.server.readiness()
                time.sleep(0.1)
        finally:
            racer.halt.set()
            for load in loads:
                load.stop()
    assert "lost 2 races in a row" in caplog.text  # the store failed on them (and was reopened, above)
    assert all(load.acked_batches == len(load.batches) for load in loads)
    acked = [ids for load in loads for ids in load.acked]
    stored = lake_span_counts(location, "raw.spans")  # every copy written, not the deduplicating view
    lost = [ids for ids in acked + racer.committed if ids not in stored]
    assert not lost, f"{len(lost)} of {len(acked) + len(racer.committed)} acknowledged spans lost, e.g. {lost[:3]}"
    doubled = [ids for ids, count in stored.items() if count != 1]
    assert not doubled, f"{len(doubled)} spans stored twice, e.g. {doubled[:3]}"
    assert set(lake_span_counts(location).values()) == {1}
