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

``recover`` replays the segments a crash left behind, before the receiver serves; a record the store
keeps refusing while it takes the others is set aside as a dead letter rather than block every start.
``wait_stored`` lets a reader see everything acknowledged so far (the receiver's query endpoint calls it
before each query).
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
from tracegrade.store.journal import JournalRecord, RecoveredRecord, RequestJournal
from tracegrade.store.prepared import PreparedWrite, prepare_write
from tracegrade.store.results import WriteResult
from tracegrade.store.tenancy import DEFAULT_TENANT
from tracegrade.store.writer import StoreWriter

__all__ = ["JournaledWriter"]

log = logging.getLogger(__name__)

Decoded = tuple[Sequence[SpanRecord], Sequence[LogRecordData], str]  # a journal record's records and tenant
RequestOf = Callable[[JournalRecord], tuple[bytes, str, str]]  # a record's request, file suffix and tenant
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
        self._last_failure: str | None = None  # the commit failure logged last, until a commit succeeds
        self._cond = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="tracegrade-journal", daemon=True)

    # -- lifecycle --------------------------------------------------------------------------------------

    def recover(self, decode: Callable[[JournalRecord], Decoded], request_of: RequestOf | None = None) -> int:
        """Write every record the journal holds from before this start; returns the records replayed.

        Call after ``writer.start()`` and before ``start()``. Records committed before the crash are
        stored once (the store skips what it has). A failure of the store itself (it failed: a full disk, a
        broken file) raises StoreError and deletes nothing: the next attempt replays it all again. A record
        whose write fails while the store stays healthy is tried once more, alone, once every other record is
        written and checkpointed; if it fails again it is the record's fault (a request too large for the
        store's memory, a value DuckDB refuses), and rather than block every start it is set aside as a dead
        letter (``request_of`` gives the form it is written in: the request and its file suffix and tenant; by
        default the journal record's payload as it is) and the replay goes on.
        """
        in_flight: deque[tuple[RecoveredRecord, PreparedWrite, Future[WriteResult]]] = deque()
        failed: list[tuple[RecoveredRecord, PreparedWrite]] = []
        waiting = replayed = set_aside = 0
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
            try:
                prepared = prepare_write(spans, logs, tenant)
            except (StoreError, ValueError, TypeError, OverflowError) as exc:  # its records, not the store
                self._set_aside(record, exc, request_of)
                set_aside += 1
                continue
            in_flight.append((record, prepared, self.writer.submit_prepared(prepared, replay=True)))
            waiting += prepared.size
            replayed += 1
            while waiting > RECOVERY_WINDOW:
                waiting -= self._settle(*in_flight.popleft(), failed)
        while in_flight:
            self._settle(*in_flight.popleft(), failed)
        if replayed and not self.writer.store.wal:
            self.writer.store.checkpoint()  # durable before the segments go (and memory freed for a retry)
        for record, prepared in failed:
            try:
                self.writer.submit_prepared(prepared, replay=True).result()
            except Exception as exc:
                self._refuse_store_failure(exc)
                if not self.writer.store.wal:
                    self.writer.store.checkpoint()  # the store still writes: the failure is the record's
                self._set_aside(record, exc, request_of)
                set_aside += 1
            else:
                if not self.writer.store.wal:
                    self.writer.store.checkpoint()
        self.journal.drop_recovered()
        if replayed:
            aside = f"; {set_aside} set aside as dead letters (see the errors above)" if set_aside else ""
            log.warning(
                "replayed %d journaled export requests (left by an unclean stop, or by a store that failed)%s",
                replayed,
                aside,
            )
        return replayed

    def _settle(
        self,
        record: RecoveredRecord,
        prepared: PreparedWrite,
        future: Future[WriteResult],
        failed: list[tuple[RecoveredRecord, PreparedWrite]],
    ) -> int:
        """Wait for a replayed record's write; a failure of the store raises, the record's own is noted in
        ``failed`` (to be tried again alone). Returns the record's size."""
        try:
            future.result()
        except Exception as exc:
            self._refuse_store_failure(exc)
            failed.append((record, prepared))
        return prepared.size

    def _refuse_store_failure(self, exc: Exception) -> None:
        """Raise ``exc`` when the store failed (it must be reopened; the replay is retried from the start)."""
        if self.writer.store.failure is not None or not isinstance(exc, StoreError):
            raise exc

    def _set_aside(self, record: RecoveredRecord, exc: Exception, request_of: RequestOf | None) -> None:
        """Write a record the store refuses to the dead-letter directory and say where, why and how to retry."""
        data, suffix, tenant = (
            request_of((record.kind, record.payload)) if request_of else (record.payload, ".bin", DEFAULT_TENANT)
        )
        # another tenant's request says whose it is in its name too: the ERROR below may be long gone when someone
        # comes to import it, and imported without --tenant it would be filed as the default tenant's
        named = f".tenant-{tenant}{suffix}" if tenant != DEFAULT_TENANT else suffix
        path = self.journal.set_aside(record, data, named)
        store = self.writer.store.path
        as_tenant = f" --tenant {tenant}" if tenant != DEFAULT_TENANT else ""
        # while the receiver runs an import goes through it, and its token, not --tenant, decides the tenant
        log.error(
            "request journal %s: the export request at offset %d (%d bytes) of tenant %r could not be written to "
            "the store although the store took every other record, so it was set aside in %s and the receiver "
            "went on: %s. Remove the cause (e.g. a larger --store-memory-limit for a request that ran out of "
            "memory), then store it with `tracegrade import --store %s%s %s` once the receiver is stopped, or "
            "while it runs with `tracegrade import --store %s --token <a token of tenant %s> %s`",
            record.segment,
            record.offset,
            len(data),
            tenant,
            path,
            str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
            store,
            as_tenant,
            path,
            store,
            tenant,
            path,
        )

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
        if not failed:
            self._on_stored(stored.result())
        with self._cond:
            self._settled += 1
            self._cond.notify_all()
            # a store that fails fails every write queued behind it at once: one line per failure, not per write
            failure = None if not failed else "cancelled" if stored.cancelled() else str(stored.exception())
            repeated, self._last_failure = failure == self._last_failure, failure
        if failed and not repeated:
            log.error(
                "journaled records could not be committed to the store (they stay in the journal and are replayed "
                "when it is reopened or at the next start): %s",
                failure,
            )

    @property
    def stats(self) -> dict[str, Any]:
        """The writer's statistics plus the records waiting for the journal."""
        return {
            **self.writer.stats,
            "journal_pending": self._pending_records,
            "journal_dead_letters": self.journal.dead_letters(),  # set aside, waiting for an import
        }
