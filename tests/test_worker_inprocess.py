"""The server-side pieces: a grading worker running inside the receiver process (sharing its StoreWriter's
store) and ``POST /v1/runs`` recording a report while the server holds the file."""

from __future__ import annotations

import asyncio
import functools
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from aiohttp import web

from tests.support.grading_traces import AgentRun, run_spans
from tests.support.server_otlp import post
from tests.support.waiting import wait_until
from tracegrade.cli.grading_store import GradingStore
from tracegrade.errors import StoreError
from tracegrade.evaluation.offline import TraceGrader
from tracegrade.evaluation.selection import TraceSelection
from tracegrade.evaluation.worker import WorkerRules
from tracegrade.ingest.inprocess_worker import start_inprocess_worker
from tracegrade.ingest.intake import Intake
from tracegrade.ingest.journaled_writer import JournaledWriter
from tracegrade.ingest.metrics import ReceiverMetrics
from tracegrade.ingest.runs_endpoint import add_runs_route
from tracegrade.ingest.tokens import TokenTable
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.store import StoreWriter, TraceStore
from tracegrade.store.journal import RequestJournal

TOKEN = "s3cret"


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[StoreWriter]:
    store_writer = StoreWriter(TraceStore(tmp_path / "store.duckdb"), settle_seconds=0.05)
    store_writer.start()
    yield store_writer
    store_writer.close()


def _count(writer: StoreWriter, sql: str) -> int:
    return int(writer.query(sql).rows[0][0])


def test_inprocess_worker_grades_traces_as_they_arrive(writer: StoreWriter) -> None:
    rules = WorkerRules.model_validate(
        {
            "poll_seconds": 0.05,
            "rules": [{"name": "kw", "settle_seconds": 0, "criteria": {"contains_keywords": {"keywords": ["ok"]}}}],
        }
    )
    writer.submit([s for n in (1, 2) for s in run_spans(AgentRun(n, f"q{n}", "ok", []))]).result(30)
    worker = start_inprocess_worker(writer, rules)
    try:
        wait_until(
            lambda: _count(writer, "SELECT count(*) FROM grading_jobs WHERE status = 'done'") == 2, "2 jobs done", 60
        )
        # spans keep arriving through the writer while the worker writes its results
        writer.submit([s for n in (3, 4, 5) for s in run_spans(AgentRun(n, f"q{n}", "nope", []))]).result(30)
        wait_until(
            lambda: _count(writer, "SELECT count(*) FROM grading_jobs WHERE status = 'done'") == 5, "5 jobs done", 60
        )
    finally:
        worker.stop()
    scores = writer.query("SELECT trace_id, score FROM eval_results ORDER BY trace_id").rows
    assert [s for _, s in scores] == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert _count(writer, "SELECT count(*) FROM spans") == sum(
        len(run_spans(AgentRun(n, "q", "a", []))) for n in range(5)
    )


@contextmanager
def runs_server(writer: StoreWriter, journal: Path) -> Iterator[str]:
    """An aiohttp app with only the runs route (the receiver adds it to its own app) on a loopback port."""
    metrics = ReceiverMetrics(queue_depth=lambda: 0, inflight=lambda: 0)
    intake = Intake(
        JournaledWriter(writer, RequestJournal(journal)),
        metrics,
        tokens=TokenTable.single(TOKEN),
        max_inflight_requests=4,
    )
    app = web.Application()
    add_runs_route(app, writer.store, functools.partial(intake.authorize, scope="record"))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runner = web.AppRunner(app)

    async def start() -> int:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    port = asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        intake.close()


def test_runs_endpoint_records_a_report_through_the_writer(writer: StoreWriter, tmp_path: Path) -> None:
    writer.submit([s for n in (1, 2) for s in run_spans(AgentRun(n, f"q{n}", "ok", []))]).result(30)
    wait_until(lambda: _count(writer, "SELECT count(*) FROM traces") == 2, "2 traces stored", 60)
    config = EvalConfig(criteria=CriteriaConfig(contains_keywords=CriterionConfig.contains_keywords(["ok"])))
    report = TraceGrader(writer, config).grade_traces_sync(TraceSelection())
    with runs_server(writer, tmp_path / "journal") as url:
        remote = GradingStore(reader=writer, sink=None, remote_url=url, token=TOKEN)
        assert remote.record(report, "reference_free", "run-remote") == "run-remote"
        assert remote.record(report, "reference_free", "run-remote") == "run-remote"  # idempotent
        rows = writer.query("SELECT run_id, kind, total_cases FROM eval_runs").rows
        assert rows == [("run-remote", "reference_free", 2)]
        assert _count(writer, "SELECT count(*) FROM eval_results") == 2

        with pytest.raises(StoreError, match="401"):
            GradingStore(reader=writer, sink=None, remote_url=url, token="wrong").record(report, "eval_set")
        bad = post(url + "/v1/runs", json.dumps({"report": {"results": "x"}}).encode(), "application/json", token=TOKEN)
        assert bad.status == 400 and "$.report.eval_set_id" in bad.json()["error"]
        kind = post(
            url + "/v1/runs",
            json.dumps({"report": report.model_dump(mode="json"), "kind": "nightly"}).encode(),
            "application/json",
            token=TOKEN,
        )
        assert kind.status == 400 and "kind must be one of" in kind.json()["error"]
        # a run id is part of the run's address in the UI: nothing that would leave its path segment
        for run_id in ("../sql", "a/b", "", " run", "run?x=1", "r" * 201, 7):
            document = {"report": report.model_dump(mode="json"), "run_id": run_id}
            refused = post(url + "/v1/runs", json.dumps(document).encode(), "application/json", token=TOKEN)
            assert refused.status == 400 and "cannot name a run" in refused.json()["error"], run_id
    assert _count(writer, "SELECT count(*) FROM eval_runs") == 1
