"""An ADK user's files and traces read without google-adk (tests/test_qa15_adk_interop.py checks the same against
google-adk itself): a call made inside another tool call is left out of ADK's trajectory, ADK's judge metrics
keep ADK's sample count, a thought part is kept for writing back, and an old test file's empty initial session
is no session input, as in ADK's migration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.mapper_spans import adk_agent_tool_trace
from tracegrade.criteria.adk_scoring import AdkTrajectoryCriterion
from tracegrade.criteria.trajectory_match import TrajectoryMatchCriterion
from tracegrade.models.adk_files import eval_set_from_adk, eval_set_to_adk
from tracegrade.models.config import CriterionConfig, EvalConfig
from tracegrade.models.dataset import EvalCase, EvalSet, StepType
from tracegrade.trajectory import map_spans


def test_a_call_made_inside_another_tool_call_is_not_in_adks_trajectory() -> None:
    execution = map_spans(adk_agent_tool_trace())
    assert [c.name for c in execution.tool_calls] == ["forecaster", "get_weather", "lookup"]
    steps = {s.name: s.metadata for s in execution.trajectory if s.step_type == StepType.TOOL}
    assert steps["get_weather"]["within_tool"] == steps["forecaster"]["span_id"]
    assert "within_tool" not in steps["forecaster"] and "within_tool" not in steps["lookup"]
    case = EvalCase.model_validate(
        {
            "eval_id": "routes",
            "conversation": [
                {
                    "user_content": {"role": "user", "content": "Bergen?"},
                    "expected_tool_trajectory": [
                        {"name": "forecaster", "args": {"request": "Bergen"}},
                        {"name": "lookup", "args": {"city": "Bergen"}},
                    ],
                }
            ],
        }
    )
    adk = AdkTrajectoryCriterion(CriterionConfig(threshold=1.0, check_args=True, scoring="adk"))
    result = adk.evaluate_sync(execution, case)
    assert result.score == 1.0, result.details
    assert result.details["invocations"][0]["actual"] == [
        {"name": "forecaster", "args": {"request": "Bergen"}},
        {"name": "lookup", "args": {"city": "Bergen"}},
    ]
    # tracegrade's own rules still see every call of the run
    ours = TrajectoryMatchCriterion(CriterionConfig(threshold=1.0, check_args=True)).evaluate_sync(execution, case)
    assert ours.score < 1.0


def _write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_adk_judge_metrics_without_a_sample_count_take_adks_five(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "test_config.json",
        {
            "criteria": {
                "final_response_match_v2": 0.8,
                "rubric_based_final_response_quality_v1": {
                    "threshold": 0.7,
                    "judge_model_options": {"judge_model": "gemini-2.5-pro"},
                    "rubrics": [{"rubric_id": "polite", "rubric_content": {"text_property": "The reply is polite."}}],
                },
                "hallucinations_v1": {"threshold": 0.9, "judge_model_options": {"num_samples": 2}},
            }
        },
    )
    slots = dict(EvalConfig.from_file(path).criteria.enabled_slots())
    assert (slots["llm_judge"].judge_model, slots["llm_judge"].num_samples) == ("gemini-2.5-flash", 5)
    assert (slots["rubric_based"].judge_model, slots["rubric_based"].num_samples) == ("gemini-2.5-pro", 5)
    assert slots["hallucination"].num_samples == 2  # a count the file gives is kept


_TURN = {"invocation_id": "i1", "user_content": {"role": "user", "parts": [{"text": "Bergen?"}]}}


def test_a_thought_part_is_text_and_is_written_back_as_a_thought() -> None:
    parts = [
        {"text": "Checking the forecast first.", "thought": True},
        {"text": "Rain in Bergen.", "thought_signature": "c2ln"},
        {"text": "Take an umbrella."},
    ]
    final = {"role": "model", "parts": parts}
    data = {"eval_set_id": "s", "eval_cases": [{"eval_id": "t", "conversation": [{**_TURN, "final_response": final}]}]}
    eval_set = eval_set_from_adk(data, "s.evalset.json")
    response = eval_set.eval_cases[0].conversation[0].expected_final_response
    assert response is not None
    assert response.get_text() == "Checking the forecast first. Rain in Bergen. Take an umbrella."
    written = eval_set_to_adk(eval_set)
    assert written["eval_cases"][0]["conversation"][0]["final_response"] == final
    assert eval_set_from_adk(written) == eval_set
    alone = {"role": "model", "parts": [parts[0]]}  # one part that is more than text is not plain text
    data["eval_cases"][0]["conversation"][0]["final_response"] = alone
    written = eval_set_to_adk(eval_set_from_adk(data, "s.evalset.json"))
    assert written["eval_cases"][0]["conversation"][0]["final_response"] == alone


def test_an_old_test_files_empty_initial_session_is_no_session_input() -> None:
    old = [{"name": "roll", "data": [{"query": "Roll a die", "reference": "4"}], "initial_session": {}}]
    written = eval_set_to_adk(eval_set_from_adk(old, "dice.test.json"))
    assert "session_input" not in written["eval_cases"][0]  # ADK then runs it under its own app and user names
    old[0]["initial_session"] = {"state": {"sides": 6}}
    [case] = eval_set_from_adk(old, "dice.test.json").eval_cases
    assert case.session_input.state == {"sides": 6}
    assert eval_set_to_adk(EvalSet(eval_set_id="d", eval_cases=[case]))["eval_cases"][0]["session_input"]["state"] == {
        "sides": 6
    }
