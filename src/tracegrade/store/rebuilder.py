"""The trajectory rebuilder: the one owner of when and how traces are mapped into trajectory rows.

It claims settled traces from its store's build queue (``store.builds``: marked by the store's own
writes), reads their spans and logs back, a tenant's traces at a time, as Arrow tables (DuckDB works
without the GIL), has them mapped (``MappingProcess``: large jobs in a child process when asked for) and
replaces their rows in one transaction, so a long rebuild never delays a write. A claim's traces are mapped and
replaced in batches of at most ``max_bytes`` of spans (``mapping_batches``: a trace larger than that alone), so
the records the mapping holds at once do not grow with the traces' size. Claims run one at a time
in one thread, so in one process a trace's newer rows always replace its older ones; across processes (a
lake) the queue's claims order them.

Ingestion comes first: while the writer is behind (``behind()``), a claim is made only when none was
made for ``REBUILD_MIN_INTERVAL``, or for ``REBUILD_SATURATED_INTERVAL`` while the machine's processors
have no idle time either (``CpuLoad``: other receivers on the machine build too, each paced by its own
backlog), so trajectories still advance under a sustained burst and keep up freely otherwise
(bench/RESULTS.md, bench_ingest and lake ingest). ``rebuild_traces`` runs the same jobs, in the same
chunks, synchronously: ``tracegrade import``, ``tracegrade rebuild`` (in the receiver too, ``POST /v1/rebuild``)
and ``TraceStore.rebuild_trajectories`` use it. In one process the builds of one store take turns, a claim at a
time (``build_turn``): a rebuild asked of a receiver runs beside its rebuilder thread.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracegrade.errors import StoreError
from tracegrade.store.build_queue import BuildClaim
from tracegrade.store.cpu_load import CpuLoad
from tracegrade.store.mapping_batches import (
    DEFAULT_MAPPING_BATCH_BYTES,
    MappingBatch,
    batch_tables,
    span_bytes,
    split_by_bytes,
)
from tracegrade.store.mapping_process import MappingProcess
from tracegrade.store.tenancy import TraceKey, by_tenant

if TYPE_CHECKING:
    from tracegrade.store.backend import StoreBackend

__all__ = [
    "REBUILD_MIN_INTERVAL",
    "REBUILD_SATURATED_INTERVAL",
    "RebuildStats",
    "TrajectoryRebuilder",
    "build_turn",
    "rebuild_traces",
]

REBUILD_MIN_INTERVAL = 2.0
REBUILD_SATURATED_INTERVAL = 10.0
IDLE_POLL_SECONDS = 1.0  # longest wait between claims when the queue knows of nothing due (a shared queue)

log = logging.getLogger(__name__)

_turns: weakref.WeakKeyDictionary[StoreBackend, threading.Lock] = weakref.WeakKeyDictionary()
_turns_lock = threading.Lock()


def build_turn(store: StoreBackend) -> threading.Lock:
    """The lock a claim on ``store`` is built under, from its claim to its finish: a trace's rows are replaced by
    one build at a time (``replace_trajectories`` finds the rows to clear before its transaction), and a trace
    claimed again meanwhile, for newer spans, is built after the build under way, so its newer rows come last."""
    with _turns_lock:
        turn = _turns.get(store)
        if turn is None:
            turn = _turns[store] = threading.Lock()
        return turn


@dataclass(slots=True)
class RebuildStats:
    traces_rebuilt: int = 0
    rebuild_batches: int = 0
    rebuild_errors: int = 0
    seconds_per_trace: float = 0.0
    mapping_batches: int = 0  # batches loaded and mapped at once (a claim is one or more)
    mapping_batch_bytes_max: int = 0  # stored span bytes of the largest batch of several traces
    mapping_traces_over_budget: int = 0  # traces over the byte budget by themselves, each mapped alone

    def count_batches(self, batches: list[MappingBatch], budget: int) -> None:
        self.mapping_batches += len(batches)
        for batch in batches:
            if len(batch.trace_ids) > 1:
                self.mapping_batch_bytes_max = max(self.mapping_batch_bytes_max, batch.span_bytes)
            elif batch.span_bytes > budget:
                self.mapping_traces_over_budget += 1


def _run_claim(
    store: StoreBackend, mapping: MappingProcess, claim: BuildClaim, max_bytes: int
) -> tuple[int, list[MappingBatch]]:
    """Map a claim's traces and replace their rows, a tenant at a time (a tenant's spans never reach
    another tenant's trajectory) and at most ``max_bytes`` of spans at a time (a larger trace alone); how many
    traces had spans, and the batches mapped. Raises on failure (the batches replaced before it are mapped again
    with the rest of the claim)."""
    mapped = 0
    batches: list[MappingBatch] = []
    for tenant, trace_ids in by_tenant(claim.keys).items():
        spans, logs = store.load_arrow(trace_ids, tenant)
        sizes = span_bytes(spans)
        mapped += len(sizes)
        split = split_by_bytes(trace_ids, sizes, max_bytes)
        for batch in split:
            whole = len(split) == 1
            tables = mapping.map(batch_tables(spans, batch, whole), batch_tables(logs, batch, whole), claim.updated_at)
            store.replace_trajectories(tables, clear=batch.trace_ids, tenant=tenant)
            batches.append(batch)
    return mapped, batches


def rebuild_traces(
    store: StoreBackend,
    keys: Iterable[TraceKey],
    *,
    mapping: MappingProcess | None = None,
    max_bytes: int = DEFAULT_MAPPING_BATCH_BYTES,
    stats: RebuildStats | None = None,
) -> int:
    """Map those traces now, ``store.rebuild_traces`` at a time (in batches of at most ``max_bytes`` of stored
    spans, counted in ``stats`` when given), through the store's build queue; how many had spans.

    A trace with no stored spans loses any trajectory rows it had. A command runs this beside receivers that keep
    building their traces, so its replacements are exclusive (``store.replacing_exclusively``).
    """
    wanted = list(dict.fromkeys(keys))
    mapper = mapping or MappingProcess(in_process_spans=None)
    mapped = 0
    chunk = store.rebuild_traces
    with store.replacing_exclusively():
        for start in range(0, len(wanted), chunk):
            with build_turn(store):
                claim = store.builds.claim_traces(wanted[start : start + chunk])
                try:
                    with_spans, batches = _run_claim(store, mapper, claim, max_bytes)
                except BaseException:
                    store.builds.finish(claim, built=False)
                    raise
                store.builds.finish(claim, built=True)
            mapped += with_spans
            if stats is not None:
                stats.count_batches(batches, max_bytes)
    return mapped


class TrajectoryRebuilder:
    """One thread building what ``store.builds`` has due, ``max_traces`` per claim (default: the store's
    ``rebuild_traces``), mapped ``max_bytes`` of stored spans at a time.

    ``behind`` says the writer has a backlog (claims are then spaced); ``cpu_load`` tells whether the
    machine's processors are saturated (claims are then spaced further); ``write_hold`` says why no build may be
    written now (a receiver's store that failed for a full disk: ``ingest.disk_room``), or None.
    """

    def __init__(
        self,
        store: StoreBackend,
        *,
        mapping: MappingProcess | None = None,
        max_traces: int | None = None,
        max_bytes: int = DEFAULT_MAPPING_BATCH_BYTES,
        behind: Callable[[], bool] = lambda: False,
        cpu_load: CpuLoad | None = None,
        write_hold: Callable[[], str | None] | None = None,
    ) -> None:
        self.store = store
        self._write_hold = write_hold
        self.max_traces = max_traces or store.rebuild_traces
        self.max_bytes = max_bytes
        self._mapping = mapping or MappingProcess()
        self._behind = behind
        self._cpu_load = cpu_load or CpuLoad()
        self.stats = RebuildStats()
        self._running = 0  # traces in the claim being built
        self._stopping = False
        self._drain = True
        self._deadline: float | None = None
        self._last_claim = float("-inf")
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="tracegrade-trajectory-rebuilder", daemon=True)

    def start(self) -> None:
        """Queue what an earlier process left unbuilt, then start building (raises StoreError if the
        store cannot be read)."""
        self.store.builds.recover()
        self._thread.start()

    @property
    def idle(self) -> bool:
        with self._cond:
            return not self._running

    @property
    def pending(self) -> int:
        """Traces waiting or being built."""
        try:
            waiting = self.store.builds.pending()
        except StoreError:
            waiting = 0
        return waiting + self._running

    def build_waiting(self) -> int:
        """Build every trace waiting now, due or not, in the calling thread (the thread must not be
        started); how many traces were built."""
        before = self.stats.traces_rebuilt
        while self._claim_and_build(due_only=False):
            pass
        return self.stats.traces_rebuilt - before

    def wake(self) -> None:
        """New records were committed: a build may be due sooner than the rebuilder planned."""
        with self._cond:
            self._cond.notify()

    def stop(self, deadline: float | None = None, *, drain: bool = True) -> None:
        """Build everything waiting (``drain``; until ``deadline``, a ``time.monotonic()`` value, when
        given), then end the thread. What is left stays queued for the next start or another builder."""
        with self._cond:
            self._stopping = True
            self._drain = drain
            self._deadline = deadline
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join()
        self._mapping.close()

    # -- the thread --------------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopping:
                    break
                wait = self._wait_seconds()
                if wait > 0:
                    woken = self._cond.wait(wait)
                    if not woken:
                        self._mapping.close_if_idle()
                    continue
            if not self._claim_and_build(due_only=True):
                with self._cond:  # nothing due after all: do not ask again before it may be
                    if not self._stopping:
                        self._cond.wait(min(IDLE_POLL_SECONDS, self._queue_wait() or IDLE_POLL_SECONDS))
        if self._drain:
            while not self._past_deadline() and self._claim_and_build(due_only=False):
                pass
        if self._past_deadline() and self.store.builds.pending():
            log.warning("stopping: trajectory rebuilds left to the next start or another builder")

    def _queue_wait(self) -> float | None:
        try:
            return self.store.builds.seconds_until_due()
        except StoreError:
            return IDLE_POLL_SECONDS

    def _wait_seconds(self) -> float:
        """How long to wait before the next claim (call with the lock held)."""
        if self.store.failure is not None:
            return IDLE_POLL_SECONDS  # a failed store is rebuilt after it reopens
        if self._write_hold is not None and self._write_hold() is not None:
            # the store failed for a full disk that still lacks room: a build's write would fail it again, and the
            # receiver would reopen it every second for as long as the disk stays full; the builds stay queued
            return IDLE_POLL_SECONDS
        due = self._queue_wait()
        wait = IDLE_POLL_SECONDS if due is None else min(due, IDLE_POLL_SECONDS)
        if self._behind():
            saturated = self._cpu_load.saturated()
            if saturated is None:  # measuring now: a claim under a burst is too costly to make blind
                wait = max(wait, self._cpu_load.window_seconds)
            spacing = REBUILD_SATURATED_INTERVAL if saturated else REBUILD_MIN_INTERVAL
            wait = max(wait, self._last_claim + spacing - time.monotonic())
        return max(0.0, wait)

    def _past_deadline(self) -> bool:
        return self._deadline is not None and time.monotonic() > self._deadline

    def _claim_and_build(self, *, due_only: bool) -> bool:
        """Claim and build one batch; False when nothing was claimed (or the claim failed)."""
        with build_turn(self.store):
            return self._build_one(due_only=due_only)

    def _build_one(self, *, due_only: bool) -> bool:
        builds = self.store.builds
        try:
            claim = builds.claim(self.max_traces, due_only=due_only)
        except StoreError as exc:
            log.error("claiming traces to build failed (will retry): %s", exc)
            return False
        if claim is None:
            return False
        self._last_claim = time.monotonic()
        with self._cond:
            self._running = max(1, len(claim))
        started = time.monotonic()
        try:
            batches = _run_claim(self.store, self._mapping, claim, self.max_bytes)[1]
        except Exception as exc:  # keep going; the queue has them due again
            log.error("rebuilding trajectories of %d traces failed (will retry): %s", len(claim), exc)
            with self._cond:
                self.stats.rebuild_errors += 1
            self._finish(claim, built=False)
            return False
        self._finish(claim, built=True)
        per_trace = (time.monotonic() - started) / max(1, len(claim))
        with self._cond:
            s = self.stats
            s.traces_rebuilt += len(claim)
            s.rebuild_batches += 1
            s.count_batches(batches, self.max_bytes)
            s.seconds_per_trace = per_trace if not s.seconds_per_trace else 0.7 * s.seconds_per_trace + 0.3 * per_trace
        return True

    def _finish(self, claim: BuildClaim, *, built: bool) -> None:
        try:
            self.store.builds.finish(claim, built=built)
        except StoreError as exc:  # a shared queue lets the claim's lease run out: another build takes it
            log.error("finishing a build claim failed: %s", exc)
        finally:
            with self._cond:
                self._running = 0
