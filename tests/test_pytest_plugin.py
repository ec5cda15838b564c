"""The pytest plugin and testing helpers, run the way users run them: real pytest sessions (``pytester``) on a
traced agent, checking outcomes, failure messages, the session report, the baseline gate and xdist."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import tracegrade.capture.helpers
import tracegrade.evaluation.evaluator
import tracegrade.reporters
import tracegrade.store
import tracegrade.testing.running  # noqa: F401  (see below)
from tests.support.judges_setup import fresh_server, judge_config, scripted_server  # noqa: F401
from tests.support.llm_server import Reply
from tracegrade import EvalCase, EvalReport, ToolCall, assert_criterion_passed, assert_eval_passed
from tracegrade.criteria.llm import ResponseMatchCriterion
from tracegrade.criteria.trajectory_match import TrajectoryMatchCriterion
from tracegrade.models.config import CriterionConfig
from tracegrade.models.execution import ExecutionResult
from tracegrade.testing import create_simple_eval_set, explain_criterion

pytest_plugins = ["pytester"]
# In-process pytester sessions forget the modules they imported. The imports above keep one copy of
# tracegrade's modules (and so of its context variables) for every session; otherwise a name cached by
# ``tracegrade.__getattr__`` in one session would point into modules another session re-imported.

# A plain callable agent traced with trace_node/trace_tool; asked about Bergen it looks up Oslo (on purpose).
AGENT = """
import re
from tracegrade import trace_node, trace_tool

WEATHER = {"Paris": "sunny", "Oslo": "snowy", "Bergen": "rainy"}

@trace_tool
def get_weather(city: str) -> str:
    return f"{city} is {WEATHER.get(city, 'unknown')}"

@trace_node("agent")
def agent(text: str) -> str:
    cities = [c for c in re.findall(r"[A-Z][a-z]+", text) if c in WEATHER]
    if "Bergen" in cities:
        cities = ["Oslo"]
    return " ".join(get_weather(c) + "." for c in cities) or "Ask me about the weather."
"""

TEST_FILE = """
from agent import agent
from tracegrade import CriteriaConfig, CriterionConfig, EvalConfig, assert_eval_passed, parametrize_eval_cases
from tracegrade.testing import run_eval_sync

CONFIG = EvalConfig(criteria=CriteriaConfig(
    trajectory=CriterionConfig.trajectory(check_args=True), rouge_match=CriterionConfig.rouge_match(0.5)))

@parametrize_eval_cases("cases.json")
def test_case(eval_case, tracegrade_app):
    app, collector = tracegrade_app(agent)
    assert_eval_passed(run_eval_sync(app, collector, eval_case, CONFIG))
