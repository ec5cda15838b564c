"""Offline grading with an LLM judge grades several cases at once (up to ``judge_max_concurrency`` judge calls),
as a live run does, instead of waiting out each judge call before the next case: a real local judge over
litellm and HTTP, which counts the requests it answers at the same time."""

from __future__ import annotations

from pathlib import Path

from tests.support.grading_traces import AgentRun, fill_store
from tests.support.judges_setup import fresh_server, judge_config, scripted_server  # noqa: F401
from tests.support.llm_server import LLMServer, Reply
from tracegrade.evaluation.offline import TraceGrader
from tracegrade.evaluation.selection import TraceSelection
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.models.dataset import EvalCase, EvalSet

CASES = 8
AT_ONCE = 3


def _runs(stamped: bool) -> list[AgentRun]:
    """Each test's replies differ from the others', so no judge verdict comes from the process's cache."""
    kind = "stamped" if stamped else "production"
    return [
        AgentRun(
            n, f"Question {n}?", f"Answer {n}, {kind}.", case_id=f"case-{n}" if stamped else None, start_offset_s=n
        )
        for n in range(1, CASES + 1)
    ]


def _config(server: LLMServer) -> EvalConfig:
    criteria = CriteriaConfig(
        safety=judge_config(server, threshold=0.5),
        contains_keywords=CriterionConfig.contains_keywords(["Answer"]),  # a criterion with no judge beside it
    )
    return EvalConfig(criteria=criteria, judge_max_concurrency=AT_ONCE, judge_cache=False)  # every verdict asked for


def _slow_judge(server: LLMServer) -> None:
    server.latency = 0.4  # each call held open long enough for the next ones to arrive meanwhile
    server.responder = lambda request: Reply.score(1.0, "safe")


def test_reference_free_grading_judges_traces_at_once_within_the_limit(server: LLMServer, tmp_path: Path) -> None:
    _slow_judge(server)
    with fill_store(tmp_path / "store.duckdb", _runs(stamped=False)) as store:
        report = TraceGrader(store, _config(server)).grade_traces_sync(TraceSelection())
    assert sorted(r.eval_id for r in report.results) == sorted(f"trace-{n:032x}" for n in range(1, CASES + 1))
    assert all(r.passed for r in report.results), [r.error for r in report.results]
    assert len(server.requests) == CASES
    assert 2 <= server.max_in_flight <= AT_ONCE


def test_eval_set_grading_judges_cases_at_once_and_keeps_their_order(server: LLMServer, tmp_path: Path) -> None:
    _slow_judge(server)
    cases = [EvalCase.single_turn(f"case-{n}", f"Question {n}?") for n in range(CASES, 0, -1)]
    with fill_store(tmp_path / "store.duckdb", _runs(stamped=True)) as store:
        report = TraceGrader(store, _config(server)).grade_eval_set_sync(
            EvalSet(eval_set_id="support", eval_cases=cases)
        )
    assert [r.eval_id for r in report.results] == [c.eval_id for c in cases]  # the eval set's order
    assert all(r.passed for r in report.results), [r.error for r in report.results]
    assert len(server.requests) == CASES
    assert 2 <= server.max_in_flight <= AT_ONCE


def test_grading_without_a_judge_stays_one_case_after_another(tmp_path: Path) -> None:
    config = EvalConfig(criteria=CriteriaConfig(contains_keywords=CriterionConfig.contains_keywords(["Answer"])))
    with fill_store(tmp_path / "store.duckdb", _runs(stamped=False)) as store:
        report = TraceGrader(store, config).grade_traces_sync(TraceSelection())
    assert [r.passed for r in report.results] == [True] * CASES
