"""ADK interop through the CLI: every setting `convert` drops from a config is named, a misspelt key in an ADK
eval set is refused at its path (as google-adk refuses it), and a round trip gives back each case's
session_input as it came in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from tracegrade.cli.main import cli

DATA = Path(__file__).parent / "data" / "adk"

# one turn of an ADK eval set: a question, the expected reply and the expected tool call
_TURN: dict[str, Any] = {
    "invocation_id": "i1",
    "user_content": {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
    "final_response": {"role": "model", "parts": [{"text": "Paris: sunny"}]},
    "intermediate_data": {"tool_uses": [{"name": "get_weather", "args": {"city": "Paris"}}]},
}


def _write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_convert_to_adk_names_every_setting_it_drops(tmp_path: Path) -> None:
    config = _write(
        tmp_path / "rich.json",
        {
            "criteria": {
                "trajectory": {
                    "threshold": 0.8,
                    "match_type": "ANY_ORDER",
                    "check_args": True,
                    "tool_args": {"get_weather": {"mode": "subset"}},
                },
                "node_order": {"threshold": 1.0},
                "rouge_match": {"threshold": 0.5},
                "llm_judge": {"threshold": 0.7, "api_key": "sk-secret", "temperature": 0.5},
                "contains_keywords": {"keywords": ["x"], "enabled": False},  # disabled: grades nothing
            },
            "num_runs": 5,
            "timeout": 10,
            "parallel": True,
            "mock_mode": True,
            "max_concurrency": 4,  # tracegrade's default: nothing is lost
        },
    )
    dest = tmp_path / "adk.json"
    runner = CliRunner()
    refused = runner.invoke(cli, ["convert", str(config), str(dest), "--to", "adk"])
    assert refused.exit_code == 2 and not dest.exists()
    lost = [
        "at $.criteria.node_order: ADK has no metric for tracegrade's 'node_order'",
        'at $.criteria.trajectory.tool_args.get_weather: set to {"mode": "subset", "keys": []}; ADK\'s '
        "'tool_trajectory_avg_score' has no setting for it; ADK compares a call's arguments whole",
        "at $.criteria.llm_judge.api_key: set to \"<redacted>\"; ADK's 'final_response_match_v2' has no setting",
        "at $.criteria.llm_judge.temperature: set to 0.5;",
        "at $.parallel: set to true; ADK's test_config.json has no setting for it",
        "at $.timeout: set to 10.0; ADK's test_config.json has no setting for it; ADK's evaluation has no time limit",
        "at $.mock_mode: set to true;",
        "at $.num_runs: set to 5; ADK's test_config.json has no setting for it; ADK takes the number of runs",
    ]
    assert f"without losing {len(lost)} things" in refused.output
    for line in lost:
        assert line in refused.output
    assert "sk-secret" not in refused.output and "contains_keywords" not in refused.output
    assert "max_concurrency" not in refused.output
    lossy = runner.invoke(cli, ["convert", "--lossy", str(config), str(dest), "--to", "adk"])
    assert lossy.exit_code == 0, lossy.output
    assert f"warning: --lossy dropped {len(lost)} things" in lossy.stderr
    for line in lost:
        assert line in lossy.stderr
    assert json.loads(dest.read_text())["criteria"]["tool_trajectory_avg_score"]["ignore_args"] is False


def test_a_config_at_its_defaults_converts_without_a_loss(tmp_path: Path) -> None:
    config = _write(
        tmp_path / "c.json",
        {"criteria": {"trajectory": {"threshold": 1.0, "check_args": True}, "rouge_match": {}}, "timeout": 300},
    )
    result = CliRunner().invoke(cli, ["convert", str(config), str(tmp_path / "adk.json"), "--to", "adk"])
    assert result.exit_code == 0 and not result.stderr, result.output


def test_a_misspelt_key_in_an_adk_eval_set_is_refused_at_its_path(tmp_path: Path) -> None:
    turn = json.loads(json.dumps(_TURN))
    turn["final_response"]["parts"] = [{"txt": "Paris: sunny"}]
    turn["intermediate_data"]["tool_uses"] = [{"name": "get_weather", "argz": {"city": "Paris"}, "nmae": "x"}]
    user_typo = {"invocation_id": "i2", "user_content": {"role": "user", "parts": [{"txt": "hi"}]}}
    event = {"author": "agent", "content": {"parts": [{"function_call": {"name": "roll", "arg": {"sides": 6}}}]}}
    events = {**_TURN, "intermediate_data": {"invocation_events": [event]}}
    cases = [
        {"eval_id": "typos", "conversation": [turn]},
        {"eval_id": "user", "conversation": [user_typo]},
        {"eval_id": "events", "conversation": [events]},
    ]
    path = _write(tmp_path / "typo.evalset.json", {"eval_set_id": "s", "eval_cases": cases})
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 2
    at = "$.eval_cases[0].conversation[0]"
    for line in [
        f"at {at}.final_response.parts[0].txt: unknown key 'txt' (did you mean 'text'?)",
        f"at {at}.intermediate_data.tool_uses[0].argz: unknown key 'argz' (did you mean 'args'?)",
        f"at {at}.intermediate_data.tool_uses[0].nmae: unknown key 'nmae' (did you mean 'name'?)",
        "at $.eval_cases[1].conversation[0].user_content.parts[0].txt: unknown key 'txt' (did you mean 'text'?)",
        "at $.eval_cases[2].conversation[0].intermediate_data.invocation_events[0].content.parts[0].function_call"
        ".arg: unknown key 'arg' (did you mean 'args'?)",
    ]:
        assert line in result.output
    assert "the user message is empty" not in result.output
    # the keys google-genai writes for a part (null when unset) are read as before
    assert CliRunner().invoke(cli, ["validate", str(DATA / "demo.evalset.json")]).exit_code == 0


def _sessions(path: Path) -> list[Any]:
    return [c.get("session_input") for c in json.loads(path.read_text())["eval_cases"]]


def test_a_round_trip_gives_back_each_cases_session_input(tmp_path: Path) -> None:
    defaults = {"app_name": "", "user_id": "test_user", "state": {}}  # tracegrade's defaults, given by the file
    source = json.loads((DATA / "demo.evalset.json").read_text())
    source["eval_cases"].append({"eval_id": "given", "conversation": [_TURN], "session_input": defaults})
    adk = _write(tmp_path / "in.evalset.json", source)
    ours, back = tmp_path / "ours.json", tmp_path / "back.evalset.json"
    runner = CliRunner()
    assert runner.invoke(cli, ["convert", str(adk), str(ours)]).exit_code == 0
    result = runner.invoke(cli, ["convert", str(ours), str(back)])
    assert result.exit_code == 0 and not result.stderr, result.output
    assert _sessions(back) == [
        {"app_name": "weather_app", "user_id": "u1", "state": {"home": "Oslo"}},
        {"app_name": "travel", "user_id": "u2", "state": {}, "session_id": "s-fixed"},
        None,  # events_form and greeting have none: ADK runs them under its own app and user names
        None,
        defaults,
    ]
    # a tracegrade eval set gets a session_input in ADK's file only where it sets one
    mine = {
        "eval_set_id": "m",
        "eval_cases": [
            {"eval_id": "plain", "conversation": [{"user_content": {"role": "user", "content": "hi"}}]},
            {"eval_id": "set", "session_input": {"user_id": "alice"}},
        ],
    }
    written = tmp_path / "m.evalset.json"
    assert runner.invoke(cli, ["convert", str(_write(tmp_path / "m.json", mine)), str(written)]).exit_code == 0
    assert _sessions(written) == [None, {"app_name": "", "user_id": "alice", "state": {}}]
