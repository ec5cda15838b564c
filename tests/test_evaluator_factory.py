"""The evaluator-factory seam: one call per run with the compiled criteria, shared by live and offline grading,
and a configuration without criteria refused before any agent runs or any trace is read."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.support.grading_traces import AgentRun, fill_store
from tracegrade import trace_tool
from tracegrade.criteria.base import BaseCriterion
from tracegrade.errors import NoCriteriaError, StoreError
from tracegrade.evaluation.engine import Grader, default_evaluator_factory
from tracegrade.evaluation.evaluator import AgentEvaluator
from tracegrade.evaluation.offline import TraceGrader
from tracegrade.evaluation.selection import TraceSelection
from tracegrade.models import EvalCase, EvalSet, Invocation, ToolCall
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.results import CriterionResult

CONFIG = EvalConfig(
    criteria=CriteriaConfig(
        tool_name_match=CriterionConfig.tool_name_match(),
        node_order=CriterionConfig.node_order(),
        contains_keywords=CriterionConfig.contains_keywords(["done"]),
    )
)
CONFIG.reporter.enabled = False


class CountingFactory:
    """Wraps the default factory: counts calls, keeps the criteria it got, and counts graded cases."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.graded: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, criteria: Sequence[BaseCriterion]) -> Grader:
        with self._lock:
            self.calls.append([c.name for c in criteria])
        inner = default_evaluator_factory(criteria)
        factory = self

        class Wrapped:
            async def grade(self, actual: ExecutionResult, case: EvalCase) -> list[CriterionResult]:
                factory.graded.append(case.eval_id)
                return await inner.grade(actual, case)

        return Wrapped()


agent_calls: list[str] = []


async def agent(message: str) -> str:
    agent_calls.append(message)
    with trace_tool("lookup", arguments={"q": message}) as span:
        span.set_result("found")
    return f"done: {message}"


EVAL_SET = EvalSet(
    eval_set_id="factory",
    eval_cases=[
        EvalCase(eval_id=f"c{i}", conversation=[Invocation.simple(f"q{i}", None, [ToolCall(name="lookup")])])
        for i in range(3)
    ],
)
NAMES = ["tool_name_match_score", "node_order_score", "contains_keywords"]


def test_live_run_calls_the_factory_once_with_the_compiled_criteria() -> None:
    factory = CountingFactory()
    report = asyncio.run(AgentEvaluator(agent, config=CONFIG, evaluator_factory=factory).evaluate(EVAL_SET))
    assert factory.calls == [NAMES]
    assert sorted(factory.graded) == ["c0", "c1", "c2"]
    assert len(report.results) == 3


@pytest.fixture
def store(tmp_path: Path):
    runs = [
        AgentRun(i + 1, f"q{i}", "done", [("lookup", {"q": f"q{i}"})], case_id=f"c{i}", start_offset_s=i)
        for i in range(3)
    ]
    with fill_store(tmp_path / "store.duckdb", runs) as opened:
        yield opened


def test_offline_grading_goes_through_the_same_seam(store) -> None:
    factory = CountingFactory()
    grader = TraceGrader(store, CONFIG, evaluator_factory=factory)
    report = grader.grade_eval_set_sync(EVAL_SET)
    assert factory.calls == [NAMES] and sorted(factory.graded) == ["c0", "c1", "c2"]
    assert report.passed
    grader.grade_traces_sync(TraceSelection())
    # a second run, one more call: reference-free runs get only the criteria that need no case
    assert factory.calls == [NAMES, ["contains_keywords"]]


def test_no_criteria_is_refused_before_any_agent_runs() -> None:
    factory = CountingFactory()
    agent_calls.clear()
    evaluator = AgentEvaluator(agent, config=EvalConfig(criteria=CriteriaConfig()), evaluator_factory=factory)
    with pytest.raises(NoCriteriaError, match="enables no criterion"):
        asyncio.run(evaluator.evaluate(EVAL_SET))
    assert agent_calls == [] and factory.calls == []


def test_no_criteria_is_refused_before_any_trace_is_read(store) -> None:
    factory = CountingFactory()
    store.close()  # any read would now raise StoreError: the refusal must come first
    grader = TraceGrader(store, EvalConfig(criteria=CriteriaConfig()), evaluator_factory=factory)
    for attempt in (lambda: grader.grade_eval_set_sync(EVAL_SET), lambda: grader.grade_traces_sync(TraceSelection())):
        with pytest.raises(NoCriteriaError):
            attempt()
    assert factory.calls == []
    with pytest.raises(StoreError, match="closed"):  # the store really was unreadable
        TraceGrader(store, CONFIG).grade_eval_set_sync(EVAL_SET)


def test_a_factory_returning_nothing_is_refused(store) -> None:
    with pytest.raises(TypeError, match="returned None"):
        TraceGrader(store, CONFIG, evaluator_factory=lambda criteria: None).grade_eval_set_sync(EVAL_SET)
