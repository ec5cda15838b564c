"""The metrics and health of one online grading worker (``tracegrade worker --metrics-address``).

The worker's grading thread counts what it does here (jobs enqueued, claimed, graded by outcome, leases lost,
judge calls, each cycle's duration and outcome); the metrics server's thread renders them for ``/metrics`` and
judges health for ``/healthz``. The two threads meet under one lock: updates come per job batch, never per span,
so the lock costs nothing that matters. Health is judged from what the worker did, never by querying the store
from the server's thread: a store out of reach would hold the answer for as long as its connection timeout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tracegrade.ingest.metrics import Counter, Gauge, Histogram, LabeledGauge, MetricsRegistry
from tracegrade.models.results import EvalReport

__all__ = ["BACKLOG_SECONDS", "STALL_LEASES", "STALL_POLLS", "WorkerHealth", "WorkerMetrics", "stall_seconds"]

PREFIX = "tracegrade_worker_"
# A worker with no completed cycle for this many poll intervals, or lease lengths when that is longer, is stalled.
# A cycle grades a batch sized to take a quarter of the lease, and an idle worker completes one per poll
# interval, so a healthy worker stays well within both (a judge hanging past twice the lease does not).
STALL_POLLS = 5
STALL_LEASES = 2
# a cycle: an idle look takes milliseconds; a batch of judged jobs a good share of the lease (60 s by default)
CYCLE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
OUTCOMES = ("passed", "failed", "error")
WAITING = ("pending", "leased")  # the statuses of the jobs not finished
# how often a worker whose metrics are served counts the jobs not finished (a query on the shared queue)
BACKLOG_SECONDS = 10.0


def stall_seconds(poll_seconds: float, lease_seconds: float) -> float:
    """How long without a completed cycle makes a worker stalled (see ``STALL_POLLS``)."""
    return max(STALL_POLLS * poll_seconds, STALL_LEASES * lease_seconds)


@dataclass(frozen=True)
class WorkerHealth:
    """What ``/healthz`` answers: healthy or not, why not, and how long ago the last cycle completed."""

    healthy: bool
    reason: str | None
    last_cycle_age_seconds: float
    stall_seconds: float

    def as_json(self) -> dict[str, object]:
        return {
            "status": "ok" if self.healthy else "unhealthy",
            "reason": self.reason,
            "last_cycle_age_seconds": round(self.last_cycle_age_seconds, 3),
            "stall_seconds": self.stall_seconds,
        }


class WorkerMetrics:
    """The ``tracegrade_worker_*`` metrics of one worker, whose rules are the ``(tenant, rule)`` pairs given: their
    series are there from the start at 0, so a rate over them is defined before the first job."""

    def __init__(
        self, rules: Iterable[tuple[str, str]], stall: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        pairs = list(rules)
        self._lock = threading.Lock()
        self._clock = clock
        self.stall = stall
        self._last_cycle = clock()  # before the first cycle: since the worker started
        self._out_of_reach: str | None = None  # why the store is out of reach, until a cycle completes again
        self._backlog: dict[tuple[str, ...], float] = {}  # none until first read: unknown, not 0
        self._tenants: list[str] = []
        self.registry = MetricsRegistry()
        add = self.registry.add
        by_rule = ("tenant", "rule")
        self.enqueued = add(
            Counter(PREFIX + "jobs_enqueued_total", "Grading jobs this worker added for settled traces.", by_rule)
        )
        self.claimed = add(
            Counter(PREFIX + "jobs_claimed_total", "Grading jobs this worker leased (a retry again).", by_rule)
        )
        self.graded = add(
            Counter(
                PREFIX + "jobs_graded_total",
                "Grading attempts this worker finished, by outcome: passed or failed (the case's verdict, recorded), "
                "error (the case recorded an error, or grading raised and the job was retried or failed for good).",
                (*by_rule, "outcome"),
            )
        )
        self.leases_lost = add(
            Counter(
                PREFIX + "leases_lost_total",
                "Jobs this worker graded after its lease on them had run out and another worker took them over.",
                by_rule,
            )
        )
        self.judge_calls = add(Counter(PREFIX + "judge_calls_total", "LLM judge calls made grading.", ("tenant",)))
        self.judge_cost = add(
            Counter(PREFIX + "judge_cost_usd_total", "LLM judge cost in USD, where the price is known.", ("tenant",))
        )
        self.judge_tokens = add(
            Counter(PREFIX + "judge_tokens_total", "LLM judge tokens, input and output.", ("tenant", "direction"))
        )
        self.cycle_failures = add(
            Counter(PREFIX + "cycle_failures_total", "Cycles (look for traces, claim, grade) that raised.")
        )
        self.cycles_held = add(
            Counter(
                PREFIX + "cycles_held_total",
                "Cycles in which the worker wrote nothing because the store's disk had no room for its writes (the "
                "store failed for a full disk: a write would fail it again).",
            )
        )
        self.cycle_duration = add(
            Histogram(PREFIX + "cycle_duration_seconds", "Duration of the cycles that completed.", CYCLE_BUCKETS)
        )
        add(Gauge(PREFIX + "last_cycle_age_seconds", "Seconds since the last cycle completed.", self._age))
        add(Gauge(PREFIX + "stall_seconds", "Seconds without a completed cycle that fail /healthz.", self._stall))
        add(
            Gauge(
                PREFIX + "store_reachable",
                "0 while the store is out of reach (the last cycle met an outage, or the store is being opened "
                "again), else 1.",
                self._reachable,
            )
        )
        add(
            LabeledGauge(
                PREFIX + "backlog_jobs",
                "Jobs not finished, in the queue every worker of the store shares (read every few seconds).",
                ("tenant", "status"),
                lambda: self._backlog,
            )
        )
        self.add_rules(pairs)

    def add_rules(self, rules: Iterable[tuple[str, str]]) -> None:
        """Series at 0 for the ``(tenant, rule)`` pairs given; those counted already keep their values (the
        receiver hands its worker's metrics to the worker it starts when the store is opened again)."""
        pairs = list(rules)
        with self._lock:
            self._tenants = sorted({*self._tenants, *(tenant for tenant, _ in pairs)})
            for tenant, rule in pairs:
                for counter in (self.enqueued, self.claimed, self.leases_lost):
                    counter.inc(0, tenant=tenant, rule=rule)
                for outcome in OUTCOMES:
                    self.graded.inc(0, tenant=tenant, rule=rule, outcome=outcome)
                self.judge_calls.inc(0, tenant=tenant)
                self.judge_cost.inc(0, tenant=tenant)
                for direction in ("input", "output"):
                    self.judge_tokens.inc(0, tenant=tenant, direction=direction)

    # -- what the worker reports (its grading thread) -------------------------------------------------------

    def count(self, counter: Counter, amount: float = 1, **labels: str) -> None:
        """Add ``amount`` to one of this worker's counters."""
        with self._lock:
            counter.inc(amount, **labels)

    def report_graded(self, tenant: str, rule: str, report: EvalReport) -> None:
        """The cases of a batch recorded as done: their verdicts, and what their judges used."""
        outcomes = {outcome: 0 for outcome in OUTCOMES}
        for case in report.results:
            outcomes["error" if case.is_error else "passed" if case.passed else "failed"] += 1
        usage = report.summary.judge_token_usage
        with self._lock:
            for outcome, n in outcomes.items():
                self.graded.inc(n, tenant=tenant, rule=rule, outcome=outcome)
            self.judge_calls.inc(usage.calls, tenant=tenant)
            self.judge_cost.inc(usage.cost_usd, tenant=tenant)
            self.judge_tokens.inc(usage.input_tokens, tenant=tenant, direction="input")
            self.judge_tokens.inc(usage.output_tokens, tenant=tenant, direction="output")

    def cycle_completed(self, seconds: float) -> None:
        with self._lock:
            self.cycle_duration.observe(seconds)
            self._last_cycle = self._clock()
            self._out_of_reach = None

    def cycle_failed(self, store_out_of_reach: str | None) -> None:
        """A cycle raised; ``store_out_of_reach`` says why when the store was the cause."""
        with self._lock:
            self.cycle_failures.inc()
            if store_out_of_reach is not None:
                self._out_of_reach = store_out_of_reach

    def cycle_held(self, reason: str) -> None:
        """A cycle wrote nothing for ``reason`` (the store's disk is full): out of reach until a cycle completes."""
        with self._lock:
            self.cycles_held.inc()
            self._out_of_reach = reason

    def store_out_of_reach(self, reason: str) -> None:
        """The store failed and is being opened again: unhealthy until a cycle completes with it."""
        with self._lock:
            self._out_of_reach = reason

    def set_backlog(self, waiting: dict[tuple[str, str], int]) -> None:
        """The jobs not finished by (tenant, status), as read from the queue; 0 for this worker's tenants that
        have none."""
        backlog: dict[tuple[str, ...], float] = {(t, status): 0.0 for t in self._tenants for status in WAITING}
        backlog.update((key, float(n)) for key, n in waiting.items())
        with self._lock:
            self._backlog = backlog

    # -- what the metrics server reads (its own thread) -----------------------------------------------------

    def render(self) -> str:
        with self._lock:
            return self.registry.render()

    def health(self) -> WorkerHealth:
        with self._lock:
            age = self._age()
            if self._out_of_reach is not None:
                reason: str | None = f"the store is out of reach: {self._out_of_reach}"
            elif age > self.stall:
                reason = (
                    f"no grading cycle completed for {age:.0f} s (more than {self.stall:g} s: the worker is stuck, "
                    "a criterion or judge may hang; see its log)"
                )
            else:
                reason = None
            return WorkerHealth(reason is None, reason, age, self.stall)

    def _age(self) -> float:
        return max(0.0, self._clock() - self._last_cycle)

    def _stall(self) -> float:
        return self.stall

    def _reachable(self) -> float:
        return 0.0 if self._out_of_reach is not None else 1.0
