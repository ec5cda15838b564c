"""The memory that OTLP export request bodies (HTTP) and messages (gRPC) may hold at once, shared by every request.

A request's body is read before the request takes one of the in-flight slots (``--max-inflight-requests``),
so that a slot is held only while a request is decoded and journaled: clients that send their bodies slowly
can no longer hold every slot and lock out every export, HTTP and gRPC alike. What the slots bounded before,
the memory of bodies being received, is bounded here instead, in bytes: by as much as the slots
allowed (``max_inflight_requests`` × ``max_request_bytes``). An HTTP request whose next chunk would go past the
budget is refused retryably (503 with ``Retry-After``). A gRPC call's message arrives whole, so it cannot be
counted chunk by chunk: the call waits in line, in arrival order, for room for the largest message grpc lets
through before its message is read (until then it stays with its sender: see ``grpc_services``), and gives back
what its message did not need once read. While calls wait, the two protocols take turns: a new HTTP body (one
that has not started) is refused retryably unless a call has left the line since the last new body started, so
steady HTTP traffic cannot take every byte that frees up while a call waits until its deadline, and steady gRPC
traffic, which may keep the line from ever emptying, cannot keep every new HTTP body out either. Bodies already
being received go on (refusing them would waste what was sent). Every request's bytes are given back when it ends.
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
    (``acquire``, in arrival order, as requests do for the decode threads) and ``release`` them. While calls
    wait, a new body starts only in its turn: once after each call that left the line."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._body_turn = False  # a call left the line since the last new body started while calls waited

    def _grant(self) -> None:
        waiting = self.waiting
        super()._grant()
        if self.waiting < waiting:
            self._body_turn = True

    @contextmanager
    def share(self) -> Iterator[Callable[[int], None]]:
        """One request's share: ``take(size)`` counts ``size`` more bytes held by the request, or raises
        :class:`Overloaded` when the budget has not that much left, or, for the body's first chunk, when gRPC
        calls wait in line for room; all are given back on exit."""
        taken = 0
        started = False  # not ``taken``: a gzip body's first chunks may inflate to nothing yet

        def take(size: int) -> None:
            nonlocal taken, started
            if not started and self.waiting:
                # the first call in line waits only because its room does not fit: whatever this body took, it
                # would wait longer; so a new body takes its turn after a call, not before every one
                if not self._body_turn:
                    raise Overloaded(
                        f"{self.waiting} OTLP/gRPC call(s) wait for room in the {self.capacity}-byte budget of "
                        "request bodies being received, and a new body takes its turn after the next of them; "
                        "retry later",
                        BUDGET_RETRY_AFTER,
                    )
                self._body_turn = False
            started = True
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
