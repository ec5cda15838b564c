"""One definition of "valid": what ``tracegrade validate`` refuses, ``grade`` and ``worker`` refuse with the same
message before they touch the store; what it passes, they run. Each broken input below is run through the real
commands on a real DuckDB store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.grading_cli import eval_runs, run_cli
from tests.support.grading_traces import AgentRun, fill_store
from tracegrade.errors import EvalSetError
from tracegrade.evaluation.offline import TraceGrader
from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import EvalSet
from tracegrade.store import TraceStore

KEYWORDS = {"criteria": {"contains_keywords": {"keywords": ["order"]}}}


def _case(eval_id: str, query: str = "cancel order 5", **metadata: Any) -> dict[str, Any]:
    return {
        "eval_id": eval_id,
        "conversation": [{"user_content": {"role": "user", "content": query}}],
        "metadata": metadata,
    }


GOOD_SET = {"eval_set_id": "orders", "eval_cases": [_case("cancel"), _case("track", "track order 6")]}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    runs = [
        AgentRun(1, "cancel order 5", "order 5 cancelled", [("cancel", {"order": 5})], case_id="cancel"),
        AgentRun(2, "track order 6", "order 6 ships today", [("track", {"order": 6})], case_id="track"),
    ]
    fill_store(tmp_path / "store.duckdb", runs).close()
    return tmp_path


def _write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _grade(ws: Path, config: Path, eval_set: Path, out: Path | None = None):
    out = out or ws / "out"
    return run_cli("grade", "--store", ws / "store.duckdb", "--config", config, "--evalset", eval_set, "--out", out)


# (id, the broken file: "config" or "evalset", its content, what validate and grade both say)
BROKEN: list[tuple[str, str, dict[str, Any], str]] = [
    (
        "duplicate-eval-ids",
        "evalset",
        {"eval_set_id": "orders", "eval_cases": [_case("a"), _case("a", "track order 6")]},
        "at $.eval_cases[1].eval_id: duplicate eval_id 'a' (also used at $.eval_cases[0])",
    ),
    (
        "keywords-empty",
        "config",
        {"criteria": {"contains_keywords": {}}},
        "at $.criteria.contains_keywords.keywords: contains_keywords is enabled without keywords, so it always "
        "scores 1.0",
    ),
    (
        "rouge-check-args",
        "config",
        {"criteria": {"rouge_match": {"threshold": 0.5, "check_args": True}}},
        "at $.criteria.rouge_match.check_args: option 'check_args' does not apply to slot 'rouge_match' "
        "(it applies to trajectory)",
    ),
    (
        "rouge-judge-model",
        "config",
        {"criteria": {"rouge_match": {"judge_model": "x"}}},
        "at $.criteria.rouge_match.judge_model: option 'judge_model' does not apply to slot 'rouge_match' "
        "(it applies to response_match, llm_judge, rubric_based,",
    ),
    (
        "rouge-keywords",
        "config",
        {"criteria": {"rouge_match": {"keywords": ["k"]}}},
        "at $.criteria.rouge_match.keywords: option 'keywords' does not apply to slot 'rouge_match' "
        "(it applies to contains_keywords)",
    ),
    (
        "rouge-rubrics",
        "config",
        {"criteria": {"rouge_match": {"rubrics": [{"rubric_id": "r", "content": "polite"}]}}},
        "at $.criteria.rouge_match.rubrics: option 'rubrics' does not apply to slot 'rouge_match' "
        "(it applies to rubric_based)",
    ),
    (
        "selector-wrong-key",
        "evalset",
        {"eval_set_id": "orders", "eval_cases": [_case("a", selector={"trace": "abc"})]},
        "at $.eval_cases[0].metadata.selector.trace: unknown key 'trace' (did you mean 'trace_id'?)",
    ),
    (
        "selector-string",
        "evalset",
        {"eval_set_id": "orders", "eval_cases": [_case("a", selector="abc")]},
        "at $.eval_cases[0].metadata.selector: must be an object with exactly one of trace_id, conversation_id "
        "or where; got 'abc'",
    ),
    (
        "selector-bad-sql",
        "evalset",
        {"eval_set_id": "orders", "eval_cases": [_case("a", selector={"where": "status = = 1"})]},
        "at $.eval_cases[0].metadata.selector.where: not a valid predicate over the traces table at line 1, "
        'column 10: Parser Error: syntax error at or near "="',
    ),
    (
        "selector-escaping-its-parentheses",
        "evalset",
        {"eval_set_id": "orders", "eval_cases": [_case("a", selector={"where": "true) OR (true"})]},
        "at $.eval_cases[0].metadata.selector.where: not a valid predicate over the traces table: it closes a "
        "parenthesis it did not open (at character 5); write one condition, with its parentheses matched",
    ),
    (
        "selector-unknown-column",
        "evalset",
        {"eval_set_id": "orders", "eval_cases": [_case("a", selector={"where": "nosuchcol = 1"})]},
        "at $.eval_cases[0].metadata.selector.where: not a valid predicate over the traces table at line 1, "
        'column 1: Binder Error: Referenced column "nosuchcol" not found',
    ),
    (
        "sql-ends-too-soon",
        "config",
        {"criteria": {"sql_assertions": [{"name": "s8", "query": "SELECT 1 WHERE"}]}},
        "at $.criteria.sql_assertions[0].query: SQL assertion 's8' is invalid at line 1, column 15: Parser Error: "
        "syntax error at end of input",
    ),
    (
        "tool-schema-type",
        "config",
        {"criteria": {"tool_schema": {"schemas": {"t": {"type": "objekt"}}}}},
        "at $.criteria.tool_schema: schemas['t'].type: 'objekt' is not one of ['array', 'boolean',",
    ),
    (
        "tool-args-keys",
        "config",
        {"criteria": {"trajectory": {"check_args": True, "tool_args": {"search": {"mode": "keys"}}}}},
        "at $.criteria.trajectory: tool_args['search'].keys: mode 'keys' needs a non-empty 'keys' list",
    ),
    (
        "budget-without-limits",
        "config",
        {"criteria": {"budget": {}}},
        "at $.criteria.budget: budget is enabled without any limit",
    ),
    (
        "misspelt-key",
        "config",
        {"criteria": {"rouge_match": {"thresold": 0.5}}},
        "at $.criteria.rouge_match.thresold: unknown key 'thresold' (did you mean 'threshold'?)",
    ),
    (
        "misspelt-slot",
        "config",
        {"criteria": {"rouge_macth": {"threshold": 0.5}}},
        "at $.criteria.rouge_macth: unknown criterion slot 'rouge_macth' (did you mean 'rouge_match'?)",
    ),
]


@pytest.mark.parametrize(("kind", "content", "says"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_validate_and_grade_refuse_alike_and_grade_records_nothing(
    workspace: Path, kind: str, content: dict[str, Any], says: str
) -> None:
    broken = _write(workspace / f"broken_{kind}.json", content)
    config = broken if kind == "config" else _write(workspace / "config.json", KEYWORDS)
    eval_set = broken if kind == "evalset" else _write(workspace / "evalset.json", GOOD_SET)

    validated = run_cli("validate", broken)
    graded = _grade(workspace, config, eval_set)

    assert validated.exit_code == 2 and says in validated.stderr, validated.stderr
    assert graded.exit_code == 2 and says in graded.stderr, graded.stderr
    assert str(broken) in graded.stderr  # grade names the file, as validate does
    assert "Value error" not in validated.stderr + graded.stderr
    assert eval_runs(workspace / "store.duckdb") == []  # refused before the store is touched


def test_a_config_of_sql_assertions_only_is_valid_and_grades(workspace: Path) -> None:
    config = _write(
        workspace / "sql.json",
        {"criteria": {"sql_assertions": [{"name": "no_delete", "query": "SELECT name FROM tool_calls WHERE false"}]}},
    )
    eval_set = _write(workspace / "evalset.json", GOOD_SET)

    validated = run_cli("validate", config)
    graded = _grade(workspace, config, eval_set)

    assert validated.exit_code == 0 and "config enabling sql_assertion:no_delete" in validated.stdout
    assert graded.exit_code == 0, graded.stderr
    assert [row[1:] for row in eval_runs(workspace / "store.duckdb")] == [("eval_set", 2, 2)]


def test_the_python_api_refuses_duplicate_eval_ids_naming_both_positions(workspace: Path) -> None:
    eval_set = EvalSet.model_validate({"eval_set_id": "orders", "eval_cases": [_case("a"), _case("a")]})
    with TraceStore(workspace / "store.duckdb", read_only=True) as store:
        grader = TraceGrader(store, EvalConfig.model_validate(KEYWORDS))
        with pytest.raises(EvalSetError) as refused:
            grader.grade_eval_set_sync(eval_set)
    assert refused.value.problems == [
        (
            "$.eval_cases[1].eval_id",
            "duplicate eval_id 'a' (also used at $.eval_cases[0]); every case needs its own eval_id",
        )
    ]


def test_a_report_that_cannot_be_written_fails_grade_after_the_run_is_recorded(workspace: Path) -> None:
    config = _write(workspace / "config.json", KEYWORDS)
    eval_set = _write(workspace / "evalset.json", GOOD_SET)
    blocker = workspace / "not_a_directory"
    blocker.write_text("")  # a file where the report directory would be: no report can be written under it

    graded = _grade(workspace, config, eval_set, out=blocker / "reports")

    assert graded.exit_code == 2
    assert f"cannot write {blocker / 'reports'}: Not a directory" in graded.stderr
    assert "NotADirectoryError" not in graded.stderr and "OutputFileError" not in graded.stderr
    assert "recorded as run" in graded.stderr
    assert [row[1:] for row in eval_runs(workspace / "store.duckdb")] == [("eval_set", 2, 2)]


RULE = {"name": "r", "settle_seconds": 0, "criteria": {"contains_keywords": {"keywords": ["order"]}}}


@pytest.mark.parametrize(
    ("rules", "says"),
    [
        (
            [{**RULE, "where": "nosuchcol = 1"}],
            "at $.rules[0].where: rule 'r': not a valid predicate over the traces table at line 1, column 1: "
            'Binder Error: Referenced column "nosuchcol" not found',
        ),
        (
            [{**RULE, "where": "service_name ="}],
            "at $.rules[0].where: rule 'r': not a valid predicate over the traces table at line 1, column 15: "
            "Parser Error: syntax error at end of input",
        ),
        (
            [{**RULE, "where": "(service_name = 'a'"}],
            "at $.rules[0].where: rule 'r': not a valid predicate over the traces table: it leaves 1 parenthesis "
            "open; write one condition, with its parentheses matched",
        ),
        (
            [RULE, {**RULE, "criteria": {"contains_keywords": {"keywords": ["ships"]}}}],
            "at $.rules[1].name: duplicate name 'r' (also used at $.rules[0]); every rule needs its own name",
        ),
        (
            [{**RULE, "criteria": {"contains_keywords": {}}}],
            "at $.rules[0].criteria.contains_keywords.keywords: contains_keywords is enabled without keywords",
        ),
    ],
    ids=["unknown-column", "ends-too-soon", "open-parenthesis", "duplicate-names", "empty-keywords"],
)
def test_the_worker_refuses_to_start_on_rules_that_cannot_all_grade(
    workspace: Path, rules: list[dict[str, Any]], says: str
) -> None:
    path = _write(workspace / "rules.json", {"rules": rules})

    started = run_cli("worker", "--rules", path, "--store", workspace / "store.duckdb", "--once")

    assert started.exit_code == 2 and says in started.stderr, started.stderr
    assert f"worker rules {path} is invalid" in started.stderr
    with TraceStore(workspace / "store.duckdb", read_only=True) as store:
        jobs = store.query("SELECT count(*) FROM information_schema.tables WHERE table_name = 'grading_jobs'").rows
        assert jobs[0][0] == 0 or store.query("SELECT count(*) FROM grading_jobs").rows[0][0] == 0


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (
            {"rules": [{**RULE, "extra_criteria": [{"name": "max_lenght"}]}]},
            "at $.rules[0].extra_criteria[0].name: rule 'r': unknown criterion 'max_lenght'",
        ),
        (
            {"rules": [RULE], "plugins": ["my_company.criteria"]},
            "at $.plugins[0]: cannot import 'my_company.criteria': No module named 'my_company'",
        ),
        (
            {"rules": [{**RULE, "criteria": {"trajectory": {}}}]},
            "at $.rules[0].criteria: rule 'r': every criterion (tool_trajectory_avg_score) needs an eval case",
        ),
    ],
    ids=["unknown-extra-criterion", "missing-plugin", "needs-cases"],
)
def test_validate_refuses_the_rules_the_worker_refuses(workspace: Path, extra: dict[str, Any], says: str) -> None:
    path = _write(workspace / "rules.json", extra)
    validated = run_cli("validate", path)
    assert validated.exit_code == 2 and says in validated.output, validated.output
    started = run_cli("worker", "--rules", path, "--store", workspace / "store.duckdb", "--once")
    assert started.exit_code == 2 and says in started.stderr, started.stderr
