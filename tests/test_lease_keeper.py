"""LeaseKeeper: renewals go on through failures and stop with the block."""

from __future__ import annotations

import logging
import time

import pytest

from tests.support.waiting import wait_until
from tracegrade.errors import StoreError
from tracegrade.evaluation.lease_keeper import LeaseKeeper


def test_a_failed_renewal_is_tried_again_and_none_follows_the_block(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[float] = []

    def renew() -> None:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise StoreError("the catalog is away")

    with caplog.at_level(logging.WARNING, logger="tracegrade.worker"), LeaseKeeper(renew, 0.01):
        wait_until(lambda: len(calls) >= 3, "renewals after the failed one")
    done = len(calls)
    time.sleep(0.05)
    assert len(calls) == done  # the keeper's thread ended with the block
    assert "renewing the leases of the jobs in hand failed: the catalog is away" in caplog.text
