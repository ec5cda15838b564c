"""``evaluate_sync`` in both forms: the seed's classmethod and the instance call with ``evaluate``'s arguments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.capture_agents import single_case
from tracegrade import AgentEvaluator, CriteriaConfig, CriterionConfig, EvalConfig, EvalSet, ReporterConfig
from tracegrade.capture.collector import TrajectoryCollector


def rouge_config(**reporter: object) -> EvalConfig:
    return EvalConfig(
        criteria=CriteriaConfig(rouge_match=CriterionConfig.rouge_match(1.0)),
        reporter=ReporterConfig(**{"enabled": False, **reporter}),
    )


EVAL_SET = EvalSet(eval_set_id="sync-forms", eval_cases=[single_case("c1", "hey", "HEY"), single_case("c2", "a", "A")])


def test_the_instance_form_takes_evaluates_arguments(tmp_path: Path):
    evaluator = AgentEvaluator(str.upper, TrajectoryCollector(), rouge_config(console=False, html=False))
    report = evaluator.evaluate_sync(EVAL_SET, parallel=True, max_concurrency=2)
    assert report.passed and [r.actual_response for r in report.results] == ["HEY", "A"]

    reported = AgentEvaluator(str.upper, config=rouge_config(enabled=True, console=False, html=False))
    reported.evaluate_sync(EVAL_SET, output_dir=tmp_path / "out")
    assert json.loads(next((tmp_path / "out").glob("*.json")).read_text())["eval_set_id"] == "sync-forms"


def test_the_seed_classmethod_form_still_builds_the_evaluator():
    collector = TrajectoryCollector()
    report = AgentEvaluator.evaluate_sync(str.upper, collector, EVAL_SET, rouge_config(), verbose=False)
    assert report.passed and len(report.results) == 2


async def test_both_forms_refuse_a_running_event_loop():
    evaluator = AgentEvaluator(str.upper, config=rouge_config())
    with pytest.raises(RuntimeError, match="inside a running event loop"):
        evaluator.evaluate_sync(EVAL_SET)
    with pytest.raises(RuntimeError, match="inside a running event loop"):
        AgentEvaluator.evaluate_sync(str.upper, None, EVAL_SET, rouge_config())
