"""``gen_ai.evaluation.result`` events received by a real ``tracegrade serve`` land in the ``evaluations`` table,
joinable with ``traces``: tracegrade's own emitter (OTLP/HTTP) and another tool's events (the OTLP/gRPC log
exporter, the event name only as an ``event.name`` attribute, a score sent as text, a record sent twice);
and the schema migration that gives events stored before the table their rows."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import TraceFlags

from tests.support.server_process import ServerProcess
from tests.support.waiting import wait_for_value
from tracegrade.evaluation.evaluation_events import EvaluationEventEmitter
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.models.span import LogRecordData
from tracegrade.store import RemoteStore, TraceStore
from tracegrade.store.schema import SCHEMA_VERSION

try:  # OTel SDK < 1.35 emits its own LogRecord class; newer ones take the API's
    from opentelemetry.sdk._logs import LogRecord  # type: ignore[attr-defined]
except ImportError:
    from opentelemetry._logs import LogRecord

JOINED = (
    "SELECT e.evaluation_name, e.score_value, e.score_label, e.explanation, e.error_type, e.run_id, e.case_id, "
    "e.span_id, e.service_name, e.attributes->>'vendor.judge' AS judge, t.root_name "
    "FROM evaluations e JOIN traces t USING (trace_id) ORDER BY e.service_name, e.evaluation_name"
)


def _agent_trace(server: ServerProcess) -> tuple[str, str]:
    """One agent run exported over OTLP/gRPC; its trace id and root span id."""
    provider = TracerProvider(resource=Resource.create({"service.name": "weather-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=server.grpc_target, insecure=True)))
    tracer = provider.get_tracer("tests.evaluations")
    with (
        tracer.start_as_current_span("invoke_agent weather") as root,
        tracer.start_as_current_span("execute_tool get_weather") as tool,
    ):
        tool.set_attribute("gen_ai.tool.name", "get_weather")
    provider.shutdown()
    context = root.get_span_context()
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


def _other_tools_events(server: ServerProcess, trace_id: str, span_id: str) -> None:
    """Events as another evaluator sends them: the name only as an attribute, a score as text, one record
    sent twice (as an exporter's retry would), one evaluation that failed."""
    provider = LoggerProvider(resource=Resource.create({"service.name": "other-evaluator"}))
    provider.add_log_record_processor(
        SimpleLogRecordProcessor(OTLPLogExporter(endpoint=server.grpc_target, insecure=True))
    )
    logger = provider.get_logger("vendor.evals")
    now = time.time_ns()

    def record(attributes: dict[str, Any]) -> Any:
        return LogRecord(
            timestamp=now,
            observed_timestamp=now,
            trace_id=int(trace_id, 16),
            span_id=int(span_id, 16),
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
            severity_number=SeverityNumber.INFO,
            attributes={"event.name": "gen_ai.evaluation.result", **attributes},
        )

    relevance = record(
        {
            "gen_ai.evaluation.name": "relevance",
            "gen_ai.evaluation.score.value": "0.75",
            "gen_ai.evaluation.score.label": "relevant",
            "gen_ai.evaluation.explanation": "answers the question about Bergen",
            "vendor.judge": "judge-7",
        }
    )
    logger.emit(relevance)
    logger.emit(relevance)
    logger.emit(record({"gen_ai.evaluation.name": "toxicity", "error.type": "timeout"}))
    logger.emit(LogRecord(timestamp=now, observed_timestamp=now, body="not an evaluation", attributes={"k": 1}))
    provider.shutdown()


def test_evaluation_events_from_tracegrade_and_another_tool_join_their_trace(tmp_path: Path) -> None:
    store_path = tmp_path / "store.duckdb"
    with ServerProcess(store_path) as server:
        trace_id, root_span = _agent_trace(server)
        report = EvalReport.create(
            "weather",
            [
                EvalCaseResult.success(
                    "bergen",
                    [
                        CriterionResult.success("tool_trajectory_avg_score", 1.0, 1.0),
                        CriterionResult.success("response_match", 0.25, 0.8, details={"reason": "other city"}),
                    ],
                    trace_ids=[trace_id],
                )
            ],
            metadata={"run_id": "run-7"},
        )
        emitter = EvaluationEventEmitter(endpoint=server.http_url)
        assert emitter.emit_report(report, {trace_id: root_span}) == 2
        emitter.close()
        _other_tools_events(server, trace_id, root_span)

        remote = RemoteStore(server.http_url)
        rows = wait_for_value(lambda: len(remote.query(JOINED).rows), 4, "the evaluations joined with their trace")
        assert rows == 4
        joined = remote.query(JOINED).rows
        logged = remote.query("SELECT count(*) FROM logs").rows[0][0]
    assert logged == 5  # the retried record is stored once, the plain log record is not an evaluation
    assert joined == [
        ("relevance", 0.75, "relevant", "answers the question about Bergen", None, None, None, root_span,
         "other-evaluator", "judge-7", "invoke_agent weather"),
        ("toxicity", None, None, None, "timeout", None, None, root_span, "other-evaluator", None,
         "invoke_agent weather"),
        ("response_match", 0.25, "fail", "other city", None, "run-7", "bergen", root_span, "unknown_service", None,
         "invoke_agent weather"),
        ("tool_trajectory_avg_score", 1.0, "pass", None, None, "run-7", "bergen", root_span, "unknown_service", None,
         "invoke_agent weather"),
    ]  # fmt: skip


def test_migrating_a_store_gives_the_events_it_already_holds_their_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    event = LogRecordData(
        trace_id="ab" * 16,
        span_id="cd" * 8,
        time_ns=1_700_000_000_000_000_000,
        observed_time_ns=1_700_000_000_000_000_000,
        event_name="gen_ai.evaluation.result",
        attributes={"gen_ai.evaluation.name": "helpfulness", "gen_ai.evaluation.score.value": 4, "test.case.id": "c1"},
    )
    with TraceStore(path) as store:
        store.write([], [event, LogRecordData(time_ns=1, observed_time_ns=1, body="plain")])
        # the store as version 4 left it: the same logs, no evaluations table (nor what later versions add)
        later = ("evaluations", "eval_runs", "eval_case_results", "eval_results", "eval_run_cases", "grading_jobs")
        for table in later:
            store.execute_write(f"DROP TABLE {table}")
        store.execute_write("ALTER TABLE traces DROP COLUMN tool_names")
        store.execute_write("DELETE FROM schema_version WHERE version >= 5")
    with TraceStore(path) as store:
        rows = store.query("SELECT trace_id, evaluation_name, score_value, case_id, attributes FROM evaluations").rows
        versions = [v for (v,) in store.query("SELECT version FROM schema_version ORDER BY version").rows]
    assert [(t, n, s, c, json.loads(a)["test.case.id"]) for t, n, s, c, a in rows] == [
        ("ab" * 16, "helpfulness", 4.0, "c1", "c1")
    ]
    assert versions == list(range(1, SCHEMA_VERSION + 1))  # version 5 applied again, and every later one
