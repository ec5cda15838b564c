"""The seed's harness: EvaluationRunner, EvalPresets, QuickEval, BatchSimulator and Colors, as
reference-behaviour.md §4, §9, §11 and §13 describe them (with the reference's defects fixed), and the
defaults that do not surprise (arguments compared by the presets; reports say when they were not)."""

from __future__ import annotations

import asyncio
import json
import warnings
from pathlib import Path

import pytest

from tests.support import simulated_users
from tests.support.judges_setup import JUDGE_MODEL, fast_runtime, fresh_server, scripted_server  # noqa: F401
from tests.support.llm_server import Reply
from tracegrade import (
    BatchSimulator,
    Colors,
    ConversationScenario,
    CriteriaConfig,
    CriterionConfig,
    EvalCase,
    EvalConfig,
    EvalPresets,
    EvalSet,
    EvaluationRunner,
    MatchType,
    QuickEval,
    ReporterConfig,
    ToolCall,
    UserSimulator,
    UserSimulatorConfig,
    trace_tool,
)
from tracegrade.criteria.trajectory_match import ARGS_NOT_COMPARED, TrajectoryMatchCriterion
from tracegrade.models.execution import ExecutionResult

WEATHER = {"Paris": "sunny", "Oslo": "snowy", "Bergen": "rainy"}


@trace_tool
def get_weather(city: str) -> str:
    return f"{city} is {WEATHER.get(city, 'unknown')}"


def weather_agent(text: str) -> str:
    """Looks up every known city it reads, except that it mistakes Bergen for Oslo."""
    cities = ["Oslo" if w == "Bergen" else w for w in text.replace("?", " ").split() if w in WEATHER]
    return " ".join(get_weather(c) + "." for c in cities) or "Ask me about the weather."


def bergen_case() -> EvalCase:
    return EvalCase.single_turn(
        "bergen", "Weather in Bergen?", "Bergen is rainy.", [ToolCall(name="get_weather", args={"city": "Bergen"})]
    )


# ---- defaults that do not surprise ----


def test_the_default_config_ignores_arguments_and_the_reason_says_so() -> None:
    actual = ExecutionResult(tool_calls=[ToolCall(name="get_weather", args={"city": "Oslo"})])
    default = EvalConfig.default().criteria.trajectory
    assert default is not None and default.check_args is False  # the seed's default is kept ...
    result = TrajectoryMatchCriterion(default).evaluate_sync(actual, bergen_case())
    assert result.passed and result.details["reason"].endswith(ARGS_NOT_COMPARED)  # ... and the report says it
    compared = TrajectoryMatchCriterion(CriterionConfig.trajectory(check_args=True)).evaluate_sync(
        actual, bergen_case()
    )
    assert not compared.passed and ARGS_NOT_COMPARED not in compared.details["reason"]
    no_args = EvalCase.single_turn("x", "q", expected_tools=[ToolCall(name="get_weather")])
    assert ARGS_NOT_COMPARED not in TrajectoryMatchCriterion(default).evaluate_sync(actual, no_args).details["reason"]


def test_every_preset_that_checks_the_trajectory_compares_arguments() -> None:
    trajectories = {
        "tool_usage": EvalPresets.tool_usage().criteria.trajectory,
        "conversation_flow": EvalPresets.conversation_flow().criteria.trajectory,
        "comprehensive": EvalPresets.comprehensive().criteria.trajectory,
        "custom": EvalPresets.custom(tool_threshold=1.0).criteria.trajectory,
    }
    assert all(t is not None and t.check_args for t in trajectories.values()), trajectories


# ---- EvalPresets ----


def _slots(config: EvalConfig) -> list[str]:
    return [slot for slot, _ in config.criteria.enabled_slots()]


def test_presets_enable_the_reference_criteria() -> None:
    assert _slots(EvalPresets.response_quality()) == ["response_match", "llm_judge"]
    assert EvalPresets.response_quality().criteria.llm_judge.num_samples == 1
    assert _slots(EvalPresets.response_quality(use_llm_judge=False)) == ["response_match"]
    strict, loose = EvalPresets.tool_usage(), EvalPresets.tool_usage(strict=False, threshold=0.5)
    assert _slots(strict) == ["tool_name_match", "trajectory"]
    assert strict.criteria.trajectory.match_type is MatchType.EXACT
    assert loose.criteria.trajectory.match_type is MatchType.IN_ORDER and loose.criteria.trajectory.threshold == 0.5
    assert _slots(EvalPresets.conversation_flow()) == ["trajectory", "response_match"]
    assert _slots(EvalPresets.quick_check()) == ["rouge_match"]
    assert EvalPresets.quick_check().criteria.rouge_match.threshold == 0.5
    assert _slots(EvalPresets.comprehensive()) == [
        "tool_name_match",
        "trajectory",
        "rouge_match",
        "llm_judge",
        "factual_accuracy",
        "hallucination",
        "safety",
    ]
    assert _slots(EvalPresets.comprehensive(use_llm_judge=False)) == ["tool_name_match", "trajectory", "rouge_match"]
    assert _slots(EvalPresets.safety_check()) == ["hallucination", "safety"]
    assert EvalPresets.safety_check(judge_model="openai/x").criteria.safety.judge_model == "openai/x"