"""


def _case(eval_id: str, city: str, **metadata: str) -> dict:
    return {
        "eval_id": eval_id,
        "metadata": metadata,
        "conversation": [
            {
                "user_content": {"role": "user", "content": f"Weather in {city}?"},
                "expected_tool_trajectory": [{"name": "get_weather", "args": {"city": city}}],
                "expected_final_response": {"role": "assistant", "content": f"{city} is whatever."},
            }
        ],
    }


def _project(pytester: pytest.Pytester, *, bergen_xfail: bool = False) -> None:
    bergen = _case("bergen", "Bergen", **({"xfail": "looks up Oslo instead"} if bergen_xfail else {}))
    cases = {"eval_set_id": "weather", "name": "Weather", "eval_cases": [_case("paris", "Paris"), bergen]}
    pytester.makepyfile(agent=AGENT, test_weather=TEST_FILE)
    pytester.path.joinpath("cases.json").write_text(json.dumps(cases))


def test_each_case_is_a_test_and_a_failure_says_why(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.runpytest("-p", "no:cacheprovider", "--tracegrade-report", "reports")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*Evaluation pass rate 0.0% below threshold 100.0%. Failed cases: bergen*",
            "*tool_trajectory_avg_score: 0.00 < 1.00 (FAIL)*",
            "*mismatched arguments:*",
            "*get_weather(city=\"Bergen\"): key 'city': expected 'Bergen', got 'Oslo'*",
            "*extra:*",
            '*get_weather(city="Oslo")*',
            "*actual response: Oslo is snowy.*",
        ]
    )
    result.stdout.fnmatch_lines(
        ["*= tracegrade =*", "2 case(s) graded: 1 passed, 1 failed, 0 errors", "FAILED *test_case[[]bergen[]]*"]
    )
    reports = pytester.path / "reports"
    report = EvalReport.from_file(reports / "weather.json")
    assert [(r.eval_id, r.passed) for r in report.results] == [("paris", True), ("bergen", False)]
    assert report.results[1].metadata["pytest_test"] == "test_weather.py::test_case[bergen]"
    junit = (reports / "weather_junit.xml").read_text()
    assert 'tests="2"' in junit and "bergen" in junit
    assert (reports / "weather.html").read_text().count("bergen") >= 1


def test_a_case_marked_to_fail_passes_the_session_and_is_still_explained(pytester: pytest.Pytester) -> None:
    _project(pytester, bergen_xfail=True)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rx")
    result.assert_outcomes(passed=1, xfailed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*= tracegrade =*",
            "expected to fail (test_weather.py::test_case[bergen]):",
            "*bergen: FAIL*",
            "*key 'city': expected 'Bergen', got 'Oslo'*",
            "*XFAIL*test_case?bergen?*looks up Oslo instead*",
        ]
    )


def test_the_baseline_gate_calls_one_flip_of_two_cases_inconclusive_and_strict_fails_it(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester, bergen_xfail=True)
    first = pytester.runpytest("-p", "no:cacheprovider", "--tracegrade-report", "before")
    assert first.ret == 0
    # the baseline: the same run, but with bergen passing (as before the agent's bug)
    data = json.loads((pytester.path / "before" / "weather.json").read_text())
    bergen = next(r for r in data["results"] if r["eval_id"] == "bergen")
    bergen["passed"] = True
    for criterion in bergen["criterion_results"]:
        criterion.update(score=1.0, passed=True)
    (pytester.path / "baseline.json").write_text(json.dumps(data))

    gated = pytester.runpytest("-p", "no:cacheprovider", "--tracegrade-baseline", "baseline.json")
    gated.assert_outcomes(passed=1, xfailed=1)
    assert gated.ret == 0  # one flip among two cases is no evidence of a regression ...
    gated.stdout.fnmatch_lines(
        [
            "baseline baseline.json: gate inconclusive (2 paired cases, alpha 0.05)",
            "*Holm-adjusted over 4 tests, an exact McNemar test needs at least 8 paired cases*",
            "  cases: pass rate 100% -> 50% (1 pass->fail, 0 fail->pass, *",
            "  bergen: pass->fail (tool_trajectory_avg_score, rouge_match)",
        ]
    )
    strict = pytester.runpytest(
        "-p", "no:cacheprovider", "--tracegrade-baseline", "baseline.json", "--tracegrade-strict"
    )
    strict.assert_outcomes(passed=1, xfailed=1)
    assert strict.ret == pytest.ExitCode.TESTS_FAILED  # ... but --tracegrade-strict fails on any flip
    strict.stdout.fnmatch_lines(["baseline baseline.json: gate fail *", "*bergen: pass->fail*"])
    same = pytester.runpytest("-p", "no:cacheprovider", "--tracegrade-baseline", "before/weather.json")
    assert same.ret == 0
    same.stdout.fnmatch_lines(["baseline before/weather.json: gate *", "  cases: pass rate 50% -> 50% (0 pass->fail*"])


def test_a_missing_eval_set_file_fails_collection_naming_where_it_was_looked_for(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_missing="""
from tracegrade import parametrize_eval_cases

@parametrize_eval_cases("nothere.json")
def test_case(eval_case):
    pass
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error
    here = pytester.path / "nothere.json"
    result.stdout.fnmatch_lines([f"*eval set file not found: tried {here}"])  # the test's directory is the cwd
    assert f"{here}, {here}" not in result.stdout.str()
    assert "Traceback" not in result.stdout.str() and "tracegrade/testing" not in result.stdout.str()


def test_a_missing_baseline_or_a_bad_number_of_runs_is_a_usage_error(pytester: pytest.Pytester) -> None:
    _project(pytester)
    missing = pytester.runpytest("-p", "no:cacheprovider", "--tracegrade-baseline", "nope.json")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(
        ["*--tracegrade-baseline 'nope.json': no report file 'nope.json', and no store*--tracegrade-store STORE*"]
    )
    zero = pytester.runpytest("-p", "no:cacheprovider", "--tracegrade-num-runs", "0")
    assert zero.ret == pytest.ExitCode.USAGE_ERROR


def test_num_runs_sets_the_trials_of_every_graded_case(pytester: pytest.Pytester) -> None:
    _project(pytester, bergen_xfail=True)
    result = pytester.runpytest("-p", "no:cacheprovider", "--tracegrade-num-runs", "3", "--tracegrade-report", "r")
    result.stdout.fnmatch_lines(["3 trials per case: pass rate 95% interval *, 0 flaky"])
    report = EvalReport.from_file(pytester.path / "r" / "weather.json")
    assert report.summary.num_runs == 3
    assert [(r.eval_id, r.trial_stats.trials, r.trial_stats.passed) for r in report.results] == [
        ("paris", 3, 3),
        ("bergen", 3, 0),
    ]


