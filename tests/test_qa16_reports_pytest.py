"""The pytest plugin on hostile sessions, run as users run them (real pytest processes, real pytest-xdist workers):
a KeyboardInterrupt inside an agent under ``-n 2``, case ids, agent errors and xfail reasons holding terminal escape
sequences, and a ``--lf`` rerun. Checked: exit codes, the terminal summary, and the report files (JSON read by a
strict parser, JUnit by an XML parser, every case that ran there once)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tracegrade.evaluation.run_records import list_runs
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.reporters import JSONReporter
from tracegrade.store import TraceStore

pytest_plugins = ["pytester"]

# Asked about Bergen it looks up Oslo (a failing case); a query saying "crash" raises with an ESC sequence in its
# message, one saying "interrupt" raises KeyboardInterrupt, as Ctrl-C does in the middle of a run.
AGENT = """
import re
from tracegrade import trace_node, trace_tool

WEATHER = {"Paris": "sunny", "Oslo": "snowy", "Bergen": "rainy"}

@trace_tool
def get_weather(city: str) -> str:
    return f"{city} is {WEATHER.get(city, 'unknown')}"

@trace_node("agent")
def agent(text: str) -> str:
    if "crash" in text:
        raise ValueError("model said \\x1b[31mred\\x1b[0m")
    if "interrupt" in text:
        raise KeyboardInterrupt
    cities = [c for c in re.findall(r"[A-Z][a-z]+", text) if c in WEATHER]
    if "Bergen" in cities:
        cities = ["Oslo"]
    return " ".join(get_weather(c) + "." for c in cities)
"""

TEST_FILE = """
from agent import agent
from tracegrade import CriteriaConfig, CriterionConfig, EvalConfig, assert_eval_passed, parametrize_eval_cases
from tracegrade.testing import run_eval_sync

CONFIG = EvalConfig(criteria=CriteriaConfig(trajectory=CriterionConfig.trajectory(check_args=True)))

@parametrize_eval_cases("{cases}")
def test_case(eval_case, tracegrade_app):
    app, collector = tracegrade_app(agent)
    assert_eval_passed(run_eval_sync(app, collector, eval_case, CONFIG))
