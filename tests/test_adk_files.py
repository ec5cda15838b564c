"""ADK's eval files read directly and written back: the files under tests/data/adk/ were written by google-adk's
own pydantic models (tests/data/adk/make_files.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracegrade.cli.main import cli
from tracegrade.errors import ConfigError, EvalSetError
from tracegrade.models.adk_files import config_from_adk, config_to_adk, eval_set_from_adk, eval_set_to_adk
from tracegrade.models.config import CriterionConfig, EvalConfig, MatchType
from tracegrade.models.dataset import EvalSet

DATA = Path(__file__).parent / "data" / "adk"
EXAMPLES = Path(__file__).parent.parent / "examples"


def _without_ids(eval_set: EvalSet) -> dict[str, object]:
    dumped = eval_set.model_dump(mode="json")
    for case in dumped["eval_cases"]:
        case["metadata"].pop("adk", None)  # ADK's migration stamps the creation time
        for turn in case["conversation"]:
            turn.pop("invocation_id")
    return dumped


def test_evalset_written_by_adk_loads_with_every_expectation() -> None:
    eval_set = EvalSet.from_file(DATA / "demo.evalset.json")
    assert [c.eval_id for c in eval_set] == ["weather_bergen", "trip_two_turns", "events_form", "greeting"]
    weather, trip, events, greeting = eval_set.eval_cases
    [turn] = weather.conversation
    assert turn.invocation_id == "inv-1"
    assert turn.user_content.get_text() == "What is the weather in Bergen?"
    assert turn.expected_final_response is not None
    assert turn.expected_final_response.get_text() == "It is raining in Bergen, 12 degrees."
    [call] = turn.expected_tool_trajectory
    assert (call.name, call.args, call.call_id, call.result) == (
        "get_weather",
        {"city": "Bergen", "units": "metric"},
        "c1",
        {"rain": True},
    )
    assert (weather.session_input.app_name, weather.session_input.user_id) == ("weather_app", "u1")
    assert weather.session_input.state == {"home": "Oslo"}
    assert len(trip.conversation) == 2
    assert [c.name for c in trip.conversation[0].expected_tool_trajectory] == ["search_flights", "book"]
    assert trip.conversation[0].expected_tool_trajectory[1].args == {"flight": "SK123", "seats": 1}
    assert trip.conversation[0].expected_intermediate_responses[0].metadata == {"author": "planner"}
    assert trip.metadata["adk"]["session_id"] == "s-fixed"
    [roll] = events.conversation[0].expected_tool_trajectory  # the invocation_events form
    assert (roll.name, roll.args, roll.result) == ("roll_die", {"sides": 6}, {"result": 4})
    assert greeting.conversation[0].expected_tool_trajectory == []


def test_camel_case_aliases_read_the_same() -> None:
    snake = EvalSet.from_file(DATA / "demo.evalset.json")
    camel = EvalSet.from_file(DATA / "demo_camel.evalset.json")
    assert _without_ids(camel) == _without_ids(snake)


def test_older_test_json_list_reads_as_adks_own_migration() -> None:
    old = EvalSet.from_file(DATA / "dice.test.json")
    migrated = EvalSet.from_file(DATA / "dice_migrated.evalset.json")  # ADK's convert_eval_set_to_pydantic_schema
    assert old.eval_set_id == "dice"
    [case] = old.eval_cases
    assert [t.user_content.get_text() for t in case.conversation] == ["What can you do?", "Roll a 17 sided die twice"]
    assert [(c.name, c.args) for c in case.conversation[1].expected_tool_trajectory] == [
        ("roll_die", {"sides": 17})
    ] * 2
    assert _without_ids(old)["eval_cases"] == _without_ids(migrated)["eval_cases"]


def test_named_cases_list_with_initial_session() -> None:
    data = [
        {
            "name": "c1",
            "data": [{"query": "hi", "expected_tool_use": [], "reference": "hello"}],
            "initial_session": {"app_name": "app", "user_id": "me", "state": {"k": 1}},
        }
    ]
    [case] = eval_set_from_adk(data, "x.test.json").eval_cases
    assert case.eval_id == "c1"
    assert (case.session_input.app_name, case.session_input.user_id, case.session_input.state) == (
        "app",
        "me",
        {"k": 1},
    )


def test_adk_config_with_thresholds_scores_as_adk() -> None:
    config = EvalConfig.from_file(DATA / "test_config.json")
    slots = dict(config.criteria.enabled_slots())
    assert set(slots) == {"trajectory", "rouge_match"}
    assert (slots["trajectory"].threshold, slots["trajectory"].match_type) == (1.0, MatchType.EXACT)
    assert slots["trajectory"].check_args  # ADK compares arguments unless ignore_args
    assert slots["trajectory"].scoring == slots["rouge_match"].scoring == "adk"
    assert slots["rouge_match"].threshold == 0.8


def test_adk_config_with_criterion_objects() -> None:
    slots = dict(EvalConfig.from_file(DATA / "full.test_config.json").criteria.enabled_slots())
    assert list(slots) == ["trajectory", "rouge_match", "llm_judge", "rubric_based", "hallucination", "safety"]
    assert slots["trajectory"].match_type == MatchType.IN_ORDER  # written by ADK as the enum value 1
    assert not slots["trajectory"].check_args  # ignore_args: true
    assert (slots["llm_judge"].judge_model, slots["llm_judge"].num_samples) == ("gemini-2.5-flash", 2)
    assert [(r.rubric_id, r.content) for r in slots["rubric_based"].rubrics] == [("polite", "The reply is polite.")]
    assert slots["hallucination"].threshold == 0.9 and slots["safety"].threshold == 0.8


def test_config_problems_name_the_place_in_the_adk_file(tmp_path: Path) -> None:
    path = tmp_path / "test_config.json"
    path.write_text(
        json.dumps(
            {
                "criteria": {
                    "tool_trajectory_avg_score": {"threshold": 1.0, "match_type": "SOMETIMES"},
                    "response_match_score": 0.8,
                    "tool_call_count_v1": 1,
                    "my_metric": 0.5,
                    "response_match_scor": 0.5,
                },
                "custom_metrics": {"my_metric": {"code_config": {"name": "m.f"}}},
            }
        )
    )
    with pytest.raises(ConfigError) as caught:
        EvalConfig.from_file(path)
    where = dict(caught.value.problems)
    assert "EXACT, IN_ORDER or ANY_ORDER" in where["$.criteria.tool_trajectory_avg_score.match_type"]
    assert "no tracegrade counterpart" in where["$.criteria.tool_call_count_v1"]
    assert "unknown ADK metric 'my_metric';" in where["$.criteria.my_metric"]
    assert "(did you mean 'response_match_score'?)" in where["$.criteria.response_match_scor"]
    assert "$.custom_metrics" in where


def test_a_bare_threshold_on_a_tracegrade_slot_says_what_the_slot_takes(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"criteria": {"trajectory": 1.0}}))
    with pytest.raises(ConfigError) as caught:
        EvalConfig.from_file(path)
    assert dict(caught.value.problems)["$.criteria.trajectory"] == (
        "tracegrade slot 'trajectory' takes an object such as {\"threshold\": 1.0}"
    )


def test_eval_set_problems_name_the_place_in_the_adk_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.evalset.json"
    path.write_text(
        json.dumps(
            {
                "eval_set_id": "bad",
                "eval_cases": [
                    {"eval_id": "sim", "conversation_scenario": {"starting_prompt": "hi", "conversation_plan": "x"}},
                    {
                        "eval_id": "args",
                        "conversation": [
                            {
                                "user_content": {"parts": [{"text": "q"}]},
                                "intermediate_data": {"tool_uses": [{"name": "t", "args": [1]}]},
                            }
                        ],
                    },
                ],
            }
        )
    )
    with pytest.raises(EvalSetError) as caught:
        EvalSet.from_file(path)
    where = dict(caught.value.problems)
    assert "conversation scenarios" in where["$.eval_cases[0].conversation_scenario"]
    assert "must be an object" in where["$.eval_cases[1].conversation[0].intermediate_data.tool_uses[0].args"]


def test_tracegrade_files_are_still_read_as_tracegrade(tmp_path: Path) -> None:
    config = EvalConfig.default()
    config.to_file(tmp_path / "c.json")
    assert EvalConfig.from_file(tmp_path / "c.json") == config
    eval_set = EvalSet.from_file(DATA / "demo.evalset.json")
    eval_set.to_file(tmp_path / "e.json")
    assert EvalSet.from_file(tmp_path / "e.json") == eval_set


def test_eval_set_round_trips_through_adk() -> None:
    eval_set = EvalSet.from_file(DATA / "demo.evalset.json")
    assert eval_set_from_adk(eval_set_to_adk(eval_set)) == eval_set


def test_config_round_trips_through_adk_and_refuses_what_adk_cannot_hold() -> None:
    config = EvalConfig.from_file(DATA / "full.test_config.json")
    assert config_from_adk(config_to_adk(config)) == config
    tracegrade_only = EvalConfig.default()  # response_match is tracegrade's LLM judge: no ADK metric
    with pytest.raises(ConfigError) as caught:
        config_to_adk(tracegrade_only)
    assert "$.criteria.response_match" in dict(caught.value.problems)
    assert config_to_adk(tracegrade_only, lossy=True) == {
        "criteria": {"tool_trajectory_avg_score": {"threshold": 1.0, "match_type": "EXACT", "ignore_args": True}}
    }
    assert CriterionConfig().scoring == "tracegrade"  # tracegrade's own defaults stay the seed rules


def test_validate_accepts_adk_files() -> None:
    files = sorted(str(p) for p in DATA.glob("*.json"))
    result = CliRunner().invoke(cli, ["validate", *files])
    assert result.exit_code == 0, result.output
    assert result.output.count("ok ") == len(files) == 7
    assert "config enabling trajectory, rouge_match" in result.output


def test_validate_reports_adk_problems(tmp_path: Path) -> None:
    path = tmp_path / "test_config.json"
    path.write_text(json.dumps({"criteria": {"response_match_score": 2}}))
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 2
    assert "$.criteria.response_match_score.threshold" in result.output


def test_convert_both_ways(tmp_path: Path) -> None:
    runner = CliRunner()
    ours = tmp_path / "ours.json"
    back = tmp_path / "back.evalset.json"
    assert runner.invoke(cli, ["convert", str(DATA / "demo.evalset.json"), str(ours)]).exit_code == 0
    assert "eval_cases" in json.loads(ours.read_text())
    written = EvalSet.model_validate_json(ours.read_text())
    assert _without_ids(written) == _without_ids(EvalSet.from_file(DATA / "demo.evalset.json"))
    result = runner.invoke(cli, ["convert", str(ours), str(back)])
    assert result.exit_code == 0, result.output
    assert "ADK eval set (4 cases)" in result.output
    assert json.loads(back.read_text())["eval_cases"][0]["conversation"][0]["user_content"]["parts"] == [
        {"text": "What is the weather in Bergen?"}
    ]
    cfg = tmp_path / "c.json"
    EvalConfig.default().to_file(cfg)
    refused = runner.invoke(cli, ["convert", str(cfg), str(tmp_path / "adk.json")])
    assert refused.exit_code == 2 and "--lossy" in refused.output
    assert runner.invoke(cli, ["convert", "--lossy", str(cfg), str(tmp_path / "adk.json")]).exit_code == 0


def test_grade_takes_adk_files(tmp_path: Path) -> None:
    """`tracegrade grade` with an ADK eval set and test_config.json over a stored ADK 2.13 trace."""
    runner = CliRunner()
    store = str(tmp_path / "store.duckdb")
    trace = Path(__file__).parent / "data" / "otlp" / "google_adk_2.13.0_v2_span_only.otlp.json"
    assert runner.invoke(cli, ["import", "--store", store, str(trace)]).exit_code == 0
    out = tmp_path / "reports"
    args = [
        "grade",
        "--store",
        store,
        "--evalset",
        str(DATA / "paris.evalset.json"),
        "--config",
        str(DATA / "test_config.json"),
    ]
    result = runner.invoke(cli, [*args, "--out", str(out), "--format", "json"])
    assert result.exit_code == 0, result.output
    [report_file] = out.glob("*.json")
    [case] = json.loads(report_file.read_text())["results"]
    scores = {r["criterion"]: r["score"] for r in case["criterion_results"]}
    assert scores == {"tool_trajectory_avg_score": 1.0, "rouge_match": 1.0}
    assert case["criterion_results"][0]["details"]["scoring"] == "adk"


def test_config_written_by_adk_with_its_unset_keys_loads(tmp_path: Path) -> None:
    # google-adk 2.13.0: EvalConfig(criteria={"tool_trajectory_avg_score": 1.0, "response_match_score": 0.8})
    # .model_dump_json(), keys ADK has besides criteria written as null
    path = tmp_path / "test_config.json"
    path.write_text(
        '{"criteria":{"tool_trajectory_avg_score":1.0,"response_match_score":0.8},"custom_metrics":null,'
        '"user_simulator_config":null,"live_model_config":null}'
    )
    assert set(dict(EvalConfig.from_file(path).criteria.enabled_slots())) == {"trajectory", "rouge_match"}
    path.write_text(json.dumps({"criteria": {"response_match_score": 0.8}, "custom_metrics": {}, "criterias": None}))
    with pytest.raises(ConfigError) as caught:
        EvalConfig.from_file(path)
    assert caught.value.problems == [("$.criterias", "unknown key 'criterias' (did you mean 'criteria'?)")]


def _config_problems(tmp_path: Path, criteria: dict[str, object]) -> dict[str, str]:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"criteria": criteria}))
    with pytest.raises(ConfigError) as caught:
        EvalConfig.from_file(path)
    return dict(caught.value.problems)


def test_config_messages_say_what_is_wrong(tmp_path: Path) -> None:
    mixed = _config_problems(tmp_path, {"tool_trajectory_avg_score": 0.8, "rouge_match": {"threshold": 0.5}})
    assert mixed["$.criteria.rouge_match"] == (
        "'rouge_match' is a tracegrade slot name, but 'tool_trajectory_avg_score' is an ADK metric: a config names "
        "all its criteria one way; name it by ADK's metric 'response_match_score'"
    )
    no_metric = _config_problems(tmp_path, {"safety_v1": 0.8, "response_match": {"threshold": 0.5}})
    assert (
        "ADK has no metric for it: write the whole config in tracegrade's format"
        in no_metric["$.criteria.response_match"]
    )
    assert _config_problems(tmp_path, {"trajectory": True})["$.criteria.trajectory"] == (
        "tracegrade slot 'trajectory' takes an object such as {\"threshold\": 1.0}"
    )
    misspelt = _config_problems(tmp_path, {"tool_trajectory_avg_score": {"threshhold": 1.0}})
    assert misspelt["$.criteria.tool_trajectory_avg_score"] == (
        "ADK metric 'tool_trajectory_avg_score' needs a threshold: a number or an object with \"threshold\"; "
        "it has 'threshhold' (did you mean 'threshold'?)"
    )
    not_a_threshold = _config_problems(tmp_path, {"safety_v1": "high"})
    assert not_a_threshold["$.criteria.safety_v1"].endswith('an object with "threshold"; got "high"')


def test_a_key_given_in_both_spellings_is_refused() -> None:
    turn = {"user_content": {"role": "user", "parts": [{"text": "hi"}]}}
    data = {"eval_set_id": "s", "eval_cases": [{"eval_id": "greeting", "evalId": "x", "conversation": [turn]}]}
    with pytest.raises(EvalSetError) as caught:
        eval_set_from_adk(data, "s.evalset.json")
    assert caught.value.problems == [
        (
            "$.eval_cases[0].eval_id",
            "both 'eval_id' (\"greeting\") and 'evalId' (\"x\") are given: they are one key in two spellings; keep one",
        )
    ]


def test_an_empty_test_json_says_it_holds_no_turns(tmp_path: Path) -> None:
    path = tmp_path / "empty.test.json"
    path.write_text("[]")
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 2
    assert "at $: the file is an empty list: it holds no turns" in result.output
    assert "expected a JSON object" not in result.output


def test_converting_to_adk_carries_what_adk_cases_can_hold(tmp_path: Path) -> None:
    """A case's name, description, tags, metadata, session config and each turn's node order go under the ADK
    case's "tracegrade" key (ADK's EvalCase keeps unknown keys) and come back on the way in."""
    ours = tmp_path / "m.json"
    ours.write_text(
        json.dumps(
            {
                "eval_set_id": "s",
                "eval_cases": [
                    {
                        "eval_id": "a",
                        "name": "Case A",
                        "description": "d",
                        "tags": ["smoke"],
                        "metadata": {"xfail": True, "selector": {"trace_id": "abc"}},
                        "session_input": {"config": {"recursion_limit": 5}},
                        "conversation": [
                            {"user_content": {"role": "user", "content": "hi"}},
                            {"user_content": {"role": "user", "content": "and?"}, "expected_node_order": ["agent"]},
                        ],
                    },
                    {"eval_id": "from_trace", "metadata": {"selector": {"trace_id": "def"}}},
                ],
            }
        )
    )
    adk, back = tmp_path / "m.evalset.json", tmp_path / "back.json"
    runner = CliRunner()
    result = runner.invoke(cli, ["convert", str(ours), str(adk), "--to", "adk"])
    assert result.exit_code == 0 and not result.stderr, result.output
    written = json.loads(adk.read_text())["eval_cases"]
    assert written[0]["tracegrade"] == {
        "name": "Case A",
        "description": "d",
        "tags": ["smoke"],
        "metadata": {"xfail": True, "selector": {"trace_id": "abc"}},
        "session_config": {"recursion_limit": 5},
        "expected_node_order": [[], ["agent"]],
    }
    assert written[1]["conversation"] == []  # a case found by its selector gets no made-up turn
    assert runner.invoke(cli, ["convert", str(adk), str(back), "--to", "tracegrade"]).exit_code == 0
    assert _without_ids(EvalSet.model_validate_json(back.read_text())) == _without_ids(EvalSet.from_file(ours))
    example = EvalSet.from_file(EXAMPLES / "langgraph_weather" / "eval_set.json")
    assert eval_set_from_adk(eval_set_to_adk(example)) == example


def test_carried_key_problems_name_their_place() -> None:
    turn = {"user_content": {"role": "user", "parts": [{"text": "hi"}]}}
    cases = [
        {"eval_id": "a", "conversation": [turn], "tracegrade": {"tags": "x"}},
        {"eval_id": "b", "conversation": [turn], "tracegrade": {"expected_node_order": [[], []]}},
    ]
    with pytest.raises(EvalSetError) as caught:
        eval_set_from_adk({"eval_set_id": "s", "eval_cases": cases}, "s.evalset.json")
    where = dict(caught.value.problems)
    assert "must be a list" in where["$.eval_cases[0].tracegrade.tags"]
    assert where["$.eval_cases[1].tracegrade.expected_node_order"] == (
        "holds the node orders of 2 turns but the case has 1; give one list per turn"
    )


def test_converting_to_adk_refuses_a_loss_unless_lossy(tmp_path: Path) -> None:
    ours = tmp_path / "l.json"
    ours.write_text(
        json.dumps(
            {
                "eval_set_id": "s",
                "metadata": {"owner": "qa"},
                "eval_cases": [
                    {
                        "eval_id": "a",
                        "conversation": [
                            {"user_content": {"role": "user", "content": "hi"}},
                            {
                                "user_content": {"role": "user", "content": [{"type": "text", "text": "again"}]},
                                "expected_tool_trajectory": [{"name": "t", "args": {"x": 1}, "result": {"ok": True}}],
                            },
                        ],
                    }
                ],
            }
        )
    )
    adk = tmp_path / "l.evalset.json"
    runner = CliRunner()
    refused = runner.invoke(cli, ["convert", str(ours), str(adk)])
    assert refused.exit_code == 2 and not adk.exists()
    assert f"cannot write {ours} in ADK's format without losing 2 things it has no place for" in refused.output
    assert (
        "at $.eval_cases[0].conversation[1].expected_tool_trajectory[0].result: case 'a', turn 2: "
        'expected_tool_trajectory[0].result ({"ok": true}) has no place in ADK\'s eval set format; give the call '
        "a call_id to keep it"
    ) in refused.output
    assert 'at $.metadata.owner: the eval set: metadata.owner ("qa") has no place' in refused.output
    assert "convert with --lossy" in refused.output
    with pytest.raises(EvalSetError) as caught:  # the API refuses the same
        eval_set_to_adk(EvalSet.from_file(ours))
    assert [where for where, _ in caught.value.problems] == [
        "$.eval_cases[0].conversation[1].expected_tool_trajectory[0].result",
        "$.metadata.owner",
    ]
    lossy = runner.invoke(cli, ["convert", "--lossy", str(ours), str(adk)])
    assert lossy.exit_code == 0 and adk.exists()
    assert "warning: --lossy dropped 2 things it has no place for" in lossy.stderr
    assert "$.metadata.owner" in lossy.stderr
