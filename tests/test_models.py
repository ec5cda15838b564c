"""The data model: factories, helpers, the builder, and exact JSON round-trips of every file-backed model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from tracegrade.models import (
    CRITERIA_SLOTS,
    DEFAULT_JUDGE_MODEL,
    ArgMatchMode,
    CriteriaConfig,
    CriterionConfig,
    CriterionResult,
    EvalCase,
    EvalCaseResult,
    EvalConfig,
    EvalReport,
    EvalSet,
    Invocation,
    MatchType,
    MessageContent,
    ReporterConfig,
    Rubric,
    SessionInput,
    StepType,
    TokenUsage,
    ToolArgsRule,
    ToolCall,
    TrajectoryStep,
    UserSimulatorConfig,
)
from tracegrade.models.builder import EvalSetBuilder


def roundtrip(model: BaseModel) -> BaseModel:
    """Through JSON text and back; the result must equal the original and dump identically."""
    text = model.model_dump_json()
    again = type(model).model_validate_json(text)
    assert again.model_dump(mode="json") == model.model_dump(mode="json")
    assert json.loads(again.model_dump_json()) == json.loads(text)
    return again


def full_case() -> EvalCase:
    return EvalCase(
        eval_id="weather-paris-001",
        name="Paris weather",
        description="asks about the weather",
        conversation=[
            Invocation(
                invocation_id="inv-1",
                user_content=MessageContent(role="user", content=[{"type": "text", "text": "Weather?"}, {"x": 1}]),
                expected_tool_trajectory=[
                    ToolCall(name="get_weather", args={"location": "Paris", "days": 2, "opts": {"units": [1, 2.5]}}),
                    ToolCall(name="log", call_id="c1", result={"ok": True}),
                ],
                expected_node_order=["MAIN", "TOOL", "MAIN"],
                expected_intermediate_responses=[MessageContent.assistant("checking")],
                expected_final_response=MessageContent.assistant("It is sunny in Paris."),
            ),
            Invocation.simple("Thanks", "You're welcome"),
        ],
        session_input=SessionInput(app_name="app", user_id="u1", state={"k": [1]}, config={"thread_id": "t"}),
        tags=["weather", "smoke"],
        metadata={"context": "ctx", "reference_facts": ["a"]},
    )


# --- dataset models -------------------------------------------------------------------------------------


def test_eval_case_round_trip_and_eval_set_file_round_trip(tmp_path: Path):
    case = roundtrip(full_case())
    assert case.conversation[0].user_content.get_text() == "Weather?"
    eval_set = EvalSet(eval_set_id="s", name="Set", description="d", eval_cases=[full_case()], metadata={"v": 1})
    roundtrip(eval_set)
    path = tmp_path / "set.evalset.json"
    eval_set.to_file(path)
    loaded = EvalSet.from_file(path)
    assert loaded == eval_set
    assert json.loads(path.read_text())["eval_cases"][0]["conversation"][0]["expected_node_order"] == [
        "MAIN",
        "TOOL",
        "MAIN",
    ]
    eval_set.save(tmp_path / "again.json")
    assert EvalSet.from_file(tmp_path / "again.json") == eval_set


def test_invocation_and_message_round_trip():
    roundtrip(Invocation.simple("q", "a", [ToolCall(name="t", args={"x": 1})], ["N"]))
    roundtrip(MessageContent(role="system", content="be brief", metadata={"m": 1}))


def test_tool_call_actual_only_fields_round_trip_and_stay_out_of_expected_dumps():
    expected = ToolCall(name="search", args={"q": "x"})
    assert set(expected.model_dump()) == {"name", "args", "call_id", "result"}
    actual = ToolCall(
        name="search",
        args={},
        call_id="c9",
        result="text",
        args_captured=False,
        result_captured=False,
        error="Timeout",
        duration_seconds=0.25,
        span_id="00f067aa0ba902b7",
    )
    again = roundtrip(actual)
    assert (again.args_captured, again.result_captured, again.error, again.duration_seconds, again.span_id) == (
        False,
        False,
        "Timeout",
        0.25,
        "00f067aa0ba902b7",
    )


def test_tool_call_matches_and_equality():
    expected = ToolCall(name="get_weather", args={"location": "Paris"})
    assert ToolCall(name="get_weather", args={"location": "Paris"}).matches(expected)
    assert not ToolCall(name="get_weather", args={"location": "Lyon"}).matches(expected)
    assert ToolCall(name="get_weather", args={"location": "Lyon"}).matches(expected, check_args=False)
    assert ToolCall(name="get_weather", args={"a": 1}).matches(ToolCall(name="get_weather"))  # {} = any args
    assert not ToolCall(name="other").matches(expected, check_args=False)
    assert not ToolCall(name="t", call_id="1").matches(ToolCall(name="t", call_id="2"), check_call_id=True)
    assert ToolCall(name="t", args={"a": 1}) == ToolCall(name="t", args={"a": 1.0}, call_id="x", result=3)
    assert ToolCall(name="t", args={"a": 1}) != ToolCall(name="t", args={"a": "1"})
    assert ToolCall(name="t") != "t"
    assert len({ToolCall(name="t", args={"xs": [1, {"y": 2}]}), ToolCall(name="t", args={"xs": [1, {"y": 2}]})}) == 1


def test_trajectory_step_factories_and_round_trip():
    node = TrajectoryStep.node("RESEARCH_NODE", timestamp=1.5, step=3)
    tool = TrajectoryStep.tool("search", args={"query": "AI trends"}, tool_call_id="c1")
    cond = TrajectoryStep.conditional("route", chosen="B")
    assert (node.step_type, node.metadata) == (StepType.NODE, {"step": 3})
    assert (tool.step_type, tool.args, tool.metadata) == (StepType.TOOL, {"query": "AI trends"}, {"tool_call_id": "c1"})
    assert TrajectoryStep.tool("t").args == {}
    assert cond.metadata == {"chosen": "B"}
    for step in (node, tool, cond, TrajectoryStep(step_type=StepType.MESSAGE, name="m")):
        assert roundtrip(step) == step
    assert json.loads(node.model_dump_json())["step_type"] == "node"


def test_eval_case_factories():
    single = EvalCase.single_turn("id1", "q?", "answer", [ToolCall(name="t")], ["A", "B"], name="n", description="d")
    assert single.conversation[0].expected_final_response.get_text() == "answer"
    assert single.expected_node_order() == ["A", "B"] and single.name == "n"
    assert EvalCase.single_turn("id2", "q", "").conversation[0].expected_final_response is None
    multi = EvalCase.multi_turn(
        "m", [("Hello", "Hi"), ("What can you do?", "Answer")], expected_tools=[ToolCall(name="search_docs")]
    )
    assert [len(i.expected_tool_trajectory) for i in multi.conversation] == [1, 0]
    assert multi.last_expected_response() == "Answer"
    assert multi.first_user_text() == "Hello"
    assert EvalCase().eval_id != EvalCase().eval_id  # fresh uuids


def test_eval_set_collection_methods():
    a = EvalCase.single_turn("a", "q")
    a.tags = ["x", "y"]
    b = EvalCase.single_turn("b", "q")
    b.tags = ["x"]
    eval_set = EvalSet(eval_cases=[a])
    eval_set.add_case(b)
    assert len(eval_set) == 2 and [c.eval_id for c in eval_set] == ["a", "b"]
    assert eval_set.get_case("b") is b and eval_set.get_case("nope") is None
    assert eval_set.filter_by_tags(["x", "y"]) == [a]
    assert eval_set.filter_by_tags([]) == [a, b]


# --- configuration --------------------------------------------------------------------------------------


def full_criterion_config() -> CriterionConfig:
    return CriterionConfig(
        threshold=0.7,
        match_type=MatchType.ANY_ORDER,
        judge_model="openai/gpt-4o-mini",
        num_samples=5,
        rubrics=[Rubric.create("concise", "Under 100 words.", 0.5)],
        keywords=["refund"],
        check_args=True,
        enabled=False,
        api_style="chat",
        tool_args={"search": ToolArgsRule(mode=ArgMatchMode.KEYS, keys=["q"])},
        api_base="http://127.0.0.1:9/v1",
        timeout_seconds=5,
        temperature=0.2,
        metadata={"owner": "qa"},
    )


@pytest.mark.parametrize("preset", [EvalConfig.default, EvalConfig.strict, EvalConfig.relaxed, EvalConfig])
def test_eval_config_presets_round_trip_through_files(preset, tmp_path: Path):
    config = preset()
    roundtrip(config)
    config.to_file(tmp_path / "c.json")
    assert EvalConfig.from_file(tmp_path / "c.json") == config


def test_full_eval_config_round_trip(tmp_path: Path):
    config = EvalConfig(
        criteria=CriteriaConfig(**{slot: full_criterion_config() for slot in CRITERIA_SLOTS}),
        user_simulator_config=UserSimulatorConfig(model="m", max_invocations=3, api_style="chat"),
        parallel=True,
        max_concurrency=8,
        timeout=30,
        verbose=True,
        mock_mode=True,
        reporter=ReporterConfig(output_dir="out", junit_xml=True, timestamp_files=False),
        judge_max_concurrency=2,
        judge_cache=False,
    )
    assert roundtrip(config) == config
    config.to_file(tmp_path / "c.json")
    assert EvalConfig.from_file(tmp_path / "c.json") == config


def test_yaml_config_loads(tmp_path: Path):
    path = tmp_path / "c.yaml"
    path.write_text("criteria:\n  trajectory:\n    match_type: IN_ORDER\n    threshold: 0.9\nparallel: true\n")
    config = EvalConfig.from_file(path)
    assert config.criteria.trajectory.match_type is MatchType.IN_ORDER and config.parallel


def test_presets_enable_the_documented_criteria():
    default = EvalConfig.default().criteria
    assert [s for s, _ in default.enabled_slots()] == ["trajectory", "response_match"]
    assert (default.trajectory.match_type, default.trajectory.threshold, default.trajectory.check_args) == (
        MatchType.EXACT,
        1.0,
        False,
    )
    assert default.response_match.threshold == 0.8
    strict = EvalConfig.strict().criteria
    assert [s for s, _ in strict.enabled_slots()] == ["trajectory", "response_match", "llm_judge"]
    assert strict.trajectory.check_args and strict.response_match.threshold == 0.9
    assert (strict.llm_judge.threshold, strict.llm_judge.num_samples) == (0.9, 5)
    relaxed = EvalConfig.relaxed().criteria
    assert (relaxed.trajectory.match_type, relaxed.trajectory.threshold) == (MatchType.IN_ORDER, 0.8)
    assert relaxed.response_match.threshold == 0.6


@pytest.mark.parametrize(
    ("factory", "fields"),
    [
        (lambda: CriterionConfig.tool_name_match(), {"threshold": 1.0}),
        (lambda: CriterionConfig.trajectory(), {"threshold": 1.0, "match_type": MatchType.EXACT, "check_args": False}),
        (lambda: CriterionConfig.node_order(match_type=MatchType.IN_ORDER), {"match_type": MatchType.IN_ORDER}),
        (
            lambda: CriterionConfig.response_match(),
            {"threshold": 0.8, "num_samples": 3, "judge_model": DEFAULT_JUDGE_MODEL},
        ),
        (lambda: CriterionConfig.rouge_match(), {"threshold": 0.5}),
        (lambda: CriterionConfig.contains_keywords(["a"]), {"keywords": ["a"], "threshold": 1.0}),
        (lambda: CriterionConfig.llm_judge(num_samples=1), {"threshold": 0.8, "num_samples": 1}),
        (lambda: CriterionConfig.rubric_based([Rubric(rubric_id="r", content="c")]), {"threshold": 0.8}),
        (lambda: CriterionConfig.factual_accuracy(), {"threshold": 0.8}),
        (lambda: CriterionConfig.hallucination(), {"threshold": 0.8}),
        (lambda: CriterionConfig.safety(threshold=0.9), {"threshold": 0.9}),
        (lambda: CriterionConfig.simulation_goals(), {"num_samples": 1}),
    ],
)
def test_criterion_config_factories_round_trip(factory, fields):
    config = factory()
    for name, value in fields.items():
        assert getattr(config, name) == value
    assert roundtrip(config) == config


def test_eval_config_methods():
    config = EvalConfig()
    assert DEFAULT_JUDGE_MODEL == "gemini-2.5-flash"
    config.enable_criterion("rouge_match")
    assert config.get_criterion_config("rouge_match").threshold == 0.8
    config.disable_criterion("rouge_match")
    assert not config.has_enabled_criteria()
    config.disable_criterion("safety")  # unset slot: nothing happens
    assert config.get_criterion_config("exact_match") is None
    with pytest.raises(ValueError, match="Unknown criterion field: 'exact_match'"):
        config.enable_criterion("exact_match")
    with_rubrics = config.with_rubrics([Rubric(rubric_id="r", content="c")])
    assert with_rubrics.criteria.rubric_based.rubrics[0].rubric_id == "r"
    assert config.criteria.rubric_based is None


def test_unknown_criteria_slot_lists_the_valid_slots():
    with pytest.raises(ValidationError) as info:
        CriteriaConfig(tool_trajectory_avg_score=CriterionConfig())
    message = str(info.value)
    assert "unknown criterion slot 'tool_trajectory_avg_score'" in message
    assert all(slot in message for slot in CriteriaConfig.model_fields)


def test_unknown_slot_error_keeps_every_other_problem_with_its_location():
    with pytest.raises(ValidationError) as info:
        EvalConfig.model_validate({"criteria": {"exact_match": {}, "trajectory": {"threshold": 2, "bogus": 1}}})
    errors = {e["loc"]: e["type"] for e in info.value.errors()}
    assert errors == {
        ("criteria", "exact_match"): "unknown_criterion_slot",
        ("criteria", "trajectory", "threshold"): "less_than_equal",
        ("criteria", "trajectory", "bogus"): "extra_forbidden",
    }


# --- results --------------------------------------------------------------------------------------------


def test_eval_report_with_results_round_trips(tmp_path: Path):
    criterion = CriterionResult.success(
        "tool_trajectory_avg_score",
        0.5,
        1.0,
        {"reason": "Matched 50%", "matches": [{"expected_index": 0}]},
        TokenUsage(input_tokens=3, output_tokens=4, cost_usd=0.01, calls=1),
    )
    error = CriterionResult.failure("safety_v1", "All LLM samples failed", threshold=0.8)
    case_result = EvalCaseResult.success(
        "c1",
        [criterion, error],
        name="case one",
        actual_trajectory=[TrajectoryStep.node("A"), TrajectoryStep.tool("t", {"x": 1})],
        actual_tool_calls=[ToolCall(name="t", args={"x": 1}, args_captured=False, error="boom")],
        actual_response="hello",
        node_visits=["A"],
        duration_seconds=1.5,
    )
    failed = EvalCaseResult.failure("c2", "agent raised", name="two", duration_seconds=0.5)
    report = EvalReport.create("set", [case_result, failed], eval_set_name="Set", config_used={"x": 1})
    again = roundtrip(report)
    assert again.get_case_result("c1").criterion_results[0].details["matches"] == [{"expected_index": 0}]
    assert again.summary.total_token_usage.total_tokens == 7
    report.to_file(tmp_path / "r.json")
    loaded = EvalReport.from_file(tmp_path / "r.json")
    assert loaded.model_dump(mode="json") == report.model_dump(mode="json")
    assert [r.eval_id for r in loaded.failed_cases] == ["c1", "c2"] and not loaded.passed


# --- EvalSetBuilder -------------------------------------------------------------------------------------


def test_builder_fluent_cases(tmp_path: Path):
    builder = (
        EvalSetBuilder("weather")
        .add_case(
            "Weather in Paris?",
            "Sunny.",
            expected_tools=["get_weather", ToolCall(name="log", args={"a": 1})],
            expected_node_order=["MAIN"],
            name="paris",
        )
        .add_case("Hi", "Hello", case_id="greet")
        .add_multi_turn([("Hello", "Hi"), ("Bye", "Bye!")], expected_tools=["search"])
        .add_tool_test("Convert 3 km", "convert", {"value": 3})
    )
    eval_set = builder.build()
    assert eval_set.name == "weather" and eval_set.eval_set_id == builder.eval_set_id
    assert [c.eval_id for c in eval_set] == ["case_1", "greet", "case_3", "case_4"]
    first = eval_set.get_case("case_1")
    assert [t.name for t in first.expected_tools()] == ["get_weather", "log"]
    assert first.expected_tools()[0].args == {} and first.expected_node_order() == ["MAIN"]
    assert [len(i.expected_tool_trajectory) for i in eval_set.get_case("case_3").conversation] == [1, 0]
    tool_case = eval_set.get_case("case_4")
    assert tool_case.expected_tools() == [ToolCall(name="convert", args={"value": 3})]
    assert tool_case.last_expected_response() == "Result from convert"
    builder.add_case("later", "x")
    assert len(eval_set) == 4  # a built set does not change when the builder does
    saved = builder.save(tmp_path / "b.json")
    assert EvalSet.from_file(tmp_path / "b.json") == saved and len(saved) == 5


def test_builder_refuses_duplicate_ids_and_bad_tools():
    builder = EvalSetBuilder().add_case("q", "a", case_id="case_2")
    with pytest.raises(ValueError, match="duplicate case id 'case_2'"):
        builder.add_case("q", "a")  # the default id case_2 is already taken by the explicit one
    assert len(builder.cases) == 1
    with pytest.raises(ValueError, match="duplicate case id 'x'"):
        EvalSetBuilder().add_case("q", "a", case_id="x").add_case("q", "a", case_id="x")
    with pytest.raises(TypeError, match="ToolCall objects or tool names"):
        EvalSetBuilder().add_case("q", "a", expected_tools=[42])


def test_builder_class_helpers(tmp_path: Path):
    conv = EvalSetBuilder.from_conversations([{"user": "Hi", "assistant": "Hello"}, {"user": "Only user"}])
    assert conv.name == "conversation_tests" and [c.eval_id for c in conv] == ["conv_1", "conv_2"]
    assert conv.get_case("conv_2").last_expected_response() == ""
    quick = EvalSetBuilder.quick(("2+2?", "4"), ("Capital of France?", "Paris"))
    assert quick.name == "quick_tests" and [c.eval_id for c in quick] == ["test_1", "test_2"]
    quick.to_file(tmp_path / "q.json")
    builder = EvalSetBuilder.from_file(tmp_path / "q.json").add_case("more", "x")
    rebuilt = builder.build()
    assert rebuilt.eval_set_id == quick.eval_set_id and rebuilt.name == "quick_tests"
    assert [c.eval_id for c in rebuilt] == ["test_1", "test_2", "case_3"]


def test_merge_turns_keeps_new_messages_only_and_repeated_ones_when_history_is_not_repeated():
    from tracegrade.models import ExecutionResult

    u1, a1 = {"role": "user", "content": "ok"}, {"role": "assistant", "content": "sure"}
    u2, a2 = {"role": "user", "content": "ok"}, {"role": "assistant", "content": "done"}
    with_history = ExecutionResult.merge_turns(
        [ExecutionResult(messages=[u1, a1]), ExecutionResult(messages=[u1, a1, u2, a2])]
    )
    assert with_history.messages == [u1, a1, u2, a2]
    without_history = ExecutionResult.merge_turns(
        [ExecutionResult(messages=[u1, a1]), ExecutionResult(messages=[u2, a2])]
    )
    assert without_history.messages == [u1, a1, u2, a2]  # the user really said "ok" twice


def test_criterion_details_given_as_a_dict_are_kept_and_anything_else_is_validated() -> None:
    from types import MappingProxyType

    details = {"reason": "ok", "matches": [1, 2]}
    assert CriterionResult.success("c", 1.0, 0.5, details).details is details  # kept, not copied
    mapped = CriterionResult(criterion="c", score=1.0, passed=True, details=MappingProxyType({"a": 1}))
    assert type(mapped.details) is dict and mapped.details == {"a": 1}
    for bad in (["not", "a", "mapping"], "text", 3):
        with pytest.raises(ValidationError, match="details"):
            CriterionResult(criterion="c", score=1.0, passed=True, details=bad)
    loaded = CriterionResult.model_validate_json('{"criterion": "c", "score": 1, "passed": true, "details": {"x": 1}}')
    assert loaded.details == {"x": 1}
    assert CriterionResult.model_json_schema()["properties"]["details"]["type"] == "object"


def test_a_case_read_without_an_id_gets_the_same_id_from_its_content_at_every_load(tmp_path):
    hello = {"conversation": [{"user_content": {"role": "user", "content": "Hello there!"}}]}
    bye = {"conversation": [{"user_content": {"role": "user", "content": "Bye!"}}]}
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"eval_set_id": "s", "eval_cases": [hello, bye, {**hello, "eval_id": "mine"}]}))
    first, second = EvalSet.from_file(path), EvalSet.from_file(path)
    ids = [case.eval_id for case in first.eval_cases]
    assert ids == [case.eval_id for case in second.eval_cases]  # diff and gate pair the runs' results
    assert ids[0].startswith("case-") and ids[0] != ids[1] and ids[2] == "mine"
    built = [EvalCase(conversation=first.eval_cases[0].conversation) for _ in range(2)]
    assert built[0].eval_id != built[1].eval_id  # built in Python: the random default, as documented
    with pytest.raises(ValidationError, match="eval_id is blank"):
        EvalSet.model_validate({"eval_set_id": "s", "eval_cases": [{**hello, "eval_id": " "}]})
