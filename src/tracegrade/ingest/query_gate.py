"""QueryGate: the receiver's limits on reads, the same for ``POST /v1/query``, the web UI and the CLI through it.

At most ``max_queries`` run at once (more wait up to ``timeout`` for a turn, then are refused retryably),
each is cancelled ``timeout`` seconds after it starts, and ``cancel_all`` stops every running one (shutdown,
a store being reopened) and refuses every waiting one once it gets its turn (the turns the cancelled ones hand
back must not start queries on a store being closed); a failure's message names none of the server's own paths
(see PrivatePaths).
``run`` waits on the calling thread (what only MCP's ``grade`` still does, on its own few grading threads);
``turn`` waits on the event loop, so a crowd of waiting queries holds no thread: ``POST /v1/query`` waits so for
each query, and the web UI and MCP's other tools for one turn per request (``GatedStore.take_turn``), whose reads
then run in it one after another on a thread.

Turns are shared among tenants: a freed turn goes to the waiting tenant that holds the fewest turns, and
among those to the one served least recently; each tenant's own queries go in arrival order. So one tenant
that keeps every turn busy cannot make another tenant's query wait for more than the first running query
to end, with a single turn too. With one tenant this is plain arrival order.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from aiohttp import web

from tracegrade.errors import QueryCancelled, QueryPreempted, StoreError
from tracegrade.ingest.http_app import client_connected
from tracegrade.ingest.intake import Overloaded
from tracegrade.ingest.private_paths import PrivatePaths
from tracegrade.store.query_control import QueryControl
from tracegrade.store.results import QueryResult
from tracegrade.store.tenancy import DEFAULT_TENANT

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["GatedStore", "HeldTurn", "QueryGate"]


class _Ticket:
    """One waiting query; ``granted`` (set under the gate's lock) is the truth, ``wake`` only rouses its waiter."""

    def __init__(self, wake: Callable[[], object]) -> None:
        self.granted = False
        self.wake = wake


class QueryGate:
    """Turns, time limits and the byte cap of results for the queries of one receiver."""

    def __init__(
        self, max_queries: int, timeout: float, max_bytes: int | None = None, private: PrivatePaths | None = None
    ) -> None:
        self.max_queries = max_queries
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._private = private if private is not None else PrivatePaths({})
        self._free = max_queries
        self._held: dict[str, int] = {}  # turns each tenant holds now
        self._last_served: dict[str, int] = {}  # when each tenant last got a turn (a sequence number)
        self._serial = itertools.count(1)
        self._waiting: dict[str, deque[_Ticket]] = {}  # each tenant's waiting queries, in arrival order
        self._admitted: set[QueryControl] = set()  # controls of the queries running or waiting for a turn
        self._lock = threading.Lock()

    @property
    def running(self) -> int:
        """Turns held now (queries running, or about to)."""
        return self.max_queries - self._free

    @property
    def waiting(self) -> int:
        """Queries waiting for a turn now."""
        with self._lock:
            return sum(len(line) for line in self._waiting.values())

    def run(
        self,
        store: Any,
        sql: str,
        params: Sequence[Any] | None = None,
        control: QueryControl | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> QueryResult:
        """Run ``store.query`` within the limits; ``control`` (made here when None) may cancel it from elsewhere."""
        control = self.admit(control)
        woken = threading.Event()
        try:
            ticket = self._enter(tenant, woken.set)
            if ticket is not None:
                woken.wait(self.timeout)
                self._settle(ticket, tenant)
        except BaseException:
            self._forget(control)
            raise
        return self.run_in_turn(store, sql, params, control, tenant)

    def admit(self, control: QueryControl | None) -> QueryControl:
        """``control`` (made when None) bounded by the gate's limits, and cancelled by ``cancel_all`` from now on,
        while its query still waits for a turn too (``run_in_turn`` or ``leave`` forget it)."""
        control = self.bound(control)
        with self._lock:
            self._admitted.add(control)
        return control

    def bound(self, control: QueryControl | None) -> QueryControl:
        """``control`` (made when None) bounded by the gate's time limit and byte cap."""
        control = control if control is not None else QueryControl(self.timeout)
        control.timeout = self.timeout if control.timeout is None else min(control.timeout, self.timeout)
        if self.max_bytes is not None:  # the receiver's memory is everyone's: no caller reads past its cap
            control.max_bytes = self.max_bytes if control.max_bytes is None else min(control.max_bytes, self.max_bytes)
        return control

    async def turn(self, tenant: str, control: QueryControl, connected: Callable[[], bool], check_every: float) -> None:
        """Wait on the event loop for a turn of ``tenant``'s for the query ``control`` (from ``admit``) controls
        (hand it back through ``run_in_turn`` or ``leave``); gives up when ``connected()`` turns False (the client
        hung up), raises Overloaded after ``timeout``."""
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()
        try:
            ticket = self._enter(tenant, lambda: loop.call_soon_threadsafe(woken.set))
            if ticket is None:
                return
            deadline = loop.time() + self.timeout
            try:
                while not woken.is_set() and connected() and loop.time() < deadline:
                    try:
                        await asyncio.wait_for(woken.wait(), min(check_every, max(0.0, deadline - loop.time())))
                    except asyncio.TimeoutError:
                        pass
            except BaseException:  # cancelled: a turn granted meanwhile goes to the next in line
                if not self._give_up(ticket, tenant):
                    self.leave(tenant, control)
                raise
            self._settle(ticket, tenant)
        except BaseException:
            self._forget(control)
            raise

    def run_in_turn(
        self,
        store: Any,
        sql: str,
        params: Sequence[Any] | None,
        control: QueryControl,
        tenant: str,
    ) -> QueryResult:
        """Run ``store.query`` in a turn ``tenant`` holds (from ``run`` or ``turn``), and hand the turn back."""
        try:
            return self.query_in_turn(store, sql, params, control)
        finally:
            self.leave(tenant, control)

    def query_in_turn(self, store: Any, sql: str, params: Sequence[Any] | None, control: QueryControl) -> QueryResult:
        """Run ``store.query`` in a turn its caller holds and keeps; a failure names none of the server's paths."""
        try:
            result: QueryResult = store.query(sql, params, control=control)
            return result
        except StoreError as exc:
            self._private.hide(exc)
            if isinstance(exc, QueryCancelled) and control.retry_after is not None:
                raise QueryPreempted(f"{exc}; send it again shortly", control.retry_after) from None
            raise

    def cancel_all(self, reason: str, retry_after: float) -> None:
        """Stop every query admitted (running or waiting for its turn): the receiver closes its store. Each fails
        with QueryPreempted, to be sent again after ``retry_after`` seconds."""
        with self._lock:
            admitted = list(self._admitted)
        for control in admitted:
            control.cancel(reason, retry_after)

    # -- turns ------------------------------------------------------------------------------------------

    def _enter(self, tenant: str, wake: Callable[[], object]) -> _Ticket | None:
        """Take a free turn (None) when nobody waits, else queue a ticket woken when its turn comes."""
        with self._lock:
            if self._free > 0 and not self._waiting:
                self._grant(tenant)
                return None
            ticket = _Ticket(wake)
            self._waiting.setdefault(tenant, deque()).append(ticket)
            return ticket

    def _settle(self, ticket: _Ticket, tenant: str) -> None:
        """After the wait: proceed with a granted turn, or refuse the query that got none."""
        if not self._give_up(ticket, tenant):
            return
        raise Overloaded(
            f"{self.max_queries} queries have been running for {self.timeout:g} s (--max-queries); retry later",
            self.timeout,
        )

    def _give_up(self, ticket: _Ticket, tenant: str) -> bool:
        """Leave the line; False if the turn was granted first (the caller holds it)."""
        with self._lock:
            if ticket.granted:
                return False
            line = self._waiting[tenant]
            line.remove(ticket)
            if not line:
                del self._waiting[tenant]
            return True

    def _forget(self, control: QueryControl) -> None:
        with self._lock:
            self._admitted.discard(control)

    def leave(self, tenant: str, control: QueryControl) -> None:
        """Hand back a turn and forget its query's ``control``; the next turn goes to the waiting tenant holding
        the fewest, served least recently."""
        with self._lock:
            self._admitted.discard(control)
            self._free += 1
            self._held[tenant] -= 1
            if not self._held[tenant]:
                del self._held[tenant]
            while self._free > 0 and self._waiting:
                chosen = min(self._waiting, key=lambda t: (self._held.get(t, 0), self._last_served.get(t, 0)))
                line = self._waiting[chosen]
                ticket = line.popleft()
                if not line:
                    del self._waiting[chosen]
                self._grant(chosen)
                ticket.granted = True
                ticket.wake()

    def _grant(self, tenant: str) -> None:
        self._free -= 1
        self._held[tenant] = self._held.get(tenant, 0) + 1
        self._last_served[tenant] = next(self._serial)


class GatedStore:
    """A store whose queries go through a QueryGate as ``tenant``'s (what the web UI and MCP read through inside
    ``serve``): ``take_turn`` waits for one turn on the event loop for a request's reads, ``query`` for each query on
    the calling thread."""

    def __init__(self, store: Any, gate: QueryGate, tenant: str = DEFAULT_TENANT) -> None:
        self._store = store
        self._gate = gate
        self._tenant = tenant

    def query(
        self, sql: str, params: Sequence[Any] | None = None, *, control: QueryControl | None = None
    ) -> QueryResult:
        return self._gate.run(self._store, sql, params, control, self._tenant)

    def query_arrow(
        self, sql: str, params: Sequence[Any] | None = None, *, control: QueryControl | None = None
    ) -> pa.Table:
        """A whole result as an Arrow table (what MCP's ``grade`` loads a case's rows with), in a turn of its own
        and within the time limit, as ``query``."""
        return self._gate.run(_ArrowReads(self._store), sql, params, control, self._tenant).to_arrow()

    async def take_turn(self, request: web.Request) -> HeldTurn:
        """Wait on the event loop (holding no thread) for a turn for ``request``'s reads, which then run in it one
        after another on a thread; ``close()`` the HeldTurn once the request is over. A client that hangs up leaves
        the line (or has its running query cancelled); no turn within the time limit raises Overloaded."""
        from tracegrade.ingest.server import CLIENT_CHECK_SECONDS  # the server imports this module

        connected = functools.partial(client_connected, request)
        held = HeldTurn(self._gate, self._store, self._tenant)
        await self._gate.turn(self._tenant, held.control, connected, CLIENT_CHECK_SECONDS)
        held.watch(connected, CLIENT_CHECK_SECONDS)
        return held

    def __getattr__(self, name: str) -> Any:  # everything else (paths, closed, …) is the store's own
        return getattr(self._store, name)


class _TurnControl(QueryControl):
    """What a held turn is admitted to the gate as (it runs no query itself): cancelling it, as ``cancel_all`` does,
    cancels the turn's queries too."""

    def __init__(self, timeout: float, on_cancel: Callable[[str, float | None], None]) -> None:
        super().__init__(timeout)
        self._on_cancel = on_cancel

    def cancel(self, reason: str, retry_after: float | None = None) -> None:
        super().cancel(reason, retry_after)
        self._on_cancel(reason, retry_after)


class HeldTurn:
    """A turn one request holds (from ``GatedStore.take_turn``), and the store its reads go through: each query runs
    in the turn without waiting, within the gate's limits. ``cancel`` (the gate's ``cancel_all``, the client hanging
    up) stops the running query and refuses later ones; ``close`` hands the turn back once none of them runs."""

    def __init__(self, gate: QueryGate, store: Any, tenant: str) -> None:
        self._gate = gate
        self._store = store
        self._tenant = tenant
        self._running: set[QueryControl] = set()
        self._reason: str | None = None
        self._retry_after: float | None = None  # given with ``_reason`` (``QueryControl.cancel``)
        self._closed = False
        self._handed_back = False
        self._watch: asyncio.Task[None] | None = None
        self._lock = threading.Lock()
        self.control = gate.admit(_TurnControl(gate.timeout, self.cancel))  # last: cancel_all may call it at once

    def query(
        self, sql: str, params: Sequence[Any] | None = None, *, control: QueryControl | None = None
    ) -> QueryResult:
        return self._query_with(self._store, sql, params, control)

    def _query_with(
        self, store: Any, sql: str, params: Sequence[Any] | None, control: QueryControl | None
    ) -> QueryResult:
        control = self._gate.bound(control)
        with self._lock:
            if self._reason is not None:
                control.cancel(self._reason, self._retry_after)  # refused before it starts
            self._running.add(control)
        try:
            return self._gate.query_in_turn(store, sql, params, control)
        finally:
            with self._lock:
                self._running.discard(control)
            self._hand_back_when_done()

    def query_arrow(
        self, sql: str, params: Sequence[Any] | None = None, *, control: QueryControl | None = None
    ) -> pa.Table:
        """A whole result as an Arrow table, in this turn, as ``query``."""
        return self._query_with(_ArrowReads(self._store), sql, params, control).to_arrow()

    def cancel(self, reason: str, retry_after: float | None = None) -> None:
        with self._lock:
            if self._reason is None:
                self._reason, self._retry_after = reason, retry_after
            running = list(self._running)
        for control in running:
            control.cancel(reason, retry_after)

    def watch(self, connected: Callable[[], bool], check_every: float) -> None:
        """Cancel the turn's queries once ``connected()`` turns False (checked on the loop until ``close``)."""

        async def cancel_on_hang_up() -> None:
            while connected():
                await asyncio.sleep(check_every)
            self.cancel("its client closed the connection")

        self._watch = asyncio.create_task(cancel_on_hang_up())

    def close(self) -> None:
        """The request is over. A query it still runs (its handler gave up waiting for the thread) is cancelled, and
        the turn is handed back when that query stops: no more queries run than there are turns."""
        if self._watch is not None:
            self._watch.cancel()
        self.cancel("its request is over")
        with self._lock:
            self._closed = True
        self._hand_back_when_done()

    def _hand_back_when_done(self) -> None:
        with self._lock:
            if not self._closed or self._running or self._handed_back:
                return
            self._handed_back = True
        self._gate.leave(self._tenant, self.control)

    def __getattr__(self, name: str) -> Any:  # everything else (paths, closed, …) is the store's own
        return getattr(self._store, name)


class _ArrowReads:
    """``store`` whose ``query`` reads the whole result as an Arrow table (``query_arrow``), so that the gate runs
    Arrow reads in turns and within limits as it runs every other query."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def query(
        self, sql: str, params: Sequence[Any] | None = None, *, control: QueryControl | None = None
    ) -> QueryResult:
        table = self._store.query_arrow(sql, params, control=control)
        return QueryResult(table.column_names, [], arrow=table)
