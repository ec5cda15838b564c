"""SQL assertions: the dbt convention over the case's own trajectory tables, the same live and offline,
bad SQL refused up front, and a sandbox that holds only the case and reaches nothing outside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.capture_agents import function_graph
from tests.support.live_and_stored import grade_live_and_stored, verdicts
from tracegrade.criteria import SqlAssertionCriterion
from tracegrade.criteria.registry import build_criteria
from tracegrade.criteria.trajectory_db import SqlAssertionError
from tracegrade.errors import ConfigError, TracegradeError
from tracegrade.models import EvalCase, EvalSet, ExecutionResult, Invocation, ToolCall
from tracegrade.models.config import CriteriaConfig, EvalConfig, SqlAssertion
from tracegrade.models.execution import LLMCall
from tracegrade.models.results import TokenUsage

CASE = EvalCase(eval_id="case", conversation=[])

ASSERTIONS = [
    SqlAssertion(name="no_calculator", query="SELECT seq, name FROM tool_calls WHERE name = 'calculator'"),
    # exactly one case's traces in the database (none of another case's, and not empty)
    SqlAssertion(
        name="one_case",
        query="SELECT count(DISTINCT case_id) AS cases FROM traces HAVING count(DISTINCT case_id) <> 1",
    ),
    # every tool call's span is in the spans table, with the tool's name in its attributes
    SqlAssertion(
        name="tool_spans",
        query=(
            "SELECT t.name FROM tool_calls t LEFT JOIN spans s USING (trace_id, span_id) "
            "WHERE s.span_id IS NULL OR (s.attributes->>'tracegrade.tool.name') IS DISTINCT FROM t.name"
        ),
    ),
    SqlAssertion(
        name="nodes",
        query="SELECT 'no planner' AS problem WHERE NOT EXISTS (SELECT 1 FROM node_visits WHERE name = 'planner')",
    ),
]
FUNCTION_SET = EvalSet(
    eval_set_id="sql",
    eval_cases=[
        EvalCase(eval_id="search", conversation=[Invocation.simple("find cats")]),
        EvalCase(eval_id="add", conversation=[Invocation.simple("add 2 and 3")]),
        EvalCase(eval_id="two-turns", conversation=[Invocation.simple("find dogs"), Invocation.simple("add 1 and 1")]),
    ],
)


def _execution(*calls: tuple[str, dict], **fields) -> ExecutionResult:
    return ExecutionResult(tool_calls=[ToolCall(name=n, args=a) for n, a in calls], trace_ids=["t1"], **fields)


def _run(query: str, execution: ExecutionResult) -> tuple[float, bool, dict]:
    result = SqlAssertionCriterion("check", query).evaluate_sync(execution, CASE)
    return result.score, result.passed, result.details


def test_live_and_offline_give_the_same_verdicts(tmp_path: Path) -> None:
    config = EvalConfig(criteria=CriteriaConfig(sql_assertions=ASSERTIONS))
    live, offline = grade_live_and_stored(function_graph, FUNCTION_SET, config, tmp_path / "store.duckdb")
    assert verdicts(live, "violations") == verdicts(offline, "violations")
    passed = {r.eval_id: {c.criterion: c.passed for c in r.criterion_results} for r in live.results}
    assert passed == {
        "search": dict.fromkeys(
            (
                "sql_assertion:no_calculator",
                "sql_assertion:one_case",
                "sql_assertion:tool_spans",
                "sql_assertion:nodes",
            ),
            True,
        ),
        "add": {
            "sql_assertion:no_calculator": False,
            "sql_assertion:one_case": True,
            "sql_assertion:tool_spans": True,
            "sql_assertion:nodes": True,
        },
        "two-turns": {
            "sql_assertion:no_calculator": False,
            "sql_assertion:one_case": True,
            "sql_assertion:tool_spans": True,
            "sql_assertion:nodes": True,
        },
    }
    failed = next(c for c in offline.results[1].criterion_results if c.criterion == "sql_assertion:no_calculator")
    assert failed.details["violating_rows"] == [{"seq": 0, "name": "calculator"}]
    assert "1 violating row" in failed.details["reason"] and "calculator" in failed.details["reason"]


def test_no_rows_passes_and_the_reason_shows_the_first_violations() -> None:
    calls = [("lookup", {"sku": f"s{i}"}) for i in range(8)]
    score, passed, details = _run(
        "SELECT seq, arguments->>'sku' AS sku FROM tool_calls ORDER BY seq", _execution(*calls)
    )
    assert (score, passed, details["violations"]) == (0.0, False, 8)
    assert details["violating_rows"] == [{"seq": i, "sku": f"s{i}"} for i in range(5)]
    assert "8 violating rows (first 5 shown)" in details["reason"]
    assert _run("SELECT * FROM tool_calls WHERE name = 'refund'", _execution(*calls))[:2] == (1.0, True)


def test_an_execution_without_spans_is_queried_from_its_own_rows() -> None:
    usage = TokenUsage(input_tokens=9000, output_tokens=10)
    execution = _execution(("search", {}), llm_calls=[LLMCall(model="m", token_usage=usage)])
    score, _, details = _run("SELECT seq, input_tokens FROM llm_calls WHERE input_tokens >= 8000", execution)
    assert score == 0.0 and details["violating_rows"] == [{"seq": 0, "input_tokens": 9000}]
    assert _run("SELECT * FROM spans", execution)[0] == 1.0  # no spans recorded, none invented


@pytest.mark.parametrize(
    ("query", "line", "column", "says"),
    [
        ("SELECT nam FROM tool_calls", 1, 8, 'column "nam" not found'),
        ("SELECT name\nFROM tool_calls\nWHERE nme = 'x'", 3, 7, 'column "nme" not found'),
        ("SELECT * FORM tool_calls", 1, 15, "syntax error"),
        ("SELECT * FROM logs", 1, 15, "logs does not exist"),
    ],
)
def test_bad_sql_is_refused_at_construction_with_its_position(query: str, line: int, column: int, says: str) -> None:
    with pytest.raises(SqlAssertionError) as raised:
        SqlAssertionCriterion("broken", query)
    error = raised.value
    assert isinstance(error, TracegradeError)
    assert (error.assertion, error.line, error.column) == ("broken", line, column)
    assert says in str(error) and "'broken'" in str(error)


@pytest.mark.parametrize(
    "query",
    [
        "DELETE FROM tool_calls",
        "SELECT 1; DROP TABLE spans",
        "COPY (SELECT * FROM spans) TO '/tmp/out.csv'",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/hostname')",
        "ATTACH '/tmp/other.duckdb'",
        "SET lock_configuration = false",
        "EXPLAIN SELECT * FROM spans",
    ],
)
def test_a_query_cannot_write_or_read_files(query: str) -> None:
    with pytest.raises(SqlAssertionError):
        SqlAssertionCriterion("escape", query)


def test_the_sandbox_stays_locked_after_a_case_is_loaded(tmp_path: Path) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    criterion = SqlAssertionCriterion("fine", "SELECT * FROM tool_calls WHERE false")
    criterion.evaluate_sync(_execution(("search", {})), CASE)
    criterion.query = f"SELECT * FROM '{secret}'"  # past the construction checks, straight to the database
    with pytest.raises(Exception, match=r"(?i)permission|disabled|does not exist"):
        criterion.evaluate_sync(_execution(("other", {})), CASE)


def test_bad_sql_in_a_config_file_is_a_config_error_naming_the_assertion(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    bad = {"name": "dup_calls", "query": "SELECT name FROM tool_call"}
    path.write_text(json.dumps({"criteria": {"sql_assertions": [bad]}}))
    with pytest.raises(ConfigError) as raised:
        EvalConfig.from_file(path)
    text = str(raised.value)
    assert "sql_assertions" in text and "'dup_calls'" in text and "line 1, column 18" in text


def test_assertion_names_are_distinct_and_each_builds_its_own_criterion() -> None:
    query = "SELECT * FROM tool_calls WHERE false"
    with pytest.raises(ValueError, match="distinct"):
        CriteriaConfig(sql_assertions=[SqlAssertion(name="a", query=query), SqlAssertion(name="a", query=query)])
    config = CriteriaConfig(
        sql_assertions=[SqlAssertion(name="a", query=query), SqlAssertion(name="b", query=query, enabled=False)]
    )
    assert [c.name for c in build_criteria(config)] == ["sql_assertion:a"]
    assert EvalConfig(criteria=config).has_enabled_criteria()


EXAMPLE_CONFIG = Path(__file__).resolve().parents[1] / "examples" / "trace_assertions" / "config.yaml"


def _example_verdicts(execution: ExecutionResult) -> dict[str, bool]:
    criteria = build_criteria(EvalConfig.from_file(EXAMPLE_CONFIG).criteria)
    return {
        c.name.removeprefix("sql_assertion:"): c.evaluate_sync(execution, CASE).passed
        for c in criteria
        if isinstance(c, SqlAssertionCriterion)
    }


def _calls(*names: str, seconds: float = 0.1) -> list[ToolCall]:
    return [ToolCall(name=n, args={"n": i}, duration_seconds=seconds) for i, n in enumerate(names)]


def test_the_four_readme_assertions_catch_what_they_say() -> None:
    clean = ExecutionResult(
        tool_calls=_calls("refund", "approve", "delete_order"),
        llm_calls=[LLMCall(model="m", token_usage=TokenUsage(input_tokens=7999))],
        trace_ids=["t"],
    )
    assert set(_example_verdicts(clean).values()) == {True}
    unapproved = clean.model_copy(update={"tool_calls": _calls("approve", "refund", "delete_order")})
    repeated = clean.model_copy(update={"tool_calls": [ToolCall(name="search", args={"q": "x"})] * 2})
    slow = clean.model_copy(update={"tool_calls": _calls("search", "search", seconds=2.5)})
    large = clean.model_copy(update={"llm_calls": [LLMCall(token_usage=TokenUsage(input_tokens=8000))]})
    failing = {
        "no_delete_after_refund_without_approve": unapproved,
        "no_repeated_call": repeated,
        "tool_p95_under_2s": slow,
        "llm_input_under_8k": large,
    }
    for name, execution in failing.items():
        assert [n for n, ok in _example_verdicts(execution).items() if not ok] == [name]
