"""QueueGate: requests wait for room in the write queue in arrival order (the tenants taking turns), reserve
what they are expected to queue, and are refused once their wait runs out."""

from __future__ import annotations

import asyncio

import pytest

from tracegrade.ingest.queue_gate import FIRST_ESTIMATE, QueueGate, QueueGateTimeout


class Queue:
    """The room a writer's queue has, set by the test."""

    def __init__(self, free: int) -> None:
        self.free = free

    def free_records(self) -> int:
        return self.free


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_request_passes_at_once_while_the_queue_has_room() -> None:
    gate = QueueGate(Queue(10_000).free_records, 30_000, wait_seconds=60)
    assert await gate.enter() == FIRST_ESTIMATE
    assert gate.waiting == 0


async def test_requests_wait_for_room_and_pass_in_arrival_order() -> None:
    queue = Queue(0)
    gate = QueueGate(queue.free_records, 30_000, wait_seconds=60)
    passed: list[int] = []

    async def request(n: int) -> None:
        await gate.enter()
        passed.append(n)

    tasks = [asyncio.create_task(request(n)) for n in range(3)]
    await _settle()
    assert (passed, gate.waiting) == ([], 3)
    queue.free = FIRST_ESTIMATE  # room for one
    gate.room_freed()
    await _settle()
    assert (passed, gate.waiting) == ([0], 2)
    queue.free = 10 * FIRST_ESTIMATE
    gate.room_freed()
    await asyncio.gather(*tasks)
    assert passed == [0, 1, 2]


async def test_the_tenants_take_turns_so_one_tenants_crowd_does_not_hold_up_another() -> None:
    queue = Queue(0)
    gate = QueueGate(queue.free_records, 30_000, wait_seconds=60)
    passed: list[str] = []

    async def request(tenant: str, n: int) -> None:
        gate.leave(await gate.enter(tenant), None)
        passed.append(f"{tenant}{n}")

    crowd = [asyncio.create_task(request("acme", n)) for n in range(4)]
    await _settle()
    late = [asyncio.create_task(request("globex", n)) for n in range(2)]
    await _settle()
    assert gate.waiting == 6
    queue.free = FIRST_ESTIMATE  # room for one request at a time: each hands its reservation back
    gate.room_freed()
    await asyncio.gather(*crowd, *late)
    assert passed == ["acme0", "globex0", "acme1", "globex1", "acme2", "acme3"]


async def test_a_tenant_that_gives_up_leaves_the_turns_to_the_others() -> None:
    queue = Queue(0)
    gate = QueueGate(queue.free_records, 30_000, wait_seconds=60)
    gone = asyncio.create_task(gate.enter("acme"))
    stays = asyncio.create_task(gate.enter("globex"))
    await _settle()
    gone.cancel()
    await _settle()
    assert gate.waiting == 1
    queue.free = FIRST_ESTIMATE
    gate.room_freed()
    assert await stays == FIRST_ESTIMATE and gate.waiting == 0


async def test_reservations_count_against_the_room_until_handed_back() -> None:
    queue = Queue(FIRST_ESTIMATE + 100)
    gate = QueueGate(queue.free_records, 30_000, wait_seconds=60)
    reserved = await gate.enter()
    second = asyncio.create_task(gate.enter())
    await _settle()
    assert not second.done()  # the first request's expected records leave too little room
    gate.leave(reserved, None)  # it queued nothing after all
    assert await second == FIRST_ESTIMATE


async def test_a_request_that_finds_others_waiting_queues_behind_them() -> None:
    queue = Queue(0)
    gate = QueueGate(queue.free_records, 30_000, wait_seconds=60)
    first = asyncio.create_task(gate.enter())
    await _settle()
    queue.free = 10 * FIRST_ESTIMATE  # room, but nobody has been told yet
    second = asyncio.create_task(gate.enter())
    await _settle()
    assert not first.done() and not second.done() and gate.waiting == 2
    gate.room_freed()
    await asyncio.gather(first, second)


async def test_a_request_without_room_within_its_wait_is_refused_and_leaves_the_line() -> None:
    gate = QueueGate(Queue(0).free_records, 30_000, wait_seconds=0.05)
    with pytest.raises(QueueGateTimeout, match=r"no room in the write queue within 0\.05s"):
        await gate.enter()
    assert gate.waiting == 0


async def test_a_cancelled_request_gives_up_its_place_or_its_reservation() -> None:
    queue = Queue(0)
    gate = QueueGate(queue.free_records, 30_000, wait_seconds=60)
    waiting = asyncio.create_task(gate.enter())
    await _settle()
    waiting.cancel()
    await _settle()
    assert gate.waiting == 0
    # admitted and cancelled in the same step: the reservation comes back, so the next one fits
    admitted = asyncio.create_task(gate.enter())
    await _settle()
    queue.free = FIRST_ESTIMATE
    gate.room_freed()
    admitted.cancel()
    await _settle()
    assert await gate.enter() == FIRST_ESTIMATE


async def test_the_estimate_follows_the_sizes_requests_turn_out_to_have() -> None:
    gate = QueueGate(Queue(10**6).free_records, 30_000, wait_seconds=60)
    for _ in range(30):
        gate.leave(await gate.enter(), 100)
    assert 100 <= gate.estimate < 110
    capped = QueueGate(Queue(10**6).free_records, 300, wait_seconds=60)
    assert capped.estimate == 300  # never more than the whole queue: a huge request passes once it is empty
    capped.leave(await capped.enter(), 10_000)
    assert capped.estimate == 300