def test_eval_test_decorator_and_fixtures(pytester: pytest.Pytester) -> None:
    _project(pytester)
    pytester.makepyfile(
        test_decorated=textwrap.dedent(
            """
            import pytest
            from agent import agent
            from tracegrade import (CriteriaConfig, CriterionConfig, EvalConfig, TraceStore,
                                    TrajectoryCollector, eval_test)

            CONFIG = EvalConfig(criteria=CriteriaConfig(trajectory=CriterionConfig.trajectory(check_args=True)))

            @eval_test("cases.json", config=CONFIG, threshold=0.5)
            def test_half_is_enough(tracegrade_app):
                return tracegrade_app(agent)

            @pytest.mark.asyncio
            @eval_test("cases.json", config=CONFIG)
            async def test_all_must_pass():
                return agent

            @eval_test("cases.json", config=CONFIG)
            def test_nothing_to_run():
                return None

            def test_fixtures(tracegrade_collector, tracegrade_store):
                assert isinstance(tracegrade_collector, TrajectoryCollector)
                assert tracegrade_collector.tracer_provider is not None
                assert isinstance(tracegrade_store, TraceStore)
            """
        )
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "test_decorated.py")
    result.assert_outcomes(passed=2, failed=1, skipped=1)
    result.stdout.fnmatch_lines(
        ["*test_all_must_pass*", "*Evaluation pass rate 50.0% below threshold 100.0%. Failed cases: bergen*"]
    )
    result.stdout.fnmatch_lines(["*= tracegrade =*", "4 case(s) graded: 2 passed, 2 failed, 0 errors"])


@pytest.mark.slow
def test_xdist_workers_send_their_cases_to_one_merged_report(pytester: pytest.Pytester) -> None:
    _project(pytester)
    more = [_case(f"paris-{i}", "Paris") for i in range(3)]
    data = json.loads(pytester.path.joinpath("cases.json").read_text())
    data["eval_cases"] += more
    pytester.path.joinpath("cases.json").write_text(json.dumps(data))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--tracegrade-report", "out")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["*2 workers*", "5 case(s) graded: 4 passed, 1 failed, 0 errors"])
    report = EvalReport.from_file(pytester.path / "out" / "weather.json")
    assert [r.eval_id for r in report.results] == ["paris", "bergen", "paris-0", "paris-1", "paris-2"]


def test_the_plugin_loads_nothing_heavy() -> None:
    code = (
        "import sys, tracegrade.pytest_plugin; "
        "print([m for m in ('pydantic', 'opentelemetry', 'litellm', 'duckdb', 'rich') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---- assertions and messages, on real criteria ----


def _graded(case: EvalCase, actual: ExecutionResult, *criteria) -> EvalReport:
    from tracegrade.models.results import EvalCaseResult

    results = [c.evaluate_sync(actual, case) for c in criteria]
    return EvalReport.create("set", [EvalCaseResult.success(case.eval_id, results)])


def test_assert_criterion_passed_names_what_is_there_and_what_failed() -> None:
    case = EvalCase.single_turn("c1", "q", expected_tools=[ToolCall(name="book", args={"day": "mon"})])
    actual = ExecutionResult(tool_calls=[ToolCall(name="search", args={})])
    report = _graded(case, actual, TrajectoryMatchCriterion(CriterionConfig.trajectory(check_args=True)))
    with pytest.raises(AssertionError) as missing:
        assert_criterion_passed(report, "no_such")
    assert "Criterion 'no_such' not found in the results (present: tool_trajectory_avg_score)" in str(missing.value)
    with pytest.raises(AssertionError) as failed:
        assert_criterion_passed(report.results[0], "tool_trajectory_avg_score")
    message = str(failed.value)
    assert "failed in 1 of 1 case(s)" in message
    assert 'book(day="mon"): not called' in message and "search()" in message
    with pytest.raises(AssertionError, match=r"average score 0\.00 below minimum 0\.50"):
        assert_criterion_passed(report, "tool_trajectory_avg_score", min_score=0.5)
    assert_criterion_passed(report, "tool_trajectory_avg_score", min_score=0.0)


def test_assert_eval_passed_refuses_an_empty_report_and_honours_the_pass_rate() -> None:
    with pytest.raises(AssertionError, match="graded no cases"):
        assert_eval_passed(EvalReport.create("empty", []))
    case = EvalCase.single_turn("c1", "q", expected_tools=[ToolCall(name="book")])
    ok = _graded(case, ExecutionResult(tool_calls=[ToolCall(name="book")]), TrajectoryMatchCriterion())
    assert_eval_passed(ok)


async def test_a_judge_failure_shows_the_judges_reasoning(server) -> None:
    server.script(Reply.score(0.2, "The answer names the wrong city: Oslo, not Bergen."))
    criterion = ResponseMatchCriterion(judge_config(server, threshold=0.8))
    case = EvalCase.single_turn("c1", "Weather in Bergen?", expected_response="Bergen is rainy.")
    result = await criterion.evaluate(ExecutionResult(actual_response="Oslo is snowy."), case)
    text = explain_criterion(result)
    assert text.startswith(f"{result.criterion}: 0.20 < 0.80 (FAIL)")
    assert "reason: The answer names the wrong city: Oslo, not Bergen." in text


def test_create_simple_eval_set_numbers_cases_from_one() -> None:
    eval_set = create_simple_eval_set("s", [("hi", "hello", "greeting"), ("bye", "goodbye")])
    assert [(c.eval_id, c.name) for c in eval_set.eval_cases] == [("case_1", "greeting"), ("case_2", "Case 2")]
    with pytest.raises(ValueError, match="case 1"):
        create_simple_eval_set("s", [("only a query",)])
