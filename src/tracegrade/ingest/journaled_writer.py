"""JournaledWriter: acknowledge exports once journaled, commit them to the store in large transactions.

Waiting for a DuckDB commit before every acknowledgement ties throughput to the exporters' concurrency
(a few requests in flight means a few small transactions in flight). Here an export is durable, and
acknowledged, once its payload is in the fsync'd :class:`~tracegrade.store.journal.RequestJournal`; its
decoded records then join the StoreWriter's queue, which commits whatever has gathered in one
transaction. A journal segment is deleted once its records are durable in the store: committed, or
checkpointed when the store writes no WAL of its own (the receiver's store does not: the journal is the
log, so each span is written to disk once as a record and once into the database file).

One thread (``tracegrade-journal``) appends: everything submitted while the previous fsync ran goes
into the next append, so one fsync covers many requests. Memory stays bounded by the store writer's
queue capacity, checked before a request is journaled (QueueFull -> the receiver's 503).

``recover`` replays the segments a crash left behind, before the receiver serves. ``wait_stored`` lets
a reader see everything acknowledged so far (the receiver's query endpoint calls it before each query).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from tracegrade.errors import StoreError
from tracegrade.models.span import LogRecordData, SpanRecord
from tracegrade.store.journal import JournalRecord, RequestJournal
from tracegrade.store.prepared import PreparedWrite, prepare_write
from tracegrade.store.results import WriteResult
from tracegrade.store.writer import StoreWriter

__all__ = ["JournaledWriter"]

log = logging.getLogger(__name__)

Decoded = tuple[Sequence[SpanRecord], Sequence[LogRecordData], str]  # a journal record's records and tenant
RECOVERY_WINDOW = 50_000  # records replayed ahead of their commits during recovery


@dataclass(slots=True)
class _Pending:
    prepared: PreparedWrite
    record: JournalRecord
    acknowledged: Future[None]


class JournaledWriter:
    """Journal, then queue for the store. ``on_stored`` gets each committed submission's WriteResult
    (called on the store writer's thread)."""

    def __init__(
        self,
        writer: StoreWriter,
        journal: RequestJournal,
        on_stored: Callable[[WriteResult], object] = lambda result: None,
    ) -> None:
        self.writer = writer
        self.journal = journal
        self._on_stored = on_stored
        self._pending: list[_Pending] = []
        self._pending_records = 0
        self._handed = 0  # submissions handed to the store writer (in order) ...
        self._settled = 0  # ... and how many of them it has committed or failed (the same order)
        self._cond = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="tracegrade-journal", daemon=True)

    # -- lifecycle --------------------------------------------------------------------------------------

    def recover(self, decode: Callable[[JournalRecord], Decoded]) -> int:
        """Write every record the journal holds from before this start; returns the records replayed.

        Call after ``writer.start()`` and before ``start()``. Records committed before the crash are
        stored once (the store skips what it has).
        """
        in_flight: deque[tuple[int, Future[WriteResult]]] = deque()
        waiting = replayed = 0
        for record in self.journal.recovered_records():
            try:
                spans, logs, tenant = decode((record.kind, record.payload))
            except Exception as exc:  # intact on disk, yet not a request this receiver can read
                log.error(
                    "request journal %s: the record at offset %d (kind %d, %d bytes) cannot be decoded and is "
                    "skipped: %s",
                    record.segment,
                    record.offset,
                    record.kind,
                    len(record.payload),
                    exc,
                )
                self.journal.keep_aside(record.segment, f"an undecodable record at offset {record.offset}")
                continue
            if not spans and not logs:
                continue
            prepared = prepare_write(spans, logs, tenant)
            in_flight.append((prepared.size, self.writer.submit_prepared(prepared)))
            waiting += prepared.size
            replayed += 1
            while waiting > RECOVERY_WINDOW:
                size, future = in_flight.popleft()
                future.result()
                waiting -= size
        for _, future in in_flight:
            future.result()  # a failure propagates: the segments stay for the next start
        if replayed and not self.writer.store.wal:
            self.writer.store.checkpoint()  # durable before the segments go
        self.journal.drop_recovered()
        if replayed:
            log.warning("replayed %d journaled export requests left by an unclean stop", replayed)
        return replayed

    def start(self) -> None:
        self._thread.start()

    def close(self, drain: bool = True, rebuild_seconds: float | None = None) -> None:
        """Journal what was submitted, stop the thread, close the store writer (committing everything
        queued when ``drain``; see ``StoreWriter.close``) and delete the journal segments that are
        fully committed."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join()
        self.writer.close(drain=drain, rebuild_seconds=rebuild_seconds)
        self.journal.close()

    # -- the export path --------------------------------------------------------------------------------

    def submit(self, prepared: PreparedWrite, record: JournalRecord) -> Future[None]:
        """Queue a decoded, prepared request and its journal record; the Future resolves once it is durable.

        Raises QueueFull when the store writer's queue has no room (nothing is journaled then) and
        StoreError when the writer is closing.
        """
        acknowledged: Future[None] = Future()
        with self._cond:
            if self._closing:
                raise StoreError("the receiver is closing; the request was not journaled")
            self.writer.check_room(prepared.size, self._pending_records)
            self._pending.append(_Pending(prepared, record, acknowledged))
            self._pending_records += prepared.size
            self._cond.notify_all()
        return acknowledged

    def free_records(self) -> int:
        """Records the store writer's queue can still take, beside those waiting to be journaled."""
        return self.writer.free_records(self._pending_records)

    def retry_after(self, records: int) -> float:
        """About how long until the queue has room for ``records`` more (see ``StoreWriter.retry_after``)."""
        return self.writer.retry_after(max(1, records - self.free_records()))

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    self._cond.wait()
                batch, self._pending = self._pending, []
            if not batch:
                return  # closing, and everything submitted is journaled
            self._journal(batch)

    def wait_stored(self, timeout: float) -> bool:
        """Wait until every submission acknowledged so far is committed (or failed); False on timeout."""
        with self._cond:
            target = self._handed
            return self._cond.wait_for(lambda: self._settled >= target, timeout)

    def _journal(self, batch: list[_Pending]) -> None:
        try:
            segment = self.journal.append([item.record for item in batch])
        except StoreError as exc:
            log.error("%s", exc)
            with self._cond:
                self._pending_records -= sum(item.prepared.size for item in batch)
            for item in batch:
                item.acknowledged.set_exception(exc)
            return
        for item in batch:
            try:
                stored = self.writer.submit_prepared(item.prepared, functools.partial(self.journal.release, segment, 1))
            except StoreError as exc:  # the writer closed under us: the record stays journaled
                item.acknowledged.set_exception(exc)
                continue
            finally:
                with self._cond:
                    self._pending_records -= item.prepared.size
            with self._cond:
                self._handed += 1
            stored.add_done_callback(self._committed)
            item.acknowledged.set_result(None)

    def _committed(self, stored: Future[WriteResult]) -> None:
        failed = stored.cancelled() or stored.exception() is not None
        if failed:  # left in the journal: replayed into the store at the next start
            log.error("journaled records could not be committed to the store: %s", stored.exception())
        else:
            self._on_stored(stored.result())
        with self._cond:
            self._settled += 1
            self._cond.notify_all()

    @property
    def stats(self) -> dict[str, Any]:
        """The writer's statistics plus the records waiting for the journal."""
        return {**self.writer.stats, "journal_pending": self._pending_records}
