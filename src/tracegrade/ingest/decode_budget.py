"""DecodeBudget: the request bytes handed to the decode threads, so that requests past admission stay bounded.

A decoded OTLP request is Python objects many times the size of its bytes (99,000 spans of ten small integer
attributes: 14.4 MB of protobuf, 261 MB decoded), and a request handed to the decode threads is decoded to
the end even if its client hangs up meanwhile. The in-flight slots, the body budget and the queue gate all
let go of a request whose client hung up; before this budget its bytes stayed queued for the decode threads,
so clients that sent requests and gave up on them (a deadline shorter than a decode) piled up gigabytes
there. Here a request waits for its turn, in arrival order, until its bytes (decompressed) fit beside those
handed to the decode threads, and it counts until its decode ends, not until its request does: their
capacity is as many maximal requests as there are decode threads, so a flood of them decodes as fast as
before. One request always goes when none is held, however large, so none is locked out; a request that
gives up while it waits leaves the line at once. The decoded records leave their decode thread as compact
Arrow tables (what the write queue holds), so the Python objects are bounded by what the threads decode.

All methods run on the event loop.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["DecodeBudget"]


class DecodeBudget:
    """The bytes of requests handed to the decode threads, at most ``capacity`` in all (or one request alone).

    The body budget (:class:`~tracegrade.ingest.body_budget.BodyBudget`) is one too: gRPC calls wait in its
    line for room to read their messages."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.held = 0
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def waiting(self) -> int:
        """Requests waiting for their turn to decode."""
        return len(self._waiting)

    async def acquire(self, size: int) -> None:
        """Wait until ``size`` bytes fit beside those being decoded, behind every request waiting already."""
        if not self._waiting and self._fits(size):
            self.held += size
            return
        entry = (size, asyncio.get_running_loop().create_future())
        self._waiting.append(entry)
        try:
            await entry[1]
        except BaseException:  # the request was cancelled (its client hung up)
            if entry[1].cancelled():
                if entry in self._waiting:  # else ``_grant`` passed over it already
                    self._waiting.remove(entry)
                self._grant()  # the requests it held up may fit now
            else:  # its turn came just as it was cancelled
                self.release(size)
            raise

    def release(self, size: int) -> None:
        """Give back ``size`` bytes: their decode is over (or was cancelled before it started)."""
        self.held -= size
        self._grant()

    def _grant(self) -> None:
        while self._waiting and self._fits(self._waiting[0][0]):
            size, turn = self._waiting.popleft()
            # cancelled, its request has not left the line yet: bytes counted for it now would never come back
            if not turn.cancelled():
                self.held += size
                turn.set_result(None)

    def _fits(self, size: int) -> bool:
        return self.held == 0 or self.held + size <= self.capacity
