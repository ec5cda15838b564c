"""The violating rows an assertion quotes are cut when a value is long: a tool call's huge arguments must not be
copied whole into the reason and details of every case (and so into every report and stored result)."""

from __future__ import annotations

import json

from tracegrade.criteria.sql_assertion import SqlAssertionCriterion
from tracegrade.models import EvalCase, ExecutionResult, ToolCall

CASE = EvalCase(eval_id="case", conversation=[])
BLOB = "x" * 300_000
SHOWN_CHARACTERS = 500  # sql_assertion.SHOWN_CHARACTERS and SHOWN_ITEMS, as the README states them
SHOWN_ITEMS = 50


def _graded(query: str) -> dict:
    execution = ExecutionResult(
        tool_calls=[ToolCall(name="upload", args={"blob": BLOB}), ToolCall(name="upload", args={"blob": "small"})],
        trace_ids=["t1"],
    )
    result = SqlAssertionCriterion("no_uploads", query).evaluate_sync(execution, CASE)
    assert not result.passed
    return result.details


def test_a_huge_argument_is_quoted_cut_saying_how_much_was_left_out() -> None:
    details = _graded("SELECT seq, arguments->>'blob' AS blob FROM tool_calls ORDER BY seq")
    big, small = details["violating_rows"]
    assert big["blob"] == "x" * SHOWN_CHARACTERS + f"… ({len(BLOB) - SHOWN_CHARACTERS} more characters)"
    assert small == {"seq": 1, "blob": "small"}  # short values are quoted whole
    assert details["violations"] == 2
    assert len(details["reason"]) < 5 * SHOWN_CHARACTERS and f"{len(BLOB) - SHOWN_CHARACTERS} more" in details["reason"]
    assert len(json.dumps(details)) < 10 * SHOWN_CHARACTERS


def test_a_long_list_and_a_json_value_are_cut_too() -> None:
    details = _graded(
        "SELECT list(i) AS numbers, any_value(arguments) AS args FROM range(100000) t(i), tool_calls WHERE seq = 0"
    )
    (row,) = details["violating_rows"]
    assert row["numbers"] == [*range(SHOWN_ITEMS), f"… {100000 - SHOWN_ITEMS} more items"]
    assert row["args"].endswith("more characters)") and len(row["args"]) < 2 * SHOWN_CHARACTERS


def test_intervals_and_wide_decimals_are_quoted_as_tracegrade_sql_writes_them() -> None:
    details = _graded(
        "SELECT INTERVAL 26 HOURS + INTERVAL 3 MINUTES AS took, 123456789012345678901234567890.123::DECIMAL(38,3) AS d "
        "FROM tool_calls WHERE seq = 0"
    )
    (row,) = details["violating_rows"]
    assert row == {"took": "1 day 02:03:00", "d": "123456789012345678901234567890.123"}
