"""The pytest plugin on hostile sessions, run as users run them (real pytest processes, real pytest-xdist workers):
a KeyboardInterrupt inside an agent under ``-n 2``, case ids, agent errors and xfail reasons holding terminal escape
sequences, and a ``--lf`` rerun. Checked: exit codes, the terminal summary, and the report files (JSON read by a
strict parser, JUnit by an XML parser, every case that ran there once)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from tests.support.plugin_sessions import baseline_report, make_project, strict_json, summary_lines, weather_case
from tracegrade.evaluation.run_records import list_runs
from tracegrade.store import TraceStore

pytest_plugins = ["pytester"]

# raw C0 controls but tab and newline, DEL and C1 controls: what must not reach a terminal from user data
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.mark.slow
def test_a_worker_stopped_by_ctrl_c_sends_each_of_its_cases_once(pytester: pytest.Pytester) -> None:
    # --dist loadfile: one worker grades p0 and the odd id, then its agent is interrupted; xdist reports such a
    # worker down twice, and each time its cases were added to the session's report again
    make_project(
        pytester,
        {
            "a": [
                weather_case("p0", "Paris?"),
                weather_case("a::b 漢字 x", "Paris?"),
                weather_case("stop", "interrupt"),
                weather_case("q0", "Paris?"),
            ],
            "b": [weather_case("r0", "Paris?"), weather_case("r1", "Paris?")],
        },
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile", "--tracegrade-report", "out"
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.INTERRUPTED
    report = strict_json(pytester.path / "out" / "weather.json")
    ids = [case["eval_id"] for case in report["results"]]  # type: ignore[attr-defined]
    assert len(ids) == len(set(ids)), ids
    assert {"p0", "a::b 漢字 x"} <= set(ids) and not {"stop", "q0"} & set(ids)
    assert report["metadata"]["incomplete"] == "the session was interrupted"  # type: ignore[index]
    junit = ET.parse(pytester.path / "out" / "weather_junit.xml").getroot()
    assert sorted(case.get("name") for case in junit.iter("testcase")) == sorted(ids)
    summary = summary_lines(result)
    assert f"{len(ids)} case(s) graded: {len(ids)} passed, 0 failed, 0 errors" in summary
    # the six collected tests grade a case each: the controller, which collects nothing, learns them from workers
    assert f"incomplete: interrupted after {len(ids)} of 6 cases" in summary


def test_failure_messages_and_the_summary_show_escape_sequences_from_cases_as_text(pytester: pytest.Pytester) -> None:
    # (a case id cannot hold a control character: tests/test_eval_file_ids.py; errors and reasons can)
    reason = "looks up Oslo \x1b]0;retitled\x07"
    cases = [
        weather_case("paris", "Paris?"),
        weather_case("wipe", "Bergen?", "Bergen"),
        weather_case("crash", "crash"),
        weather_case("known", "Bergen?", "Bergen", xfail=reason),
    ]
    make_project(pytester, {"hostile": cases})
    baseline = baseline_report(pytester.path / "baseline.json", [str(c["eval_id"]) for c in cases])
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--color=no", "-rx", "--tracegrade-baseline", str(baseline)
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=2, xfailed=1)
    output = "\n".join(result.outlines + result.errlines)
    assert RAW_CONTROL.findall(output) == []
    result.stdout.fnmatch_lines(
        [
            "*Failed cases: wipe*",  # the assertion's message
            r"*error: Agent error on turn 0: ValueError: model said \x1b[[]31mred\x1b[[]0m (at agent.py:*",
            r"*XFAIL*known*looks up Oslo \x1b]0;retitled\x07*",  # pytest's line, from the xfail mark's reason
        ]
    )
    summary = summary_lines(result)
    assert "expected to fail (test_hostile.py::test_case[known]):" in summary  # the plugin explains it
    assert any(line.startswith("  wipe: pass->fail") for line in summary)  # a flip the gate lists


def test_a_last_failed_rerun_is_reported_but_neither_gated_nor_recorded(pytester: pytest.Pytester) -> None:
    # `pytest --lf` grades last time's failures only: recorded, it became the store's `latest`, and the next
    # session gated against it compared those few cases, leaving every other regression unseen
    make_project(
        pytester,
        {
            "weather": [weather_case(f"paris-{i}", "Paris?") for i in range(3)]
            + [weather_case("b", "Bergen?", "Bergen")]
        },
    )
    first = pytester.runpytest_subprocess("--tracegrade-store", "runs.duckdb")
    first.assert_outcomes(passed=3, failed=1)
    rerun = pytester.runpytest_subprocess(
        "--lf", "--tracegrade-store", "runs.duckdb", "--tracegrade-baseline", "latest", "--tracegrade-report", "out"
    )  # fmt: skip
    rerun.assert_outcomes(failed=1)  # the three others were deselected
    assert rerun.ret == pytest.ExitCode.TESTS_FAILED
    why = "the session reran only the tests that failed last time (--lf)"
    assert f"not gated or recorded: {why}, so these cases are only part of the run" in summary_lines(rerun)
    report = strict_json(pytester.path / "out" / "weather.json")
    assert report["metadata"]["incomplete"] == why  # type: ignore[index]
    assert [case["eval_id"] for case in report["results"]] == ["b"]  # type: ignore[attr-defined]
    with TraceStore(pytester.path / "runs.duckdb") as store:
        assert [run.total_cases for run in list_runs(store)] == [4]  # the whole first session alone
