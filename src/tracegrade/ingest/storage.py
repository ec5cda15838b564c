"""Storage: the write path of one receiver on one open store, opened at start and again after a failure.

Store (``open_store``: a DuckDB file or a lake) -> StoreWriter -> JournaledWriter (and an in-process grading
worker and a retention keeper, if configured), opened in that order and closed in reverse. ``Storage.open``
replays the request journal before it returns, so a Storage that exists holds every request acknowledged
before it: after a crash at start-up, and after the store failed under a running receiver (DuckDB invalidates a database
whose write or checkpoint failed: a full disk, an I/O error, memory exhausted mid-write; a lake's catalog
or data path out of reach; a lake commit that kept losing races). The receiver then closes the failed
Storage and opens a new one on the same store and journal (``ReceiverServer`` does this by itself).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracegrade.ingest.journaled_writer import Decoded, JournaledWriter
from tracegrade.ingest.retention_keeper import RetentionKeeper
from tracegrade.ingest.settings import ServeSettings, duckdb_size_bytes
from tracegrade.store.journal import JournalRecord, RequestJournal
from tracegrade.store.results import WriteResult
from tracegrade.store.trace_deletion import Deleted

if TYPE_CHECKING:
    from tracegrade.evaluation.worker_metrics import WorkerMetrics
    from tracegrade.ingest.disk_room import DiskRoom
    from tracegrade.ingest.inprocess_worker import InProcessWorker
    from tracegrade.store.backend import StoreBackend
    from tracegrade.store.writer import StoreWriter

__all__ = ["Storage", "StorageHooks"]

log = logging.getLogger(__name__)


def _journal_request(record: JournalRecord) -> tuple[bytes, str, str]:
    from tracegrade.ingest.intake import journal_request  # the receiver's journal record format

    return journal_request(record)


@dataclass(frozen=True)
class StorageHooks:
    """What the receiver wants to hear from its storage (called on the store writer's thread)."""

    on_dequeued: Callable[[], None]  # the writer took records from its queue: room for waiting requests
    on_stored: Callable[[WriteResult], object]  # a submission is committed (what it returns is ignored)
    decode: Callable[[JournalRecord], Decoded]  # a journal record's spans, log records and tenant
    on_expired: Callable[[Deleted], object] = lambda expired: None  # a retention pass deleted something
    # a record's request, file suffix and tenant, as a dead letter holds it (see JournaledWriter.recover)
    request_of: Callable[[JournalRecord], tuple[bytes, str, str]] = _journal_request


class Storage:
    """An open store with its writer, journal and (optional) worker; see ``open``."""

    def __init__(
        self, journaled: JournaledWriter, worker: InProcessWorker | None, retention: RetentionKeeper | None = None
    ) -> None:
        self.journaled = journaled
        self.worker = worker
        self.retention = retention

    @property
    def store(self) -> StoreBackend:
        return self.journaled.writer.store

    @property
    def writer(self) -> StoreWriter:
        return self.journaled.writer

    @property
    def failure(self) -> str | None:
        """Why the store accepts no more writes (it must be reopened), or None."""
        return self.store.failure

    @classmethod
    def open(
        cls,
        settings: ServeSettings,
        hooks: StorageHooks,
        worker_metrics: WorkerMetrics | None = None,
        disk_room: DiskRoom | None = None,
        worker_id: str | None = None,
    ) -> Storage:
        """Open the store, start its writer, replay the journal (setting aside, as dead letters, records the
        store refuses while it takes the others), start journaling and the worker (counting in
        ``worker_metrics``, those of the storage this one replaces, if given; named ``worker_id``, that storage's
        worker's, whose leases it hands back); the worker and the trajectory rebuilder write nothing while
        ``disk_room`` says the disk lacks room. Raises StoreError."""
        from tracegrade.store.backend import open_store
        from tracegrade.store.mapping_process import MappingProcess
        from tracegrade.store.writer import StoreWriter

        store = open_store(
            settings.store,
            data_path=settings.lake_data,
            memory_limit=settings.store_memory_limit,
            query_memory_limit=settings.query_memory_limit,
            journaled=True,  # the request journal is the store's log: a DuckDB file writes no WAL of its own
        )
        try:
            writer = StoreWriter(
                store,
                max_queue_spans=settings.queue_spans,
                # the whole queue may go into one transaction (spans stop at the row group's end anyway)
                max_batch_spans=settings.queue_spans,
                # a checkpoint needs about as much memory again as it writes: a quarter of the limit each
                checkpoint_bytes=duckdb_size_bytes(settings.store_memory_limit) // 4,
                # no mapping child unless asked for: it adds a process's memory while a backlog keeps it running
                mapping=MappingProcess() if settings.mapping_process else MappingProcess(in_process_spans=None),
                max_rebuild_bytes=settings.mapping_batch_bytes,
                on_dequeued=hooks.on_dequeued,
                build=settings.build_trajectories,
                # builds are writes too: after a full disk they wait for room, as the worker's do
                build_hold=disk_room.shortage if disk_room is not None else None,
            )
        except BaseException:
            store.close()
            raise
        writer.start()
        journaled = JournaledWriter(writer, RequestJournal(settings.journal_path), on_stored=hooks.on_stored)
        try:
            journaled.recover(hooks.decode, hooks.request_of)
        except BaseException:
            journaled.close(drain=False)
            raise
        journaled.start()
        worker = None
        if settings.worker_rules is not None:
            # imported here: most receivers grade nothing, and the grading stack slows every start-up
            from tracegrade.ingest.inprocess_worker import start_inprocess_worker

            hold = disk_room.shortage if disk_room is not None else None
            worker = start_inprocess_worker(writer, settings.worker_rules, worker_metrics, hold, worker_id)
        retention = None
        policy = settings.retention()
        if policy is not None:
            retention = RetentionKeeper(store, policy, hooks.on_expired).start()
        return cls(journaled, worker, retention)

    def close(self, *, drain: bool = True, rebuild_seconds: float | None = None) -> None:
        """Stop the retention keeper and the worker, then the writer (committing what is queued when ``drain``),
        then the store.

        With ``drain=False`` (a failed store) queued records are not written; they stay in the journal,
        which the next ``open`` replays.
        """
        if self.retention is not None:  # finishes the batch in hand before the store closes
            self.retention.stop()
        if self.worker is not None:  # finishes the job in hand before the store closes
            self.worker.stop()
        self.journaled.close(drain=drain, rebuild_seconds=rebuild_seconds)