"""

# raw C0 controls but tab and newline, DEL and C1 controls: what must not reach a terminal from user data
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _case(eval_id: str, query: str, city: str = "Paris", **metadata: str) -> dict[str, object]:
    return {
        "eval_id": eval_id,
        "metadata": metadata,
        "conversation": [
            {
                "user_content": {"role": "user", "content": query},
                "expected_tool_trajectory": [{"name": "get_weather", "args": {"city": city}}],
            }
        ],
    }


def _project(pytester: pytest.Pytester, files: dict[str, list[dict[str, object]]]) -> None:
    """The agent and, per ``test_<name>.py``, a parametrized test over the cases of ``<name>.json``."""
    pytester.makepyfile(agent=AGENT)
    for name, cases in files.items():
        pytester.makepyfile(**{f"test_{name}": TEST_FILE.format(cases=f"{name}.json")})
        data = {"eval_set_id": "weather", "eval_cases": cases}
        pytester.path.joinpath(f"{name}.json").write_text(json.dumps(data), encoding="utf-8")


def _strict_json(path: Path) -> dict[str, object]:
    def refuse(constant: str) -> object:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)  # type: ignore[no-any-return]


def _summary(result: pytest.RunResult) -> list[str]:
    lines = result.outlines
    return lines[next(i for i, line in enumerate(lines) if "= tracegrade =" in line) :]


@pytest.mark.slow
def test_a_worker_stopped_by_ctrl_c_sends_each_of_its_cases_once(pytester: pytest.Pytester) -> None:
    # --dist loadfile: one worker grades p0 and the odd id, then its agent is interrupted; xdist reports such a
    # worker down twice, and each time its cases were added to the session's report again
    _project(
        pytester,
        {
            "a": [
                _case("p0", "Paris?"),
                _case("a::b 漢字\nx", "Paris?"),
                _case("stop", "interrupt"),
                _case("q0", "Paris?"),
            ],
            "b": [_case("r0", "Paris?"), _case("r1", "Paris?")],
        },
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile", "--tracegrade-report", "out"
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.INTERRUPTED
    report = _strict_json(pytester.path / "out" / "weather.json")
    ids = [case["eval_id"] for case in report["results"]]  # type: ignore[attr-defined]
    assert len(ids) == len(set(ids)), ids
    assert {"p0", "a::b 漢字\nx"} <= set(ids) and not {"stop", "q0"} & set(ids)
    assert report["metadata"]["incomplete"] == "the session was interrupted"  # type: ignore[index]
    junit = ET.parse(pytester.path / "out" / "weather_junit.xml").getroot()
    assert sorted(case.get("name") for case in junit.iter("testcase")) == sorted(ids)
    summary = _summary(result)
    assert f"{len(ids)} case(s) graded: {len(ids)} passed, 0 failed, 0 errors" in summary
    # the six collected tests grade a case each: the controller, which collects nothing, learns them from workers
    assert f"incomplete: interrupted after {len(ids)} of 6 cases" in summary


def _baseline(path: Path, eval_ids: list[str]) -> Path:
    """A saved report in which every case of ``eval_ids`` passed."""
    passed = [CriterionResult.success("tool_trajectory_avg_score", 1.0, 1.0, {"reason": "matched"})]
    cases = [EvalCaseResult.success(eval_id, passed) for eval_id in eval_ids]
    return Path(JSONReporter().save(EvalReport.create("weather", cases), path))


def test_failure_messages_and_the_summary_show_escape_sequences_from_cases_as_text(pytester: pytest.Pytester) -> None:
    escaped_id, reason = "wipe\x1b[2J", "looks up Oslo \x1b]0;retitled\x07"
    cases = [
        _case("paris", "Paris?"),
        _case(escaped_id, "Bergen?", "Bergen"),
        _case("crash", "crash"),
        _case("known", "Bergen?", "Bergen", xfail=reason),
    ]
    _project(pytester, {"hostile": cases})
    baseline = _baseline(pytester.path / "baseline.json", [str(c["eval_id"]) for c in cases])
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--color=no", "-rx", "--tracegrade-baseline", str(baseline)
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=2, xfailed=1)
    output = "\n".join(result.outlines + result.errlines)
    assert RAW_CONTROL.findall(output) == []
    result.stdout.fnmatch_lines(
        [
            r"*Failed cases: wipe\x1b[[]2J*",  # the assertion's message
            r"*error: Agent error on turn 0: ValueError: model said \x1b[[]31mred\x1b[[]0m (at agent.py:*",
            r"*XFAIL*known*looks up Oslo \x1b]0;retitled\x07*",  # pytest's line, from the xfail mark's reason
        ]
    )
    summary = _summary(result)
    assert "expected to fail (test_hostile.py::test_case[known]):" in summary  # the plugin explains it
    assert any(line.startswith(r"  wipe\x1b[2J: pass->fail") for line in summary)  # a flip the gate lists


def test_a_last_failed_rerun_is_reported_but_neither_gated_nor_recorded(pytester: pytest.Pytester) -> None:
    # `pytest --lf` grades last time's failures only: recorded, it became the store's `latest`, and the next
    # session gated against it compared those few cases, leaving every other regression unseen
    _project(
        pytester, {"weather": [_case(f"paris-{i}", "Paris?") for i in range(3)] + [_case("b", "Bergen?", "Bergen")]}
    )
    first = pytester.runpytest_subprocess("--tracegrade-store", "runs.duckdb")
    first.assert_outcomes(passed=3, failed=1)
    rerun = pytester.runpytest_subprocess(
        "--lf", "--tracegrade-store", "runs.duckdb", "--tracegrade-baseline", "latest", "--tracegrade-report", "out"
    )  # fmt: skip
    rerun.assert_outcomes(failed=1)  # the three others were deselected
    assert rerun.ret == pytest.ExitCode.TESTS_FAILED
    why = "the session reran only the tests that failed last time (--lf)"
    assert f"not gated or recorded: {why}, so these cases are only part of the run" in _summary(rerun)
    report = _strict_json(pytester.path / "out" / "weather.json")
    assert report["metadata"]["incomplete"] == why  # type: ignore[index]
    assert [case["eval_id"] for case in report["results"]] == ["b"]  # type: ignore[attr-defined]
    with TraceStore(pytester.path / "runs.duckdb") as store:
        assert [run.total_cases for run in list_runs(store)] == [4]  # the whole first session alone