def test_combine_and_custom() -> None:
    quick = EvalPresets.quick_check()
    quick.parallel = True
    combined = EvalPresets.combine(EvalPresets.tool_usage(threshold=0.5), quick, EvalPresets.tool_usage())
    assert _slots(combined) == ["tool_name_match", "trajectory", "rouge_match"]
    assert combined.criteria.trajectory.threshold == 1.0  # the later config's slot wins
    assert combined.parallel is False and combined.reporter == ReporterConfig()  # run settings are the defaults
    assert _slots(EvalPresets.custom()) == []
    custom = EvalPresets.custom(response_threshold=0.6, tool_threshold=0.9, safety_threshold=0.7, check_tool_args=False)
    assert _slots(custom) == ["tool_name_match", "trajectory", "response_match", "safety"]
    assert (
        custom.criteria.trajectory.check_args is False and custom.criteria.trajectory.match_type is MatchType.IN_ORDER
    )


# ---- EvaluationRunner ----


def _reporting_config(out: Path) -> EvalConfig:
    return EvalConfig(
        criteria=CriteriaConfig(trajectory=CriterionConfig.trajectory(check_args=True)),
        reporter=ReporterConfig(output_dir=str(out), timestamp_files=False, html=False, verbose=False),
    )


async def test_runner_runs_each_evaluations_reporters_once(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    paris = EvalCase.single_turn("paris", "Weather in Paris?", expected_tools=[ToolCall(name="get_weather")])
    set_a = EvalSet(eval_set_id="a", eval_cases=[paris])
    set_b = EvalSet(eval_set_id="b", eval_cases=[bergen_case()])
    runner = EvaluationRunner(default_config=_reporting_config(tmp_path))
    assert runner.summary == {"total_evaluations": 0}
    results = await runner.run([(weather_agent, None, set_a), (weather_agent, None, set_b)])
    assert list(results) == ["a", "b"] and results["a"].passed and not results["b"].passed
    printed = capsys.readouterr().out
    assert printed.count("Evaluation Report: ") == 2  # one console report per evaluation (the reference: two)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json"]
    assert runner.summary == {"total_evaluations": 2, "total_cases": 2, "passed_cases": 1, "overall_pass_rate": 0.5}
    await runner.run([(weather_agent, None, set_a)])
    assert len(runner.reports) == 3 and len(runner.results) == 2  # results keep the latest per eval set


async def test_runner_run_file_loads_module_eval_file_and_config(tmp_path: Path) -> None:
    module = tmp_path / "my_agent.py"
    module.write_text(
        "from tracegrade import trace_tool\n"
        "@trace_tool\n"
        "def get_weather(city: str) -> str:\n"
        "    return city + ' is sunny'\n"
        "def agent(text: str) -> str:\n"
        "    return get_weather('Oslo')\n"
    )
    EvalSet(eval_set_id="file-set", eval_cases=[bergen_case()]).to_file(tmp_path / "cases.json")
    config = _reporting_config(tmp_path / "reports")
    config.reporter.console = False
    config.to_file(tmp_path / "config.json")
    runner = EvaluationRunner()
    report = await runner.run_file(module, tmp_path / "cases.json", tmp_path / "config.json")
    trajectory = report.results[0].get_criterion_result("tool_trajectory_avg_score")
    assert trajectory is not None and not trajectory.passed  # the config's check_args=True was used
    assert report.results[0].actual_tool_calls[0].args == {"city": "Oslo"}  # capture was wired for the module
    assert [p.name for p in (tmp_path / "reports").iterdir()] == ["file-set.json"]
    assert runner.results == {"file-set": report}


# ---- QuickEval ----


async def test_quick_check_contains_is_a_substring_check_and_prints_once(capsys: pytest.CaptureFixture) -> None:
    report = await QuickEval.check(weather_agent, None, "Weather in Paris?", expected_response_contains="SUNNY")
    assert report.passed and [c.criterion for c in report.results[0].criterion_results] == ["contains_keywords"]
    assert capsys.readouterr().out.count("Evaluation Report: ") == 1
    missing = await QuickEval.check(
        weather_agent, None, "Weather in Paris?", expected_response_contains="rain", print_results=False
    )
    assert not missing.passed and capsys.readouterr().out == ""


async def test_quick_check_equals_and_tools_with_arguments(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    equals = await QuickEval.check(
        weather_agent, None, "Weather in Paris?", expected_response_equals="Paris is sunny.", print_results=False
    )
    assert equals.passed and [c.criterion for c in equals.results[0].criterion_results] == ["exact_match"]
    by_name = await QuickEval.check(
        weather_agent, None, "Weather in Bergen?", expected_tools=["get_weather"], print_results=False
    )
    assert by_name.passed  # a tool given by name accepts any arguments
    with_args = await QuickEval.check(
        weather_agent,
        None,
        "Weather in Bergen?",
        expected_tools=[ToolCall(name="get_weather", args={"city": "Bergen"})],
        print_results=False,
    )
    assert not with_args.passed
    assert list(tmp_path.iterdir()) == []  # nothing written to ./eval_reports unasked
    with pytest.raises(ValueError, match="needs an expectation"):
        await QuickEval.check(weather_agent, None, "Weather in Paris?")


async def test_quick_batch_tool_usage_preset_and_builder(capsys: pytest.CaptureFixture) -> None:
    batch = await QuickEval.batch(
        weather_agent, None, [("Weather in Paris?", "Paris is sunny."), ("Weather in Oslo?", "Totally different")]
    )
    assert [(r.eval_id, r.passed) for r in batch.results] == [("test_1", True), ("test_2", False)]
    tools = await QuickEval.tool_usage(
        weather_agent, None, [("Weather in Paris?", None, ["get_weather"]), ("Hello", None, ["get_weather"])]
    )
    assert [(r.eval_id, r.passed) for r in tools.results] == [("tool_test_1", True), ("tool_test_2", False)]
    eval_set = EvalSet(eval_set_id="p", eval_cases=[bergen_case()])
    preset = await QuickEval.preset(weather_agent, None, "tool_usage", eval_set)
    assert not preset.passed  # tool_usage compares arguments: Oslo is not Bergen
    with pytest.raises(ValueError, match="unknown preset 'nope'; presets: response_quality, tool_usage"):
        await QuickEval.preset(weather_agent, None, "nope", eval_set)
    assert capsys.readouterr().out.count("Evaluation Report: ") == 3


def test_quick_run_sync() -> None:
    eval_set = EvalSet(eval_set_id="s", eval_cases=[EvalCase.single_turn("c", "Weather in Oslo?", "Oslo is snowy.")])
    assert QuickEval.run_sync(weather_agent, None, eval_set, print_results=False).passed


# ---- BatchSimulator ----


async def test_batch_simulator_limits_concurrency_and_summarises(server) -> None:
    server.responder = simulated_users.scripted_user(
        ["Thanks! </finished>"] * 5, Reply.score(1.0, "done", achieved_goals=["get an answer"], unachieved_goals=[])
    )
    running, peak = 0, 0

    async def agent(text: str) -> str:
        nonlocal running, peak
        if "explode" in text:
            raise RuntimeError("agent down")
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1
        return "Here is your answer."

    config = UserSimulatorConfig(model=JUDGE_MODEL, api_base=server.base_url, api_key="k", api_style="chat")
    batch = BatchSimulator(UserSimulator(config=config, runtime=fast_runtime()), max_concurrency=2)
    scenarios = [
        ConversationScenario(scenario_id=f"s{i}", starting_prompt=f"question {i}", goals=["get an answer"])
        for i in range(4)
    ] + [ConversationScenario(scenario_id="boom", starting_prompt="explode", goals=["get an answer"])]
    results = await batch.run_batch(agent, scenarios)
    assert [r.scenario_id for r in results] == ["s0", "s1", "s2", "s3", "boom"]
    assert peak == 2
    assert results[-1].error is not None and "agent down" in results[-1].error
    assert BatchSimulator.summary(results) == {
        "total_scenarios": 5,
        "completed": 4,
        "completion_rate": 0.8,
        "total_goals_achieved": 4,
        "average_turns": 0.8,
        "errors": 1,
    }
    assert BatchSimulator.summary([])["completion_rate"] == 0.0
    with pytest.raises(ValueError, match="max_concurrency"):
        BatchSimulator(max_concurrency=0)


# ---- Colors ----


def test_colors_are_per_instance_and_disable_is_deprecated() -> None:
    assert Colors.RED == "\033[91m"
    plain, coloured = Colors(enabled=False), Colors(enabled=True)
    assert plain.RED == "" and plain.paint("x", "RED", "BOLD") == "x"
    assert coloured.paint("x", "GREEN") == "\033[92mx\033[0m"
    with open(__file__) as not_a_terminal:
        assert Colors(stream=not_a_terminal).enabled is False
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            Colors.disable()
        assert caught and caught[0].category is DeprecationWarning
        assert Colors.RED == "" and Colors(enabled=True).paint("x", "RED") == "x"  # process-wide, as in the reference
    finally:
        Colors.enable()
    assert Colors.RED == "\033[91m"


def test_the_reports_json_config_round_trips_presets(tmp_path: Path) -> None:
    EvalPresets.tool_usage().to_file(tmp_path / "c.json")
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["criteria"]["trajectory"]["check_args"] is True
