"""Criterion results as ``gen_ai.evaluation.result`` events: from a live run into the SDK's in-memory log
exporter, and over real OTLP/HTTP into a running receiver's ``logs`` table."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs import export as log_export
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.server_inprocess import running_server
from tracegrade import AgentEvaluator, CriteriaConfig, CriterionConfig, EvalConfig, ReporterConfig, ToolCall
from tracegrade import trace_tool as tool
from tracegrade.evaluation.evaluation_events import EVENT_NAME, EvaluationEventEmitter
from tracegrade.models import EvalCase, EvalSet, Invocation
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.store import TraceStore

# the in-memory exporter's name changed in OTel 1.39
InMemoryLogs = getattr(log_export, "InMemoryLogRecordExporter", None) or log_export.InMemoryLogExporter

CONFIG = EvalConfig(
    criteria=CriteriaConfig(
        tool_name_match=CriterionConfig.tool_name_match(),
        contains_keywords=CriterionConfig.contains_keywords(["refund"]),
    ),
    reporter=ReporterConfig(enabled=False),
    emit_evaluation_events=True,
)


@tool("lookup")
def lookup() -> str:
    return "order 7"


def agent(message: str) -> str:
    lookup()
    return "no refund for order 7" if "refund" in message else "order 7 shipped"


async def test_live_run_emits_one_event_per_criterion_on_the_turn_root_span() -> None:
    logs = InMemoryLogs()
    provider = LoggerProvider()
    provider.add_log_record_processor(log_export.SimpleLogRecordProcessor(logs))
    evaluator = AgentEvaluator(agent, config=CONFIG, logger_provider=provider)
    spans = InMemorySpanExporter()
    evaluator.provider.add_span_processor(SimpleSpanProcessor(spans))
    cases = [
        EvalCase(eval_id=i, conversation=[Invocation.simple(q, None, [ToolCall(name=t)])])
        for i, q, t in (("refund", "refund please", "lookup"), ("ship", "where is it", "cancel"))
    ]
    report = await evaluator.evaluate(EvalSet(eval_set_id="events", eval_cases=cases))
    records = [d.log_record for d in logs.get_finished_logs()]
    assert len(records) == 4  # 2 cases x 2 criteria
    roots = {f"{s.context.trace_id:032x}": s.context.span_id for s in spans.get_finished_spans() if s.parent is None}
    by_key = {(r.attributes["test.case.id"], r.attributes["gen_ai.evaluation.name"]): r for r in records}
    for result in report.results:
        (trace_id,) = result.trace_ids
        for criterion in result.criterion_results:
            record = by_key[(result.eval_id, criterion.criterion)]
            assert record.attributes["event.name"] == EVENT_NAME
            assert f"{record.trace_id:032x}" == trace_id and record.span_id == roots[trace_id]
            assert record.attributes["gen_ai.evaluation.score.value"] == criterion.score
            assert record.attributes["gen_ai.evaluation.score.label"] == ("pass" if criterion.passed else "fail")
            assert record.attributes["test.suite.run.id"] == report.metadata["run_id"]
            if getattr(record, "event_name", None) is not None:
                assert record.event_name == EVENT_NAME
    assert by_key[("ship", "tool_name_match_score")].attributes["gen_ai.evaluation.score.label"] == "fail"


def test_events_reach_a_real_receiver_with_their_attributes_and_span_ids(tmp_path: Path) -> None:
    trace_id, span_id = "ab" * 16, "cd" * 8
    results = [
        EvalCaseResult.success(
            "case-1",
            [
                CriterionResult.success("response_match", 0.25, 0.8, details={"reason": "different wording"}),
                CriterionResult.failure("llm_judge", "All LLM samples failed"),
            ],
            trace_ids=[trace_id],
        )
    ]
    report = EvalReport.create("events", results, metadata={"run_id": "run-42"})
    store_path = tmp_path / "events.duckdb"
    with running_server(store_path) as server:
        emitter = EvaluationEventEmitter(endpoint=server.http_url)
        assert emitter.emit_report(report, {trace_id: span_id}) == 2
        emitter.close()
    with TraceStore(store_path, read_only=True) as store:
        rows = store.query(
            "SELECT trace_id, span_id, event_name, attributes FROM logs ORDER BY attributes->>'gen_ai.evaluation.name'"
        ).rows
    assert len(rows) == 2
    judge, match = ((r[0], r[1], r[2], json.loads(r[3])) for r in rows)
    assert match[:3] == (trace_id, span_id, EVENT_NAME) and judge[:2] == (trace_id, span_id)
    assert match[3]["gen_ai.evaluation.name"] == "response_match"
    assert match[3]["gen_ai.evaluation.score.value"] == 0.25
    assert match[3]["gen_ai.evaluation.score.label"] == "fail"
    assert match[3]["gen_ai.evaluation.explanation"] == "different wording"
    assert (match[3]["test.suite.run.id"], match[3]["test.case.id"]) == ("run-42", "case-1")
    assert judge[3]["error.type"] == "tracegrade.evaluation_error"
    assert judge[3]["gen_ai.evaluation.explanation"] == "All LLM samples failed"
    assert "gen_ai.evaluation.score.label" not in judge[3]


def test_grade_emit_otlp_sends_the_offline_results_onto_the_stored_traces(tmp_path: Path) -> None:
    from tests.support.grading_cli import run_cli, write_config
    from tests.support.grading_traces import AgentRun, fill_store

    run = AgentRun(1, "refund please", "no refund", [("lookup", {})], case_id="refund")
    fill_store(tmp_path / "graded.duckdb", [run]).close()
    with TraceStore(tmp_path / "graded.duckdb", read_only=True) as store:
        (root,) = store.query("SELECT span_id FROM spans WHERE parent_span_id IS NULL OR parent_span_id = ''").rows[0]
    case = EvalCase(
        eval_id="refund", conversation=[Invocation.simple("refund please", None, [ToolCall(name="lookup")])]
    )
    EvalSet(eval_set_id="events", eval_cases=[case]).to_file(tmp_path / "evalset.json")
    write_config(tmp_path / "config.json", CONFIG.model_copy(update={"emit_evaluation_events": False}))
    with running_server(tmp_path / "events.duckdb") as server:
        result = run_cli(
            *("grade", "--store", tmp_path / "graded.duckdb", "--evalset", tmp_path / "evalset.json"),
            *("--config", tmp_path / "config.json", "--out", tmp_path / "out", "--emit-otlp", server.http_url),
        )
    assert result.exit_code == 0, result.output
    assert "sent 2 evaluation events" in result.stderr
    with TraceStore(tmp_path / "events.duckdb", read_only=True) as store:
        rows = store.query("SELECT trace_id, span_id, event_name FROM logs").rows
    assert sorted(rows) == [(run.trace_id, root, EVENT_NAME)] * 2
