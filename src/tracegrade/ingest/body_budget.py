"""The memory that OTLP export request bodies (HTTP) and messages (gRPC) may hold at once, shared by every request.

A request's body is read before the request takes one of the in-flight slots (``--max-inflight-requests``),
so that a slot is held only while a request is decoded and journaled: clients that send their bodies slowly
can no longer hold every slot and lock out every export, HTTP and gRPC alike. What the slots bounded before,
the memory of bodies being received, is bounded here instead, in bytes: by as much as the slots
allowed (``max_inflight_requests`` × ``max_request_bytes``). An HTTP request whose next chunk would go past the
budget is refused retryably (503 with ``Retry-After``). A gRPC call's message arrives whole, so it cannot be
counted chunk by chunk: the call waits in line, in arrival order, for room for the largest message grpc lets
through before its message is read (until then it stays with its sender: see ``grpc_services``), and gives back
what its message did not need once read. Every request's bytes are given back when it ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tracegrade.ingest.decode_budget import DecodeBudget
from tracegrade.ingest.intake import Overloaded

__all__ = ["BUDGET_RETRY_AFTER", "BodyBudget"]

BUDGET_RETRY_AFTER = 1.0  # bodies being received are usually in within a second or two


class BodyBudget(DecodeBudget):
    """The bytes held by request bodies and messages (decompressed, as they are kept), at most ``capacity`` in
    all: OTLP/HTTP bodies take theirs as they arrive (``share``), OTLP/gRPC calls wait in line for theirs
    (``acquire``, in arrival order, as requests do for the decode threads) and ``release`` them."""

    @contextmanager
    def share(self) -> Iterator[Callable[[int], None]]:
        """One request's share: ``take(size)`` counts ``size`` more bytes held by the request, or raises
        :class:`Overloaded` when the budget has not that much left; all are given back on exit."""
        taken = 0

        def take(size: int) -> None:
            nonlocal taken
            if self.held + size > self.capacity:
                raise Overloaded(
                    f"request bodies being received hold {self.held} of their {self.capacity}-byte budget, "
                    f"too much to take {size} more; retry later",
                    BUDGET_RETRY_AFTER,
                )
            self.held += size
            taken += size

        try:
            yield take
        finally:
            self.release(taken)  # gRPC calls waiting in line may fit now
