"""AgentEvaluator with plain callables traced by trace_node / trace_tool: grading, parallel attribution,
timeouts, agent errors, refusals before any agent runs, multi-turn accumulation, session input, reporters."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import context as otel_context

from tests.support.capture_agents import function_graph, single_case
from tracegrade import (
    AgentEvaluator,
    CriteriaConfig,
    CriterionConfig,
    EvalConfig,
    EvalSet,
    ReporterConfig,
    ToolCall,
    TrajectoryCollector,
    make_trajectory_callback,
    trace_node,
    trace_tool,
)
from tracegrade.capture import current_tracer
from tracegrade.capture import semconv as tg
from tracegrade.errors import EvalSetError, NoCriteriaError
from tracegrade.models import EvalCase, Invocation, SessionInput

NO_REPORTS = ReporterConfig(enabled=False)


@contextmanager
def fresh_trace() -> Iterator[None]:
    """Start a new root span with an empty parent context, as some instrumentations do."""
    with current_tracer().start_as_current_span("fresh-root", context=otel_context.Context()) as span:
        assert span.parent is None
        yield


def graded_config(**overrides: Any) -> EvalConfig:
    criteria = CriteriaConfig(
        trajectory=CriterionConfig.trajectory(check_args=True),
        node_order=CriterionConfig.node_order(),
        rouge_match=CriterionConfig.rouge_match(threshold=0.9),
    )
    return EvalConfig(criteria=criteria, reporter=NO_REPORTS, **overrides)


def trajectory_only(**overrides: Any) -> EvalConfig:
    return EvalConfig(
        criteria=CriteriaConfig(trajectory=CriterionConfig.trajectory(check_args=True)),
        reporter=NO_REPORTS,
        **overrides,
    )


def scores(result) -> dict[str, float]:
    return {c.criterion: c.score for c in result.criterion_results}


async def test_function_graph_is_graded_on_tools_nodes_and_response():
    eval_set = EvalSet(
        eval_set_id="fg",
        eval_cases=[
            single_case(
                "search",
                "find cats",
                "Answer: ['cats-0', 'cats-1']",
                [ToolCall(name="search", args={"query": "cats", "limit": 2})],
                ["planner", "responder"],
            ),
            single_case(
                "add",
                "add 2 and 3",
                "Answer: 5.0",
                [ToolCall(name="calculator", args={"a": 2.0, "b": 3.0})],
                ["planner", "responder"],
            ),
            single_case(
                "wrong",
                "find dogs",
                "Answer: 42",
                [ToolCall(name="calculator", args={"a": 1, "b": 1})],
                ["planner", "calculator", "responder"],
            ),
        ],
    )
    report = await AgentEvaluator(function_graph, config=graded_config()).evaluate(eval_set)

    search, add, wrong = report.results
    assert search.passed and add.passed and not wrong.passed
    assert scores(search) == {"tool_trajectory_avg_score": 1.0, "node_order_score": 1.0, "rouge_match": 1.0}
    assert search.actual_tool_calls[0].result == ["cats-0", "cats-1"]
    assert search.node_visits == ["planner", "responder"]
    assert add.actual_tool_calls[0].args == {"a": 2.0, "b": 3.0}
    assert add.actual_response == "Answer: 5.0"
    wrong_scores = scores(wrong)
    assert wrong_scores["tool_trajectory_avg_score"] == 0.0 and wrong_scores["rouge_match"] < 0.9
    trajectory = wrong.get_criterion_result("tool_trajectory_avg_score")
    assert trajectory.details["missing"][0]["name"] == "calculator"
    assert [e["name"] for e in trajectory.details["extra"]] == ["search"]
    assert wrong.get_criterion_result("node_order_score").details["actual_node_order"] == ["planner", "responder"]
    assert report.summary.passed_cases == 2 and report.summary.failed_cases == 1


async def test_fifty_parallel_cases_are_each_attributed_to_their_own_spans():
    handled: list[str] = []

    @trace_tool("fetch")
    async def fetch(item: str, shard: int) -> str:
        await asyncio.sleep(random.random() / 200)
        return f"{item}@{shard}"

    @trace_node("worker")
    async def worker(message: str) -> str:
        item = message.split()[-1]
        shard = int(item.split("-")[1]) % 7
        first = await fetch(item, shard)
        with fresh_trace():  # a framework forcing a new trace inside the case: attributed through baggage
            second = await fetch(item + "-again", shard)
        handled.append(item)
        return f"{first} {second}"

    cases = [
        single_case(
            f"case-{i}",
            f"fetch item-{i}",
            f"item-{i}@{i % 7} item-{i}-again@{i % 7}",
            [
                ToolCall(name="fetch", args={"item": f"item-{i}", "shard": i % 7}),
                ToolCall(name="fetch", args={"item": f"item-{i}-again", "shard": i % 7}),
            ],
            ["worker"],
        )
        for i in range(50)
    ]
    config = graded_config()
    report = await AgentEvaluator(worker, config=config).evaluate(
        EvalSet(eval_set_id="par", eval_cases=cases), parallel=True, max_concurrency=8
    )

    assert len(handled) == 50
    assert [r.eval_id for r in report.results] == [c.eval_id for c in cases]
    for i, result in enumerate(report.results):
        assert [tc.args for tc in result.actual_tool_calls] == [
            {"item": f"item-{i}", "shard": i % 7},
            {"item": f"item-{i}-again", "shard": i % 7},
        ], result.eval_id
        assert result.passed, (result.eval_id, scores(result))
        assert len(result.trace_ids) == 2  # the turn's trace and the fresh one


async def test_a_timed_out_case_is_an_error_and_the_others_continue():
    started: list[str] = []

    async def agent(message: str) -> str:
        started.append(message)
        with trace_tool("echo", arguments={"message": message}):
            if message == "hang":
                await asyncio.sleep(30)
        return message

    def sync_agent(message: str) -> str:
        with trace_tool("echo", arguments={"message": message}):
            if message == "hang":
                time.sleep(1.0)  # a worker thread cannot be cancelled; the case still times out
        return message

    for candidate in (agent, sync_agent):
        cases = [single_case(m, m, m, [ToolCall(name="echo", args={"message": m})]) for m in ("a", "hang", "b")]
        report = await AgentEvaluator(candidate, config=trajectory_only(timeout=0.3)).evaluate(
            EvalSet(eval_set_id="t", eval_cases=cases), parallel=True
        )
        a, hung, b = report.results
        assert a.passed and b.passed
        assert hung.error == "timed out after 0.3s" and not hung.passed and hung.criterion_results == []
        assert report.summary.error_cases == 1
    assert started == ["a", "hang", "b"]


def test_a_sync_agent_that_never_returns_does_not_keep_the_run_from_ending():
    # its thread cannot be stopped; evaluate_sync (asyncio.run) must still return once the case times out
    release = threading.Event()

    def stuck_agent(message: str) -> str:
        with trace_tool("echo", arguments={"message": message}):
            if message == "hang":
                release.wait(120)
        return message

    cases = [single_case(m, m, m, [ToolCall(name="echo", args={"message": m})]) for m in ("hang", "b")]
    reports: list[Any] = []
    runner = threading.Thread(
        target=lambda: reports.append(
            AgentEvaluator(stuck_agent, config=trajectory_only(timeout=0.3)).evaluate_sync(
                EvalSet(eval_set_id="t", eval_cases=cases)
            )
        ),
        daemon=True,
    )
    runner.start()
    runner.join(60)
    ended = not runner.is_alive()
    release.set()  # let the agent's thread go either way
    assert ended, "evaluate_sync waited for the hung agent's thread"
    hung, b = reports[0].results
    assert hung.error == "timed out after 0.3s" and b.passed


async def test_an_agent_exception_becomes_that_cases_error_with_what_was_captured():
    async def agent(message: str, history: list[dict[str, Any]]) -> str:
        with trace_tool("step", arguments={"message": message}):
            pass
        if message == "explode":
            raise RuntimeError("kaboom")
        return "fine"

    broken = EvalCase(eval_id="broken", conversation=[Invocation.simple("hello"), Invocation.simple("explode")])
    ok = single_case("ok", "hello", "fine", [ToolCall(name="step", args={"message": "hello"})])
    report = await AgentEvaluator(agent, config=trajectory_only()).evaluate(
        EvalSet(eval_set_id="e", eval_cases=[broken, ok])
    )
    failed, passed = report.results
    assert failed.error.startswith("Agent error on turn 1: RuntimeError: kaboom (at ") and not failed.passed
    assert failed.error.endswith(", in agent)") and "test_evaluator.py:" in failed.error  # the agent's own line
    assert [tc.args["message"] for tc in failed.actual_tool_calls] == ["hello", "explode"]
    assert passed.passed and passed.error is None


async def test_refusals_happen_before_any_agent_runs(tmp_path: Path):
    calls: list[str] = []

    def agent(message: str) -> str:
        calls.append(message)
        return message

    one_case = EvalSet(eval_set_id="x", eval_cases=[single_case("c", "hi", "hi")])
    with pytest.raises(NoCriteriaError, match="enables no criterion"):
        await AgentEvaluator(agent, config=EvalConfig(reporter=NO_REPORTS)).evaluate(one_case)
    disabled = EvalConfig(criteria=CriteriaConfig(rouge_match=CriterionConfig(enabled=False)), reporter=NO_REPORTS)
    with pytest.raises(NoCriteriaError):
        await AgentEvaluator(agent, config=disabled).evaluate_case(one_case.eval_cases[0])
    with pytest.raises(EvalSetError, match="no cases"):
        await AgentEvaluator(agent, config=trajectory_only()).evaluate(EvalSet(eval_set_id="empty"))
    missing = tmp_path / "nope.json"
    with pytest.raises(FileNotFoundError, match=f"Eval set file not found: {missing}"):
        await AgentEvaluator(agent, config=trajectory_only()).evaluate(str(missing))
    assert calls == []


async def test_multi_turn_executions_accumulate_across_turns():
    async def agent(message: str, history: list[dict[str, Any]]) -> str:
        with trace_node("chat"), trace_tool("remember", arguments={"turn": len(history) // 2, "text": message}):
            pass
        return f"reply {len(history) // 2}: {message}"

    case = EvalCase(
        eval_id="conv",
        conversation=[
            Invocation.simple(
                "first", "reply 0: first", [ToolCall(name="remember", args={"turn": 0, "text": "first"})], ["chat"]
            ),
            Invocation.simple(
                "second", "reply 1: second", [ToolCall(name="remember", args={"turn": 1, "text": "second"})], ["chat"]
            ),
        ],
    )
    result = await AgentEvaluator(agent, config=graded_config()).evaluate_case(case)
    assert result.passed, scores(result)
    assert [tc.args for tc in result.actual_tool_calls] == [{"turn": 0, "text": "first"}, {"turn": 1, "text": "second"}]
    assert result.node_visits == ["chat", "chat"]
    assert result.actual_response == "reply 1: second"
    assert [(t["turn_index"], t["user_input"], t["agent_response"]) for t in result.turn_results] == [
        (0, "first", "reply 0: first"),
        (1, "second", "reply 1: second"),
    ]
    assert len(set(result.trace_ids)) == 2


async def test_session_state_config_and_user_id_reach_a_plain_callable():
    seen: list[tuple[dict, dict]] = []

    def agent(message: str, state: dict[str, Any], config: dict[str, Any]) -> str:
        seen.append((dict(state), dict(config)))
        state["visits"] = state.get("visits", 0) + 1  # state persists across the case's turns
        return "ok"

    case = EvalCase(
        eval_id="s1",
        conversation=[Invocation.simple("a"), Invocation.simple("b")],
        session_input=SessionInput(user_id="alice", state={"tier": "gold"}, config={"locale": "fr"}),
    )
    config = EvalConfig(
        criteria=CriteriaConfig(contains_keywords=CriterionConfig.contains_keywords(["ok"])), reporter=NO_REPORTS
    )
    result = await AgentEvaluator(agent, config=config).evaluate_case(case)
    assert result.passed
    (state0, config0), (state1, config1) = seen
    assert state0 == {"tier": "gold"} and state1 == {"tier": "gold", "visits": 1}
    assert config0["user_id"] == "alice" and config0["locale"] == "fr"
    assert config0["thread_id"].startswith("eval_") and config0["thread_id"].endswith("_s1")
    assert config1 == config0


async def test_a_collector_attached_by_hand_and_sequential_lost_context_threads():
    collector = TrajectoryCollector()
    _, provider = make_trajectory_callback(collector, {"thread_id": "t-1", "run_id": "run-fixed"})
    tracer = provider.get_tracer("app")

    def agent(message: str) -> str:
        import threading

        def background() -> None:  # a plain thread: the case context (and the helpers' provider) is lost
            with tracer.start_as_current_span("bg_tool") as span:
                span.set_attributes(
                    {tg.SPAN_KIND: "tool", tg.TOOL_NAME: "bg_tool", tg.TOOL_ARGUMENTS: json.dumps({"m": message})}
                )

        worker = threading.Thread(target=background)
        worker.start()
        worker.join()
        return "done"

    cases = [single_case(f"c{i}", f"m{i}", "done", [ToolCall(name="bg_tool", args={"m": f"m{i}"})]) for i in range(3)]
    report = await AgentEvaluator(agent, collector, config=trajectory_only()).evaluate(
        EvalSet(eval_set_id="bg", eval_cases=cases), parallel=False
    )
    assert [r.passed for r in report.results] == [True, True, True]
    assert report.metadata["run_id"] == "run-fixed"
    assert collector.spans_for() == []  # graded cases are released


async def test_reporters_run_into_output_dir_and_evaluate_file_wires_capture(tmp_path: Path, monkeypatch):
    module = tmp_path / "my_agent.py"
    module.write_text(
        "from tracegrade import trace_tool\n"
        "@trace_tool\n"
        "def shout(text: str) -> str:\n"
        "    return text.upper()\n"
        "def app(message: str) -> str:\n"
        "    return shout(message)\n"
    )
    eval_file = tmp_path / "set.json"
    EvalSet(
        eval_set_id="file-set",
        eval_cases=[single_case("c1", "hey", "HEY", [ToolCall(name="shout", args={"text": "hey"})])],
    ).to_file(eval_file)
    config_file = tmp_path / "config.json"
    config = EvalConfig(
        criteria=CriteriaConfig(
            trajectory=CriterionConfig.trajectory(check_args=True), rouge_match=CriterionConfig.rouge_match(1.0)
        ),
        reporter=ReporterConfig(output_dir=str(tmp_path / "reports"), console=False, timestamp_files=False),
    )
    config.to_file(config_file)
    monkeypatch.chdir(tmp_path)
    report = await AgentEvaluator.evaluate_file(str(module), str(eval_file), str(config_file))
    assert report.passed and report.results[0].actual_tool_calls[0].result == "HEY"
    written = json.loads(next((tmp_path / "reports").glob("*.json")).read_text())
    assert written["eval_set_id"] == "file-set"

    with pytest.raises(RuntimeError, match="inside a running event loop"):
        AgentEvaluator.evaluate_sync(str.upper, None, eval_file, config)


def test_evaluate_sync_runs_the_reporters_into_output_dir(tmp_path: Path):
    eval_file = tmp_path / "set.json"
    EvalSet(eval_set_id="sync-set", eval_cases=[single_case("c1", "hey", "HEY")]).to_file(eval_file)
    out = tmp_path / "reports"
    config = EvalConfig(
        criteria=CriteriaConfig(rouge_match=CriterionConfig.rouge_match(1.0)),
        reporter=ReporterConfig(output_dir=str(out), console=False, html=False, timestamp_files=False),
    )
    report = AgentEvaluator.evaluate_sync(str.upper, None, eval_file, config)
    assert report.passed and report.results[0].actual_response == "HEY"
    assert json.loads(next(out.glob("*.json")).read_text())["eval_set_id"] == "sync-set"


def test_an_unsupported_agent_is_refused_clearly():
    with pytest.raises(TypeError, match="cannot evaluate an agent of type int"):
        AgentEvaluator(42, config=trajectory_only())
