"""Online grading: keep grading traces as they complete, through durable jobs with leases in the store.

``rules.yaml`` says which traces (a SQL predicate over ``traces`` and a sample rate), with which criteria,
once a trace has been quiet for ``settle_seconds``. Each (rule, trace) pair becomes one job of the store's
job queue (``grading_jobs``: the file's own table, or on a lake a table in its catalog database that
workers on several machines share, see ``store.grading_jobs``); a worker claims jobs by taking a lease,
grades them reference-free, records the result and marks the job done, renewing its leases meanwhile. A claim
takes the jobs the worker grades in a quarter of the lease at the pace of its last batch (``batch_size`` at
most): quick rules go in large batches, and a slow batch (judges) stays short. A rule's jobs are grouped
into one run per window of ``run_window_minutes`` (by when the job was enqueued): run
``worker:<rule>:<window start, UTC>``, one case per job, so ``tracegrade runs`` lists a row per rule and
window rather than one per trace. A job whose worker died is taken over when its lease expires, or at once by a
worker of the same id (a receiver's after it opened its failed store again, ``tracegrade worker --worker-id``
restarted), which hands back the leases of its id when it starts, without counting their attempt. One running
process holds a worker id (``JobQueue.hold_worker_id``: on a lake, a lock in its catalog database), so a second
process given the id of a live one is refused rather than hand back and finish that one's jobs. A job
always lands in the same run, where its case (keyed by trace) is replaced, so a retried job never writes
duplicate results. A rule belongs to one tenant (``tenant:``, by default the one tenant of a receiver
without a tokens file): it grades that tenant's traces only, and its jobs, runs and cached judge replies
are that tenant's. A worker counts what it does in ``metrics`` (``worker_metrics``: jobs enqueued, claimed,
graded by outcome, leases lost, judge usage, cycles), which ``tracegrade worker --metrics-address`` serves.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import duckdb
from pydantic import BaseModel, ConfigDict, Field, field_validator

from tracegrade.criteria.base import BaseCriterion
from tracegrade.criteria.registry import CRITERIA_REGISTRY
from tracegrade.errors import (
    FileFormatError,
    InvalidValueError,
    NoCriteriaError,
    NotFoundError,
    StoreError,
    did_you_mean,
)
from tracegrade.evaluation.engine import EvaluatorFactory, compile_criteria
from tracegrade.evaluation.lease_keeper import LeaseKeeper
from tracegrade.evaluation.offline import TraceGrader, reference_free_case_id
from tracegrade.evaluation.run_records import RunSink, record_cases
from tracegrade.evaluation.selection import TraceSelection, sample_predicate
from tracegrade.evaluation.worker_metrics import WorkerMetrics, stall_seconds
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.models.files import load_model
from tracegrade.models.results import EvalReport
from tracegrade.store.grading_jobs import ClaimedJob, JobQueue
from tracegrade.store.predicates import isolated_predicate
from tracegrade.store.tenancy import DEFAULT_TENANT, check_tenant_name, grading_for
from tracegrade.store.tenant_scope import TenantStore
from tracegrade.timespec import utc_now

__all__ = ["GradingRule", "GradingSink", "GradingWorker", "NamedCriterion", "WorkerRules", "rules_problems"]

log = logging.getLogger("tracegrade.worker")

_EPOCH = datetime(1970, 1, 1)  # run windows are aligned to it (whole hours for the default hour)
FIRST_BATCH = 10  # jobs of a worker's first claim, before it knows how long a job takes
# A look for settled traces reads those updated since the last look's bound, less LOOK_OVERLAP: a trace's stamp is
# taken before its rows commit, so one may become visible after a look whose bound it is under. Every
# FULL_LOOK_SECONDS (and at a worker's first look) a look reads every trace, which catches any later still.
LOOK_OVERLAP = timedelta(seconds=60)
FULL_LOOK_SECONDS = 300.0
LEASE_SHARE = 0.25  # the share of the lease a batch is sized to take, at the last batch's pace
RENEW_SHARE = 1 / 3  # the leases of the jobs in hand are renewed when this share of the lease has passed


def next_batch_size(seconds_per_job: float | None, lease_seconds: float, batch_size: int) -> int:
    """How many jobs to claim: those that take ``LEASE_SHARE`` of the lease at ``seconds_per_job`` (the last
    batch's pace; ``FIRST_BATCH`` while it is unknown), at least one and at most ``batch_size``."""
    if seconds_per_job is None:
        return min(batch_size, FIRST_BATCH)
    if seconds_per_job <= 0:
        return batch_size
    return max(1, min(batch_size, int(lease_seconds * LEASE_SHARE / seconds_per_job)))


class NamedCriterion(BaseModel):
    """A registered criterion (built-in alias or user criterion) attached by name."""

    model_config = ConfigDict(extra="forbid")

    name: str
    config: CriterionConfig = Field(default_factory=CriterionConfig)


class GradingRule(BaseModel):
    """Which traces one rule grades, and with what."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    tenant: str = DEFAULT_TENANT  # whose traces the rule grades, and whose its jobs and runs are
    where: str | None = None
    sample: float = Field(default=1.0, gt=0.0, le=1.0)
    settle_seconds: float = Field(default=5.0, ge=0.0)
    criteria: CriteriaConfig = Field(default_factory=CriteriaConfig)
    extra_criteria: list[NamedCriterion] = Field(default_factory=list)
    # the traces of evaluation runs (turns stamped with tracegrade.run.id) are graded by those runs already
    include_eval_runs: bool = False

    @field_validator("tenant")
    @classmethod
    def _tenant(cls, value: str) -> str:
        return check_tenant_name(value)


class WorkerRules(BaseModel):
    """The whole ``rules.yaml``."""

    model_config = ConfigDict(extra="forbid")

    rules: list[GradingRule] = Field(min_length=1)
    lease_seconds: float = Field(default=60.0, gt=0)
    poll_seconds: float = Field(default=2.0, gt=0)  # how often to look for settled traces and for jobs, when idle
    batch_size: int = Field(default=200, ge=1)  # the most jobs a claim takes (fewer while jobs are slow)
    max_attempts: int = Field(default=3, ge=1)
    run_window_minutes: float = Field(default=60.0, gt=0)  # a rule's jobs enqueued in one window: one run
    plugins: list[str] = Field(default_factory=list)  # modules imported first (they register user criteria)
    # HOST:PORT where `tracegrade worker` serves /metrics and /healthz (its --metrics-address wins); unused inside
    # `tracegrade serve`, whose own /metrics and /healthz are on its HTTP port
    metrics_address: str | None = None

    @field_validator("metrics_address")
    @classmethod
    def _metrics_address(cls, value: str | None) -> str | None:
        if value is not None:
            from tracegrade.evaluation.worker_endpoint import parse_listen_address

            parse_listen_address(value, "metrics_address")
        return value

    @classmethod
    def from_file(cls, path: str | Path) -> WorkerRules:
        """Load and check a rules file (see :func:`rules_problems`); raises FileFormatError naming every problem."""
        rules = load_model(cls, path)
        problems = rules_problems(rules)
        if problems:
            raise FileFormatError(str(path), problems, "worker rules")
        return rules


def rules_problems(rules: WorkerRules) -> list[tuple[str, str]]:
    """``(JSON path, what is wrong)`` for each problem of rules that loaded but cannot all grade: two rules of one
    name (jobs and runs are keyed by it, so one of them would never grade), a ``where`` that is not a predicate
    over the traces table (bound without a store: every look for traces would fail), criteria ``validate``
    refuses."""
    from tracegrade.criteria.trajectory_db import predicate_problem
    from tracegrade.evaluation.checks import criteria_problems
    from tracegrade.models.files import repeated_names

    repeats = repeated_names([rule.name for rule in rules.rules], "$.rules", "name", "rule")
    problems: list[tuple[str, str]] = []
    for i, rule in enumerate(rules.rules):
        where = f"$.rules[{i}]"
        problems += repeats.get(i, [])
        problem = predicate_problem(rule.where) if rule.where else None
        if problem is not None:
            problems.append(
                (
                    f"{where}.where",
                    f"rule {rule.name!r}: not a valid predicate over the traces table{problem.located()}: "
                    f"{problem.message}",
                )
            )
        problems += criteria_problems(rule.criteria, f"{where}.criteria")
    plugin_problems = _plugin_problems(rules.plugins)
    if plugin_problems:  # the criteria a plugin registers cannot be looked up without it
        return problems + plugin_problems
    for i, rule in enumerate(rules.rules):
        problems += _extra_criteria_problems(rule, f"$.rules[{i}]")
    return problems


def _plugin_problems(plugins: list[str]) -> list[tuple[str, str]]:
    """Import each plugin module (as the worker does before it grades): the ones that cannot be imported.

    A plugin is found in the current directory too, as ``python -m`` and ``tracegrade run MODULE`` find modules:
    the ``tracegrade`` console script alone would look only where packages are installed."""
    from tracegrade.evaluation.agent_loading import importable_from

    importable_from(os.getcwd())
    problems = []
    for i, module in enumerate(plugins):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            problems.append((f"$.plugins[{i}]", f"cannot import {module!r}: {exc}"))
    return problems


def _extra_criteria_problems(rule: GradingRule, where: str) -> list[tuple[str, str]]:
    """Unknown ``extra_criteria`` names, and a rule whose jobs could only fail: no criterion grades without a case."""
    import tracegrade.criteria  # noqa: F401  (registers the built-in criteria)

    unknown = [
        (
            f"{where}.extra_criteria[{j}].name",
            f"rule {rule.name!r}: unknown criterion {spec.name!r}{did_you_mean(spec.name, CRITERIA_REGISTRY)}; "
            "list the module that registers it under `plugins:`",
        )
        for j, spec in enumerate(rule.extra_criteria)
        if spec.name not in CRITERIA_REGISTRY
    ]
    if unknown:
        return unknown
    try:
        criteria = compile_criteria(EvalConfig(criteria=rule.criteria), _built_extra_criteria(rule))
    except (NoCriteriaError, ValueError) as exc:
        return [(where, f"rule {rule.name!r}: {exc}")]
    if all(c.requires_reference for c in criteria):
        needing = ", ".join(c.name for c in criteria)
        return [
            (
                f"{where}.criteria",
                f"rule {rule.name!r}: every criterion ({needing}) needs an eval case; online grading is "
                "reference-free, so enable one such as contains_keywords or safety",
            )
        ]
    return []


def _built_extra_criteria(rule: GradingRule) -> list[BaseCriterion]:
    """The rule's ``extra_criteria``, built (their names are registered: :func:`rules_problems` checks them)."""
    return [CRITERIA_REGISTRY[spec.name](config=spec.config) for spec in rule.extra_criteria]


# errors that say the store (not the job) is out of reach (and psycopg's OperationalError: see below). Not
# OSError: a criterion's own (a judge's endpoint refusing connections) is the job's, and is counted
_UNREACHABLE = (duckdb.IOException, duckdb.ConnectionException)


def _psycopg_operational(exc: BaseException) -> bool:
    """psycopg's OperationalError or a subclass (AdminShutdown: PostgreSQL restarting), without importing psycopg
    (a file store's worker never has it)."""
    return any(k.__name__ == "OperationalError" and k.__module__.startswith("psycopg") for k in type(exc).__mro__)


class _StoreOutOfReach(StoreError):
    """Inside the worker only: a job could not be graded because the store is out of reach (``cause``)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _remove(jobs: list[ClaimedJob], finished: list[ClaimedJob]) -> None:
    done = {job.job_id for job in finished}
    jobs[:] = [job for job in jobs if job.job_id not in done]


class GradingSink(RunSink, Protocol):
    """A read-write store with a job queue: a ``TraceStore`` or a ``LakeStore``; ``failure`` says why it
    must be opened again (None while usable)."""

    failure: str | None

    def job_queue(self) -> JobQueue: ...

    def stamp(self) -> datetime: ...


class GradingWorker:
    """Claims and runs grading jobs against a read-write store (the server's, a file or a lake it opened)."""

    def __init__(
        self,
        store: GradingSink,
        rules: WorkerRules,
        worker_id: str | None = None,
        evaluator_factory: EvaluatorFactory | None = None,
    ) -> None:
        self.store = store
        self.jobs = store.job_queue()
        problems = rules_problems(rules)  # rules built in Python are checked as a rules file is
        if problems:
            raise InvalidValueError("invalid rules: " + "; ".join(f"at {where}: {what}" for where, what in problems))
        self.rules = {r.name: r for r in rules.rules}
        self.settings = rules
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.evaluator_factory = evaluator_factory
        self._looked_at: float | None = None  # when enqueue last looked for settled traces (monotonic clock)
        self._looked_through: dict[str, datetime] = {}  # per rule: the settled bound of its last look
        self._full_look_at: float | None = None  # when a look last read every trace (monotonic clock)
        self._seconds_per_job: float | None = None  # the last batch's pace, from its claim to its jobs' finish
        self._extra = {r.name: _built_extra_criteria(r) for r in rules.rules}  # plugins imported by rules_problems
        self.metrics = WorkerMetrics(
            [(r.tenant, r.name) for r in rules.rules], stall_seconds(rules.poll_seconds, rules.lease_seconds)
        )
        self._backlog_every: float | None = None  # see watch_backlog
        self._backlog_read_at: float | None = None
        # why the worker must write nothing now (None: it may), asked before each cycle: a receiver's store whose
        # disk filled up (see ingest.disk_room), which a write would only fail again
        self.write_hold: Callable[[], str | None] | None = None
        self._held: str | None = None  # the hold of the last cycle, logged when it begins and when it ends
        # whether jobs leased under this worker's id may wait in the queue with nobody grading them: at the start
        # (its id may be that of a worker that stopped holding leases), on a store opened again, after a hand-back
        # failed; see _release_held
        self._release_due = True

    def use_store(self, store: GradingSink) -> None:
        """Go on with ``store``: the same store, opened again after it failed. The leases this worker held when
        it failed are handed back at its next cycle (``_release_held``)."""
        self.store = store
        self.jobs = store.job_queue()
        self._release_due = True

    def _release_held(self) -> None:
        """Hand back, pending with their attempt given back, the jobs leased under this worker's id, when some may
        be (``_release_due``). They are none that it grades: a cycle begins with no job in hand. They are those of
        a worker of this id that stopped holding them: this one before its store failed (the results were lost,
        and handing the jobs back failed with the store), or the process of a ``--worker-id`` restarted, or the
        worker of a receiver before it opened its failed store again (it starts one of the same id). Left
        leased, they would wait for their leases to run out (``lease_seconds``) and spend an attempt of the
        ``max_attempts``: a few store failures would fail a job for good without it ever being graded. No other
        running process grades as this id: ``hold_id`` made sure of it first."""
        if not self._release_due:
            return
        released = self.jobs.release_held(
            self.worker_id, f"handed back by worker {self.worker_id}, which held it when it stopped or its store failed"
        )
        self._release_due = False
        if released:
            log.warning(
                "handed back %d grading job(s) leased to this worker (%s) when it stopped or its store failed, "
                "without counting an attempt: they are graded again now",
                released,
                self.worker_id,
            )

    def hold_id(self) -> None:
        """Hold this worker's id for this process, or check that it still does (``JobQueue.hold_worker_id``):
        WorkerIdInUseError while another running process holds it. Every cycle begins with it, before it hands
        back the leases of its id, so that it never hands back or finishes the jobs of a live worker of that id."""
        self.jobs.hold_worker_id(self.worker_id)

    def enqueue(self) -> int:
        """Create jobs for traces that settled since the last look; returns how many were added.

        A look reads the traces updated since the previous look (``LOOK_OVERLAP`` before its bound), and every
        trace at the first look and once per ``FULL_LOOK_SECONDS``: the cost of a look follows what is new, not
        the size of the store."""
        self._looked_at = time.monotonic()
        full = self._full_look_at is None or self._looked_at - self._full_look_at >= FULL_LOOK_SECONDS
        now = self._now()
        added = 0
        for rule in self.rules.values():
            settled = now - timedelta(seconds=rule.settle_seconds)
            where, params = ["updated_at <= ?"], [settled]
            since = self._looked_through.get(rule.name)
            if since is not None and not full:
                where.append("updated_at > ?")
                params.append(since - LOOK_OVERLAP)
            if not rule.include_eval_runs:
                where.append("run_id IS NULL")
            if rule.where:
                where.append(isolated_predicate(rule.where, "rule where"))
            if rule.sample < 1.0:
                where.append(sample_predicate(rule.sample))
            found = self.jobs.enqueue(rule.name, where, params, rule.tenant)
            self.metrics.count(self.metrics.enqueued, found, tenant=rule.tenant, rule=rule.name)
            added += found
            self._looked_through[rule.name] = settled
        if full:
            self._full_look_at = self._looked_at
        return added

    def _now(self) -> datetime:
        """Now, by the clock that stamped the traces' ``updated_at``: a lake's catalog (PostgreSQL), whose
        clock every machine shares, or this process's for a file. By this machine's clock, a worker whose clock
        runs ahead of the catalog's would take traces for settled before they are (and grade them half
        received, once only), and one that runs behind would wait for them that much longer."""
        if getattr(self.store, "shared_clock", False):
            return self.store.stamp()
        return utc_now()

    def claim(self) -> list[ClaimedJob]:
        """Lease pending jobs or jobs whose lease expired: as many as :func:`next_batch_size` says.

        A job whose lease expired after its last allowed attempt is marked failed instead.
        """
        jobs = self.jobs.claim(
            self.worker_id,
            next_batch_size(self._seconds_per_job, self.settings.lease_seconds, self.settings.batch_size),
            timedelta(seconds=self.settings.lease_seconds),
            self.settings.max_attempts,
        )
        for job in jobs:
            self.metrics.count(self.metrics.claimed, tenant=job.tenant, rule=job.rule)
        return jobs

    async def run_job(self, job: ClaimedJob) -> str | None:
        """Grade one job, as its rule's tenant, and record it; returns the run id, or None when the job failed.

        When the store is out of reach (see ``_out_of_reach``) the job is handed back instead, its attempt
        given back, and a StoreError raised: the worker waits, and the job is graded once the store answers."""
        try:
            return await self._run_one(job)
        except _StoreOutOfReach as exc:
            raise self._hand_back([job], exc.cause) from None

    async def _run_one(self, job: ClaimedJob) -> str | None:
        """``run_job``, raising _StoreOutOfReach (nothing recorded, the job not finished) when the store is."""
        try:
            rule = self.rules.get(job.rule)
            if rule is None:
                raise NotFoundError(f"rule {job.rule!r} is no longer in the rules file")
            run_id, window = self._window_run(job)
            report = await self._grade_and_record(rule, run_id, window, [job])
        except Exception as exc:
            if self._out_of_reach(exc):
                raise _StoreOutOfReach(exc) from exc
            log.warning("grading job %s failed: %s", job.job_id, exc)
            again = "failed" if job.attempts >= self.settings.max_attempts else "pending"
            self._finish([job], again, None, f"{type(exc).__name__}: {exc}")
            self.metrics.count(self.metrics.graded, tenant=job.tenant, rule=job.rule, outcome="error")
            return None
        self._finish([job], "done", run_id, None)
        self.metrics.report_graded(job.tenant, job.rule, report)
        return run_id

    async def run_jobs(self, jobs: list[ClaimedJob]) -> None:
        """Run claimed jobs: those of one rule and run window are graded and recorded together (one load of their
        traces, one write of their cases, one update of their status); a group that fails is run again job by job,
        so that each job's failure is its own."""
        groups: dict[tuple[str, str], list[ClaimedJob]] = {}  # (rule, run id) -> its jobs
        windows: dict[str, dict[str, Any]] = {}
        for job in jobs:
            run_id, window = self._window_run(job)
            windows[run_id] = window
            groups.setdefault((job.rule, run_id), []).append(job)
        unfinished = list(jobs)  # handed back if the store goes out of reach before they are finished
        for (rule_name, run_id), members in groups.items():
            try:
                await self._run_group(rule_name, run_id, windows[run_id], members, unfinished)
            except _StoreOutOfReach as exc:
                raise self._hand_back(unfinished, exc.cause) from None

    async def _run_group(
        self,
        rule_name: str,
        run_id: str,
        window: dict[str, Any],
        members: list[ClaimedJob],
        unfinished: list[ClaimedJob],
    ) -> None:
        """The jobs of one rule and run window: together, then one by one if that failed; each finished job
        leaves ``unfinished``. Raises _StoreOutOfReach as soon as the store is: grading the others one by one
        would only fail each of them for the store's sake."""
        rule = self.rules.get(rule_name)
        if rule is not None and len(members) > 1:
            try:
                report = await self._grade_and_record(rule, run_id, window, members)
            except Exception as exc:
                if self._out_of_reach(exc):
                    raise _StoreOutOfReach(exc) from exc
                log.warning(
                    "grading %d jobs of rule %r together failed (%s); grading them one by one",
                    len(members),
                    rule_name,
                    exc,
                )
            else:
                self._finish(members, "done", run_id, None)
                self.metrics.report_graded(rule.tenant, rule.name, report)
                _remove(unfinished, members)
                return
        for job in members:
            await self._run_one(job)
            _remove(unfinished, [job])

    async def _grade_and_record(
        self, rule: GradingRule, run_id: str, window: dict[str, Any], jobs: list[ClaimedJob]
    ) -> EvalReport:
        """Grade the traces of ``jobs`` as the rule's tenant, and record their cases in run ``run_id`` in one
        write; returns what was recorded; raises when any of it failed (nothing is then recorded as done)."""
        with grading_for(rule.tenant):
            traces = TenantStore(self.store, rule.tenant)  # the traces are read as their tenant's, like every read
            grader = TraceGrader(traces, EvalConfig(criteria=rule.criteria), self.evaluator_factory)
            report = await grader.grade_traces(
                TraceSelection(trace_ids=[job.trace_id for job in jobs]), extra_criteria=self._extra[rule.name]
            )
            job_of_case = {reference_free_case_id(job.trace_id): job.job_id for job in jobs}
            for case in report.results:
                case.metadata.update({"job_id": job_of_case[case.eval_id], "worker": self.worker_id})
            record_cases(self.store, report, "worker", run_id, {"rule": rule.name, **window}, rule.tenant)
        return report

    def _window_run(self, job: ClaimedJob) -> tuple[str, dict[str, Any]]:
        """The run id of the window the job was added in, and the window's bounds for the run's metadata."""
        width = timedelta(minutes=self.settings.run_window_minutes)
        start = _EPOCH + ((job.created_at - _EPOCH) // width) * width
        window = {"window_start": start.isoformat(), "window_end": (start + width).isoformat()}
        return f"worker:{job.rule}:{start:%Y%m%dT%H%M%SZ}", window

    def _out_of_reach(self, exc: BaseException) -> bool:
        """Whether a job failed because the store is out of reach rather than for anything of its own: the store
        failed (a write met the outage), or a read or the job queue met an I/O or connection error (a lake's data
        path or catalog away, a Parquet file unreadable). Counted as the job's attempt, such an outage would fail
        every job in reach within seconds, each tried ``max_attempts`` times against the same outage."""
        if getattr(self.store, "failure", None) is not None:
            return True
        seen: set[int] = set()
        cause: BaseException | None = exc
        while cause is not None and id(cause) not in seen:  # StoreErrors are raised from None: read __context__
            seen.add(id(cause))
            if isinstance(cause, _UNREACHABLE) or _psycopg_operational(cause):
                return True
            cause = cause.__cause__ or cause.__context__
        return False

    def _hand_back(self, jobs: list[ClaimedJob], cause: BaseException) -> StoreError:
        """Give ``jobs`` back to the queue, pending with their attempt given back; the StoreError to raise."""
        reason = f"the store was out of reach: {cause}"
        handed = "handed back"
        try:
            self.jobs.release([job.job_id for job in jobs], self.worker_id, reason)
        except Exception as exc:  # the queue is out of reach too: the next cycle that reaches it hands them back
            log.warning("handing %d grading job(s) back failed: %s", len(jobs), exc)
            self._release_due = True
            handed = "to be handed back (the queue is out of reach too)"
        return StoreError(
            f"grading stopped, {reason}; {len(jobs)} job(s) {handed} without counting an attempt, to be graded "
            "once the store answers again"
        )

    def _finish(self, jobs: list[ClaimedJob], status: str, run_id: str | None, error: str | None) -> None:
        """Finish ``jobs`` (all of one rule). Only the lease holder may finish a job; a worker that lost its lease
        leaves it to the new owner, and counts it lost."""
        held = self.jobs.finish([job.job_id for job in jobs], self.worker_id, status, run_id, error)
        if held < len(jobs):
            log.warning(
                "%d grading job(s) of rule %r were taken over by another worker while this one graded them (their "
                "leases ran out): the new holder's results finish them",
                len(jobs) - held,
                jobs[0].rule,
            )
            self.metrics.count(self.metrics.leases_lost, len(jobs) - held, tenant=jobs[0].tenant, rule=jobs[0].rule)

    async def run_once(self) -> int:
        """Hold this worker's id (``hold_id``), hand back the jobs leased under it if some may be
        (``_release_held``), enqueue (unless that was done less than ``poll_seconds`` ago), claim and run one batch;
        returns the number of jobs run. Raises WorkerIdInUseError, doing nothing, while another running process
        holds this worker's id."""
        self.hold_id()
        self._release_held()
        if self._looked_at is None or time.monotonic() - self._looked_at >= self.settings.poll_seconds:
            # A look scans the traces table (all of it now and then), so a worker working off a backlog looks once
            # per poll interval rather than once per batch; a trace settled meanwhile waits at most that long.
            self.enqueue()
        claimed = time.monotonic()
        jobs = self.claim()
        if jobs:
            lease = timedelta(seconds=self.settings.lease_seconds)
            renew = functools.partial(self.jobs.renew, [job.job_id for job in jobs], self.worker_id, lease)
            with LeaseKeeper(renew, self.settings.lease_seconds * RENEW_SHARE):
                await self.run_jobs(jobs)
            self._seconds_per_job = (time.monotonic() - claimed) / len(jobs)
        return len(jobs)

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Grade until ``stop`` is set, or until the store failed (its owner opens it again, see ``use_store``:
        a failed store refuses every query and write until then). A cycle that ``write_hold`` holds writes nothing
        and waits a poll interval."""
        while not stop.is_set() and self.store.failure is None:
            began = time.monotonic()
            if self._hold():
                ran = 0
            else:
                try:
                    ran = await self.run_once()
                except Exception as exc:  # keep the worker alive through transient store errors
                    log.warning("worker cycle failed: %s", exc)
                    self.metrics.cycle_failed(str(exc) if self._out_of_reach(exc) else None)
                    ran = 0
                else:
                    self.metrics.cycle_completed(time.monotonic() - began)
            self._read_backlog()
            if not ran:
                try:
                    await asyncio.wait_for(stop.wait(), self.settings.poll_seconds)
                except asyncio.TimeoutError:
                    pass
        if self.store.failure is not None:
            self.metrics.store_out_of_reach(f"the store failed ({self.store.failure}); opening it again")

    def _hold(self) -> bool:
        """Whether this cycle must write nothing (``write_hold`` says why); said in the log when a hold begins and
        when it ends, and counted in the metrics for each cycle held."""
        held = self.write_hold() if self.write_hold is not None else None
        if held is not None:
            if self._held is None:
                log.warning("grading waits, writing nothing: %s", held)
            self.metrics.cycle_held(held)
        elif self._held is not None:
            log.warning("grading writes again (it had waited: %s)", self._held)
        self._held = held
        return held is not None

    def watch_backlog(self, every: float) -> None:
        """Read the jobs not finished (for the ``backlog_jobs`` metric) between cycles, at most once per ``every``
        seconds: a count over the shared queue, left out unless the metrics are served."""
        self._backlog_every = every

    def _read_backlog(self) -> None:
        now = time.monotonic()
        if self._backlog_every is None or self.store.failure is not None:
            return
        if self._backlog_read_at is not None and now - self._backlog_read_at < self._backlog_every:
            return
        self._backlog_read_at = now
        try:
            self.metrics.set_backlog(self.jobs.waiting())
        except Exception as exc:  # the store out of reach: the cycles say so; the metric keeps its last value
            log.debug("reading the grading backlog failed: %s", exc)

    def job_counts(self) -> dict[str, int]:
        return self.jobs.counts()
