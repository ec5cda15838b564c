"""QueueGate: export requests wait, still undecoded, until the store writer's queue has room for them.

Refusing a request the moment the write queue is full sends its exporter away for the retry delay (over
OTLP/HTTP a whole second at least: ``Retry-After`` counts seconds), and the writer runs dry unless the
queue holds that long's worth of records. A request held here instead costs only its bytes, and goes on
as soon as the writer takes its next transaction from the queue, so a small queue keeps the writer busy.

Requests pass in arrival order within a tenant, and the tenants take turns: one tenant's crowd of waiting
requests does not make another tenant's request wait behind all of them. Each one that passes reserves as many
records as recent requests held,
until its own records are queued (or it failed); the reservations count against the free room, so a
crowd let through at once cannot overfill the queue after decoding. A request that waited ``wait_seconds``
without room is refused as before (503 / ``RESOURCE_EXHAUSTED`` with a retry delay).

All methods run on the event loop; the writer's thread reports room through ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from tracegrade.errors import TracegradeError
from tracegrade.store.tenancy import DEFAULT_TENANT

__all__ = ["QueueGate", "QueueGateTimeout"]

FIRST_ESTIMATE = 512  # records expected of a request before any was seen (the OTel SDK's batch size)


class QueueGateTimeout(TracegradeError):
    """The request waited its whole allowance and the queue still had no room for it."""


class QueueGate:
    """Lets requests on while ``free_records()`` (the queue's room) covers them: in arrival order within a
    tenant, a tenant at a time in turn.

    ``capacity`` caps the estimate of one request, so a request larger than the whole queue still passes
    once the queue is empty (the writer accepts such a request alone).
    """

    def __init__(self, free_records: Callable[[], int], capacity: int, wait_seconds: float) -> None:
        self._free_records = free_records
        self._capacity = capacity
        self._wait_seconds = wait_seconds
        # each waiting tenant's requests in arrival order; the dict's order is whose turn comes next
        self._waiting: dict[str, deque[asyncio.Future[int]]] = {}
        self._reserved = 0
        self._estimate = min(FIRST_ESTIMATE, capacity)

    @property
    def estimate(self) -> int:
        """Records a request is expected to hold (a running average of recent ones)."""
        return self._estimate

    @property
    def waiting(self) -> int:
        """Requests waiting for room now."""
        return sum(len(line) for line in self._waiting.values())

    async def enter(self, tenant: str = DEFAULT_TENANT) -> int:
        """Wait for room, behind ``tenant``'s earlier requests and for its turn among the tenants; returns the
        records reserved (hand them back to :meth:`leave`).

        Raises QueueGateTimeout after ``wait_seconds`` without room.
        """
        if not self._waiting and self._fits():
            return self._reserve()
        ticket: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(tenant, deque()).append(ticket)
        try:
            await asyncio.wait((ticket,), timeout=self._wait_seconds)
        except BaseException:  # the request was cancelled (its client hung up)
            if ticket.done():
                self.leave(ticket.result(), None)
            else:
                self._give_up(ticket, tenant)
            raise
        if not ticket.done():
            self._give_up(ticket, tenant)
            raise QueueGateTimeout(f"no room in the write queue within {self._wait_seconds:g}s")
        return ticket.result()

    def _give_up(self, ticket: asyncio.Future[int], tenant: str) -> None:
        line = self._waiting[tenant]
        line.remove(ticket)
        if not line:
            del self._waiting[tenant]
        ticket.cancel()

    def leave(self, reserved: int, records: int | None) -> None:
        """Hand back a reservation once the request's ``records`` are queued (None: it queued nothing)."""
        self._reserved -= reserved
        if records:
            self._estimate = min(self._capacity, max(1, (3 * self._estimate + records) // 4))
        self.room_freed()

    def room_freed(self) -> None:
        """The queue may have room again: let waiting requests on, a tenant's first request at a time, the
        tenants in turn."""
        while self._waiting and self._fits():
            tenant = next(iter(self._waiting))
            line = self._waiting.pop(tenant)
            line.popleft().set_result(self._reserve())
            if line:  # its next request waits for the tenant's next turn, after every other tenant's
                self._waiting[tenant] = line

    def _fits(self) -> bool:
        return self._free_records() - self._reserved >= self._estimate

    def _reserve(self) -> int:
        self._reserved += self._estimate
        return self._estimate
