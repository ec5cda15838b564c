"""The receiver's retention (``serve --retain``, ``--retain-tenants``): a thread that expires the traces quiet
for longer than they are kept.

A DuckDB file has one writing process, the receiver, so its expiry has to run inside it; the store's write lock
puts each batch between the writer's commits. A failed pass is logged and tried again at the next one (a
failed store is reopened by the receiver, which starts a new keeper with the new storage).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta

from tracegrade.errors import StoreError
from tracegrade.store.backend import StoreBackend
from tracegrade.store.retention import RetentionPolicy
from tracegrade.store.rows import utc_now
from tracegrade.store.trace_deletion import Deleted

__all__ = ["RetentionKeeper", "pass_interval"]

log = logging.getLogger("tracegrade.retention")

LONGEST_INTERVAL = timedelta(hours=1)
SHORTEST_INTERVAL = timedelta(seconds=1)


def pass_interval(retain: timedelta) -> timedelta:
    """How often to look for expired traces: a tenth of the retention (a trace outlives it by at most that
    much), between a second and an hour."""
    return min(max(retain / 10, SHORTEST_INTERVAL), LONGEST_INTERVAL)


class RetentionKeeper:
    """Expires ``store``'s traces quiet for longer than ``policy`` keeps them, one pass per ``pass_interval`` of
    its shortest retention, until ``stop``; ``on_expired`` hears of each pass that deleted something (on the
    keeper's thread)."""

    def __init__(self, store: StoreBackend, policy: RetentionPolicy, on_expired: Callable[[Deleted], object]) -> None:
        if policy.shortest is None:
            raise ValueError("a retention keeper needs a policy that deletes something")
        self.store = store
        self.policy = policy
        self.interval = pass_interval(policy.shortest)
        self.on_expired = on_expired
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tracegrade-retention", daemon=True)

    def start(self) -> RetentionKeeper:
        self._thread.start()
        return self

    def run_once(self) -> Deleted:
        """One pass: expire what went quiet longer ago than the policy keeps it."""
        expired = self.policy.apply(self.store, utc_now())
        if expired != Deleted():
            log.info("retention (%s): %s", self.policy.describe(), expired.summary("expired"))
            self.on_expired(expired)
        return expired

    def _run(self) -> None:
        interval = self.interval.total_seconds()
        while not self._stop.is_set():
            try:
                self.run_once()
            except StoreError as exc:
                # a failed store is the receiver's to report and reopen; a closed one is being stopped
                if self.store.failure is None and not self._stop.is_set():
                    log.warning("retention pass failed (tried again in %.0f s): %s", interval, exc)
            except Exception:  # the keeper must outlive a bug in one pass: the store would grow unnoticed
                log.exception("retention pass failed (tried again in %.0f s)", interval)
            self._stop.wait(interval)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the pass in progress (before the store closes)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
