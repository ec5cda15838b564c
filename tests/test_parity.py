"""Parity: a live AgentEvaluator run exported over OTLP to a running ``tracegrade serve``, then graded
offline by ``tracegrade grade``, gets the same scores case by case as the live run."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.support.capture_agents import build_support_agent, function_graph
from tests.support.grading_cli import eval_runs, read_report, run_cli, write_config
from tests.support.server_process import ServerProcess
from tests.support.waiting import wait_until
from tracegrade.evaluation.evaluator import AgentEvaluator
from tracegrade.models import EvalCase, EvalSet, Invocation, ToolCall
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.models.results import EvalReport
from tracegrade.store import RemoteStore

CONFIG = EvalConfig(
    criteria=CriteriaConfig(
        tool_name_match=CriterionConfig.tool_name_match(),
        trajectory=CriterionConfig.trajectory(check_args=True),
        node_order=CriterionConfig.node_order(),
        rouge_match=CriterionConfig.rouge_match(),
        contains_keywords=CriterionConfig.contains_keywords(["Answer", "Found"], threshold=0.5),
    )
)
CONFIG.reporter.enabled = False
NODES = ["planner", "responder"]


def _case(eval_id: str, *turns: tuple[str, str, list[ToolCall], list[str]]) -> EvalCase:
    return EvalCase(eval_id=eval_id, conversation=[Invocation.simple(*turn) for turn in turns])


FUNCTION_GRAPH_SET = EvalSet(
    eval_set_id="parity",
    eval_cases=[
        _case(
            "search",
            (
                "find cats",
                "Answer: ['cats-0', 'cats-1']",
                [ToolCall(name="search", args={"query": "cats", "limit": 2})],
                NODES,
            ),
        ),
        _case("add", ("add 2 and 3", "Answer: 5.0", [ToolCall(name="calculator", args={"a": 2.0, "b": 3.0})], NODES)),
        _case("wrong", ("add 4 and 4", "Answer: 9", [ToolCall(name="search")], ["responder"])),
        _case(
            "two-turns",
            ("find dogs", "Answer: dogs", [ToolCall(name="search", args={"query": "dogs", "limit": 2})], NODES),
            ("add 1 and 1", "Answer: 2.0", [ToolCall(name="calculator", args={"a": 1.0, "b": 1.0})], NODES),
        ),
    ],
)
PYDANTIC_AI_SET = EvalSet(
    eval_set_id="parity-pydantic-ai",
    eval_cases=[
        _case(
            "two-skus",
            (
                "check sku-1 and sku-2",
                "Found: sku-1 in stock, sku-2 in stock",
                [ToolCall(name="lookup", args={"sku": "sku-1"}), ToolCall(name="lookup", args={"sku": "sku-2"})],
                ["support"],
            ),
        ),
        _case(
            "retry",
            (
                "strict sku-9",
                "Found: fallback in stock",
                [ToolCall(name="strict_lookup"), ToolCall(name="lookup", args={"sku": "fallback"})],
                [],
            ),
        ),
        _case("wrong", ("check sku-3", "Found cats", [ToolCall(name="lookup", args={"sku": "sku-4"})], ["other"])),
    ],
)
AGENTS = {
    "function-graph": (lambda: function_graph, FUNCTION_GRAPH_SET),
    "pydantic-ai": (build_support_agent, PYDANTIC_AI_SET),
}


def _scores(report: EvalReport) -> dict[str, tuple]:
    return {
        r.eval_id: (r.passed, r.error, r.trace_ids, [(c.criterion, c.score, c.passed) for c in r.criterion_results])
        for r in report.results
    }


def _wait_for_traces(url: str, run_id: str, turns: int) -> None:
    remote = RemoteStore(url)
    wait_until(
        lambda: remote.query("SELECT count(*) FROM traces WHERE run_id = ?", [run_id]).rows[0][0] >= turns,
        f"the {turns} exported traces to reach the store",
        timeout=60,
        interval=0.1,
    )


@pytest.fixture(params=sorted(AGENTS))
def live_run(request: pytest.FixtureRequest, tmp_path: Path):
    """Run an eval set live with an OTLP/HTTP exporter pointed at a running receiver."""
    make_agent, eval_set = AGENTS[request.param]
    server = ServerProcess(tmp_path / "store.duckdb").start()
    try:
        evaluator = AgentEvaluator(make_agent(), config=CONFIG)
        processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{server.http_url}/v1/traces"))
        evaluator.provider.add_span_processor(processor)
        report = asyncio.run(evaluator.evaluate(eval_set))
        processor.force_flush()
        turns = sum(len(c.conversation) for c in eval_set.eval_cases)
        _wait_for_traces(server.http_url, report.metadata["run_id"], turns)
        yield server, eval_set, report
    finally:
        server.kill()


def test_offline_grade_matches_the_live_run_case_by_case(live_run, tmp_path: Path) -> None:
    server, eval_set, live = live_run
    passed = [r.passed for r in live.results]
    assert any(passed) and not all(passed), passed  # a failing case keeps this honest
    eval_set.to_file(tmp_path / "evalset.json")
    write_config(tmp_path / "config.json", CONFIG)
    args = [
        "grade",
        "--store",
        tmp_path / "store.duckdb",
        "--evalset",
        tmp_path / "evalset.json",
        "--config",
        tmp_path / "config.json",
        "--format",
        "json",
    ]

    # while the server holds the file: read through its query endpoint
    through_server = run_cli(*args, "--out", tmp_path / "served", "--no-record")
    assert through_server.exit_code == 1, through_server.output  # the failing case fails offline too
    served = read_report(tmp_path / "served")
    assert _scores(served) == _scores(live)
    assert all(r.metadata["match_strategy"] == "case_id" for r in served.results)

    # after the server stops: the file itself, and the run recorded in it
    assert server.terminate() == 0
    from_file = run_cli(*args, "--out", tmp_path / "file")
    assert from_file.exit_code == 1, from_file.output
    offline = read_report(tmp_path / "file")
    assert _scores(offline) == _scores(live)
    recorded = [(r[1], r[2], r[3]) for r in eval_runs(tmp_path / "store.duckdb")]
    assert recorded == [("eval_set", len(passed), sum(passed))]
