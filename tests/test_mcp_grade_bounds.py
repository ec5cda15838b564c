"""MCP ``grade`` defects a QA pass left open, checked through the official MCP SDK's client against ``/mcp`` of a
real ``tracegrade serve``: ``limit`` is bounded (the CLI grades more), an integer argument given as ``true``, a
string or a float is refused, ``trace_ids`` / ``where`` / ``limit`` beside an eval set are refused as the CLI
refuses ``--where``/``--limit`` beside ``--evalset``, ``trace_ids`` without ``limit`` grades every trace named, the
selection code names its caller's arguments, and the SDK's per-request chatter stays out of the receiver's log."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.grading_traces import AgentRun, fill_store, keywords_config
from tests.support.server_process import ServerProcess
from tracegrade.models import EvalCase, EvalSet

pytest.importorskip("mcp")

TRACES = 25  # more than grade's default limit of 20
KEYWORDS = keywords_config("refund").model_dump(mode="json")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    store = tmp_path_factory.mktemp("mcp-grade") / "store.duckdb"
    runs = [AgentRun(n, f"Where is refund {n}?", "Your refund was sent.") for n in range(1, TRACES + 1)]
    fill_store(store, runs).close()
    with ServerProcess(store) as server:
        yield server


def _calls(server: ServerProcess, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Each MCP tool call at ``/mcp``, in one session; the SDK's CallToolResults."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def run() -> list[Any]:
        async with streamable_http_client(f"{server.http_url}/mcp") as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return [await s.call_tool(name, arguments) for name, arguments in calls]

    return asyncio.run(run())


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def _errors(results: list[Any]) -> list[str]:
    assert all(r.is_error for r in results), [_text(r)[:300] for r in results if not r.is_error]
    return [_text(r) for r in results]


def test_grade_limit_is_bounded_and_the_error_names_the_bound_and_the_cli(served: ServerProcess) -> None:
    many_ids = [f"{n:032x}" for n in range(10_001)]
    over_limit, over_ids = _errors(
        _calls(
            served,
            [("grade", {"config": KEYWORDS, "limit": 50_000}), ("grade", {"config": KEYWORDS, "trace_ids": many_ids})],
        )
    )
    assert "limit is 50,000" in over_limit
    assert "trace_ids names 10,001 traces" in over_ids
    for text in (over_limit, over_ids):
        assert "one grade call grades at most 10,000 traces" in text and "tracegrade grade" in text, text
    [at_bound] = _calls(served, [("grade", {"config": KEYWORDS, "limit": 10_000})])
    assert not at_bound.is_error and at_bound.structured_content["summary"]["total_cases"] == TRACES


def test_integer_arguments_given_as_booleans_strings_or_floats_are_refused(served: ServerProcess) -> None:
    results = _calls(
        served,
        [
            ("grade", {"config": KEYWORDS, "limit": True}),
            ("grade", {"config": KEYWORDS, "limit": "5"}),
            ("grade", {"config": KEYWORDS, "limit": 2.0}),
            ("list_traces", {"limit": False}),
            ("list_runs", {"limit": True}),
        ],
    )
    flag, text, fraction, listing, runs = _errors(results)
    assert "limit for grade must be a whole number (a JSON integer such as 20), not true" in flag, flag
    assert 'not "5"' in text and "not 2.0" in fraction
    assert "limit for list_traces must be a whole number" in listing and "not false" in listing
    assert "limit for list_runs must be a whole number" in runs
    [whole] = _calls(served, [("grade", {"config": KEYWORDS, "limit": 2})])
    assert not whole.is_error and whole.structured_content["summary"]["total_cases"] == 2


def test_a_selection_beside_an_eval_set_is_refused_as_the_cli_refuses_it(served: ServerProcess) -> None:
    cases = EvalSet(eval_set_id="s", eval_cases=[EvalCase.single_turn("c1", "Where is refund 1?")])
    eval_set = cases.model_dump(mode="json")
    where, both = _errors(
        _calls(
            served,
            [
                ("grade", {"eval_set": eval_set, "where": "status = 'OK'"}),
                ("grade", {"eval_set": eval_set, "trace_ids": [f"{1:032x}"], "limit": 3}),
            ],
        )
    )
    assert "where selects traces for grading without reference" in where, where
    assert "with eval_set each case is graded against the traces that match it" in where
    assert "leave it out, or leave out eval_set" in where
    assert "trace_ids, limit select traces for grading without reference" in both and "leave them out" in both
    [graded] = _calls(served, [("grade", {"eval_set": eval_set})])
    assert not graded.is_error, _text(graded)


def test_trace_ids_without_limit_grades_every_trace_named(served: ServerProcess) -> None:
    named = [f"{n:032x}" for n in range(1, TRACES + 1)]
    [graded] = _calls(served, [("grade", {"config": KEYWORDS, "trace_ids": named})])
    assert not graded.is_error, _text(graded)
    assert graded.structured_content["summary"]["total_cases"] == TRACES
    [newest] = _calls(served, [("grade", {"config": KEYWORDS})])
    assert newest.structured_content["summary"]["total_cases"] == 20


def test_the_selection_code_names_the_arguments_its_caller_uses() -> None:
    from tracegrade.evaluation.selection import SelectionNames, TraceSelection, selection_where

    tool = SelectionNames(where="where", since="since", sample="sample", limit="limit")
    problems = [
        TraceSelection(limit=0),
        TraceSelection(where="1=1) OR (1=1"),
        TraceSelection(since="soon"),
        TraceSelection(sample=2.0),
    ]
    for selection, option in zip(problems, ("limit", "where", "since", "sample")):
        with pytest.raises(ValueError) as cli:
            selection_where(selection)  # the CLI's names by default: its messages are unchanged
        with pytest.raises(ValueError) as mcp:
            selection_where(selection, tool)
        assert f"--{option} " in str(cli.value), str(cli.value)
        assert "--" not in str(mcp.value) and f"{option} " in str(mcp.value), str(mcp.value)


def test_mcp_requests_leave_no_sdk_session_chatter_in_the_receivers_log(served: ServerProcess) -> None:
    before = served.log()
    results = _calls(
        served, [("list_runs", {}), ("list_traces", {"limit": 2}), ("get_span", {"trace_id": "x", "span_id": "y"})]
    )
    assert [r.is_error for r in results] == [False, False, True]
    added = served.log()[len(before) :]
    assert "Terminating session" not in added and "Processing request" not in added, added
    assert "Tool 'get_span' failed" not in added, added


def test_an_eval_set_without_config_is_graded_with_no_judge_as_the_cli_grades_it(served: ServerProcess) -> None:
    """Before, MCP ``grade`` fell back to the judged response_match: with no judge key every case failed on "No
    LLM provider available", where ``tracegrade grade`` grades the same eval set with trajectory and rouge_match."""
    case = EvalCase.single_turn("refund-1", "Where is refund 1?", expected_response="Your refund was sent.")
    eval_set = EvalSet(eval_set_id="s", eval_cases=[case]).model_dump(mode="json")
    [graded] = _calls(served, [("grade", {"eval_set": eval_set})])
    assert not graded.is_error, _text(graded)
    (result,) = graded.structured_content["cases"]
    assert "No LLM provider" not in json.dumps(result), result
    assert graded.structured_content["summary"]["passed_cases"] == 1, result


def test_duplicate_trace_ids_grade_each_trace_once(served: ServerProcess) -> None:
    trace = f"{1:032x}"
    [graded] = _calls(served, [("grade", {"config": KEYWORDS, "trace_ids": [trace, trace, trace]})])
    assert not graded.is_error, _text(graded)
    assert graded.structured_content["summary"]["total_cases"] == 1
