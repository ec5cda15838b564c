"""``tracegrade validate`` and ``tracegrade schema``, driven through the real click group."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracegrade.cli.main import cli
from tracegrade.models import CriterionConfig, EvalConfig, EvalReport, EvalSet, MatchType, Rubric, ToolArgsRule
from tracegrade.models.builder import EvalSetBuilder


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture()
def good_set(tmp_path: Path) -> Path:
    return_path = tmp_path / "good.evalset.json"
    EvalSetBuilder("Weather").add_case("q1", "a1").add_multi_turn([("a", "b"), ("c", "d")]).save(return_path)
    return return_path


@pytest.fixture()
def good_config(tmp_path: Path) -> Path:
    path = tmp_path / "good.config.json"
    EvalConfig.relaxed().to_file(path)
    return path


def test_valid_files_exit_zero_with_one_line_each(good_set: Path, good_config: Path, tmp_path: Path):
    yaml_config = tmp_path / "c.yaml"
    yaml_config.write_text("criteria:\n  node_order:\n    match_type: ANY_ORDER\n")
    result = invoke("validate", str(good_set), str(good_config), str(yaml_config))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"ok    {good_set}: eval set 'Weather': 2 cases, 3 turns",
        f"ok    {good_config}: config enabling trajectory, response_match",
        f"ok    {yaml_config}: config enabling node_order",
    ]


def test_semantic_problems_of_an_eval_set(tmp_path: Path):
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps(
            {
                "eval_cases": [
                    {"eval_id": "a", "conversation": []},
                    {"eval_id": "a", "conversation": [{"user_content": {"role": "user", "content": "  "}}]},
                ]
            }
        )
    )
    result = invoke("validate", str(path))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error {path}: invalid eval set (3 problems):",
        "  at $.eval_cases[0].conversation: case 'a' has no turns; add at least one invocation",
        "  at $.eval_cases[1].eval_id: duplicate eval_id 'a' (also used at $.eval_cases[0]); "
        "every case needs its own eval_id",
        "  at $.eval_cases[1].conversation[0].user_content: the user message is empty; give the turn a query",
        "1 of 1 file invalid",
    ]


def test_empty_eval_set(tmp_path: Path):
    path = tmp_path / "empty.json"
    EvalSet(eval_set_id="e").to_file(path)
    result = invoke("validate", str(path))
    assert result.exit_code == 2 and "at $.eval_cases: the eval set has no cases" in result.stderr


def test_semantic_problems_of_a_config(tmp_path: Path):
    config = EvalConfig()
    config.enable_criterion("rubric_based", CriterionConfig.rubric_based([]))
    config.enable_criterion("contains_keywords", CriterionConfig(keywords=[]))
    config.enable_criterion(
        "trajectory",
        CriterionConfig.trajectory(match_type=MatchType.IN_ORDER, tool_args={"book": ToolArgsRule(mode="keys")}),
    )
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config.model_dump(mode="json")))
    result = invoke("validate", str(path))
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0] == f"error {path}: invalid config (3 problems):"
    # in slot order, each slot's problems together
    assert lines[1].startswith("  at $.criteria.trajectory: tool_args['book'].keys: mode 'keys' needs")
    assert lines[2].startswith("  at $.criteria.contains_keywords.keywords: contains_keywords is enabled without")
    assert lines[3].startswith("  at $.criteria.rubric_based.rubrics: rubric_based is enabled without rubrics")


def test_config_enabling_nothing(tmp_path: Path):
    config = EvalConfig.default()
    config.disable_criterion("trajectory")
    config.disable_criterion("response_match")
    path = tmp_path / "off.json"
    config.to_file(path)
    result = invoke("validate", str(path))
    assert result.exit_code == 2 and "at $.criteria: no criterion is enabled" in result.stderr


def test_every_file_is_reported_and_structural_errors_carry_paths(good_set: Path, tmp_path: Path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"eval_cases": [')
    unknown_slot = tmp_path / "slot.json"
    unknown_slot.write_text(json.dumps({"criteria": {"tool_trajectory_avg_score": {}}}))
    ambiguous = tmp_path / "what.json"
    ambiguous.write_text(json.dumps({"name": "x"}))
    paths = [good_set, broken, unknown_slot, ambiguous, tmp_path / "no.json"]
    result = invoke("validate", *map(str, paths))
    assert result.exit_code == 2
    assert f"ok    {good_set}" in result.stdout
    err = result.stderr
    assert f"error {broken}: invalid eval set" not in err  # undecodable: kind unknown
    assert "at $: invalid JSON: Expecting value at line 1, column 17" in err
    # an ADK metric name: read as ADK's test_config.json, whose criterion objects need a threshold
    assert "at $.criteria.tool_trajectory_avg_score: ADK metric 'tool_trajectory_avg_score' needs a threshold" in err
    assert "cannot tell what this file is" in err and "--kind evalset|config|tokens|rules" in err
    assert "at $: file not found" in err
    assert err.splitlines()[-1] == "4 of 5 files invalid"


def test_tokens_files_and_worker_rules_are_checked_as_the_receiver_and_the_worker_load_them(tmp_path: Path):
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("tenants:\n  acme: [a-long-enough-token-1, {token: an-exporters-token-2, scopes: [ingest]}]\n")
    bad_tokens = tmp_path / "bad-tokens.yaml"
    bad_tokens.write_text("tenants:\n  acme: [{token: an-exporters-token-2, scopes: [ingest, admin]}]\n")
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - name: answers\n    criteria: {contains_keywords: {keywords: [answer]}}\n")
    bad_rules = tmp_path / "bad-rules.yaml"
    bad_rules.write_text("rules:\n  - name: answers\n    sample: 2\n    criteria: {}\n")
    result = invoke("validate", *map(str, (tokens, bad_tokens, rules, bad_rules)))
    assert result.exit_code == 2
    assert result.stdout.splitlines() == [
        f"ok    {tokens}: tokens file: tenants acme; 2 tokens, 1 of them limited to some scopes",
        f"ok    {rules}: worker rules: 1 rule (answers)",
    ]
    err = result.stderr
    assert f"error {bad_tokens}: invalid tokens file (1 problem):" in err
    assert "at $: tenants.acme[0].scopes: unknown scope 'admin'; the scopes are ingest, read, record, forget" in err
    assert "the scopes are ingest, read, record, forget, purge, judge" in err
    assert f"error {bad_rules}: invalid worker rules" in err and "sample" in err
    forced = invoke("validate", "--kind", "tokens", str(rules))
    assert forced.exit_code == 2 and "expected one key, 'tenants' (found ['rules'])" in forced.stderr


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("tenants:\n  acme: [a-long-enough-token-1]\ntenats_extra: 1\n", "(found ['tenants', 'tenats_extra'])"),
        ("tenant:\n  acme: [a-long-enough-token-1]\n", "(found ['tenant'])"),
    ],
)
def test_auto_kind_takes_a_file_with_a_tenants_key_or_a_misspelt_one_for_a_tokens_file(
    tmp_path: Path, text: str, says: str
):
    path = tmp_path / "tokens.yaml"
    path.write_text(text)
    result = invoke("validate", str(path))
    assert result.exit_code == 2
    assert f"error {path}: invalid tokens file (1 problem):" in result.stderr
    assert f"  at $: expected one key, 'tenants' {says}; write it as" in result.stderr


def test_an_empty_or_keyless_file_is_told_what_each_kind_holds_and_kind_tokens_speaks_of_tokens(tmp_path: Path):
    empty, keyless, no_suffix = tmp_path / "empty.yaml", tmp_path / "keyless.json", tmp_path / "tokens"
    empty.write_text("")
    keyless.write_text("{}")
    no_suffix.write_text("tenants:\n  acme: [a-long-enough-token-1]\n")
    auto = invoke("validate", str(empty), str(keyless)).stderr
    assert 'at $: the file is empty; an eval set is an object with "eval_cases": [...], a config one with ' in auto
    assert "a tokens file one with 'tenants': {...}, worker rules one with 'rules': [...]" in auto
    assert (
        "at $: cannot tell what this file is: an eval set would have 'eval_cases', a config 'criteria', a tokens "
        "file 'tenants', worker rules 'rules'; add the key, or pass --kind evalset|config|tokens|rules"
    ) in auto
    forced = invoke("validate", "--kind", "tokens", str(empty), str(keyless), str(no_suffix))
    assert forced.stdout == f"ok    {no_suffix}: tokens file: tenants acme; 1 token, 0 of them limited to some scopes\n"
    assert forced.stderr.splitlines()[:4] == [
        f"error {empty}: invalid tokens file (1 problem):",
        "  at $: the file is empty; a tokens file has one key, 'tenants', mapping each tenant to its tokens: "
        "tenants: {acme: [token1]}",
        f"error {keyless}: invalid tokens file (1 problem):",
        "  at $: expected one key, 'tenants' (found []); write it as",
    ]
    assert "eval set" not in forced.stderr


def test_a_key_given_twice_in_a_tokens_file_is_placed_by_its_path(tmp_path: Path):
    path = tmp_path / "tokens.yaml"
    path.write_text("tenants:\n  acme: [a-long-enough-token-1]\n  acme: [another-long-token-2]\n")
    result = invoke("validate", "--kind", "tokens", str(path))
    assert result.exit_code == 2
    assert "  at $.tenants.acme: duplicate key 'acme' (line 3, column 3): the later value" in result.stderr


def test_kind_option_forces_the_model(tmp_path: Path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"name": "only a name"}))
    assert invoke("validate", "--kind", "evalset", str(path)).exit_code == 2  # empty eval set
    with_rubrics = EvalConfig().with_rubrics([Rubric(rubric_id="r", content="c")])
    path.write_text(json.dumps(with_rubrics.model_dump(mode="json")))
    assert invoke("validate", "--kind", "config", str(path)).exit_code == 0


# --- schema ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "model"), [("evalset", EvalSet), ("config", EvalConfig), ("report", EvalReport)])
def test_schema_validates_real_files(kind: str, model, tmp_path: Path):
    jsonschema = pytest.importorskip("jsonschema")
    result = invoke("schema", kind)
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    samples = {
        "evalset": EvalSetBuilder("s").add_tool_test("q", "t", {"a": [1, {"b": None}]}).build(),
        "config": EvalConfig.strict(),
        "report": EvalReport.create("s", []),
    }
    assert not list(validator.iter_errors(samples[kind].model_dump(mode="json")))
    assert list(validator.iter_errors({"eval_set_id": 5, "surprise": True}))


def test_schema_rejects_unknown_criteria_slots_and_writes_files(tmp_path: Path):
    jsonschema = pytest.importorskip("jsonschema")
    out = tmp_path / "schemas" / "config.schema.json"
    result = invoke("schema", "config", "-o", str(out))
    assert result.exit_code == 0 and result.stdout == ""
    validator = jsonschema.Draft202012Validator(json.loads(out.read_text()))
    assert list(validator.iter_errors({"criteria": {"exact_match": {}}}))
    assert not list(validator.iter_errors({"criteria": {"trajectory": {"match_type": "IN_ORDER"}}}))


def test_schema_defaults_to_evalset_and_rejects_unknown_kinds():
    assert json.loads(invoke("schema").stdout)["title"] == "EvalSet"
    assert invoke("schema", "bogus").exit_code == 2


def test_simulated_cases_need_no_turns_but_a_valid_scenario(tmp_path: Path):
    from tracegrade.models import EvalCase

    good = EvalCase(eval_id="sim", metadata={"scenario": {"starting_prompt": "hi", "goals": ["book a table"]}})
    bad = EvalCase(eval_id="broken", metadata={"scenario": {"goals": "not a list", "max_turns": "many"}})
    path = tmp_path / "sim.json"
    EvalSet(eval_set_id="s", eval_cases=[good, bad]).to_file(path)
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 2
    assert "$.eval_cases[1].metadata.scenario.max_turns" in result.output
    assert "eval_cases[0]" not in result.output  # the valid simulated case has no turns and that is fine


def test_every_problem_is_listed_at_once_not_one_layer_at_a_time(tmp_path: Path):
    # a value out of range (the schema) beside problems only a loaded config shows (what the checks refuse)
    config = tmp_path / "layers.yaml"
    config.write_text("criteria:\n  trajectory: {threshold: 1.5}\n  contains_keywords: {threshold: 0.5}\ntimeout: -1\n")
    eval_set = tmp_path / "layers.evalset.json"
    cases = [{"eval_id": "same", "conversation": []}, {"eval_id": "same", "conversation": [], "nmae": "x"}]
    eval_set.write_text(json.dumps({"eval_set_id": "s", "eval_cases": cases}))
    result = invoke("validate", str(config), str(eval_set))
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert any(line.startswith("  at $.criteria.trajectory.threshold: ") for line in lines), lines
    assert any(line.startswith("  at $.timeout: ") for line in lines), lines
    assert any(line.startswith("  at $.criteria.contains_keywords.keywords: ") for line in lines), lines
    assert any("unknown key 'nmae'" in line for line in lines), lines
    assert any("same" in line and "duplicate" in line.lower() for line in lines), lines
