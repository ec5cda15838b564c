"""The pytest plugin with a store: each session recorded as a run (``--tracegrade-store``), the next one gated
against a stored run (``--tracegrade-baseline latest`` / ``latest~N`` / a run id), failing only on a
significant regression. Real pytest sessions (``pytester``) on a traced agent whose faults an environment
variable switches on, and a real DuckDB store file read back with the ``tracegrade runs`` command."""

from __future__ import annotations

import json
import re
import shlex

import pyarrow.dataset  # noqa: F401  (DuckDB's Arrow writes import it; in-process sessions would forget it)
import pytest
from click.testing import CliRunner

import tracegrade.capture.helpers
import tracegrade.evaluation.evaluator
import tracegrade.store
import tracegrade.testing.running  # noqa: F401  (one copy of tracegrade's modules for every in-process session)
from tracegrade.cli.main import cli
from tracegrade.evaluation.run_records import list_runs
from tracegrade.store import TraceStore

pytest_plugins = ["pytester"]

CITIES = ["Paris", "Oslo", "Bergen", "Lima", "Quito", "Cairo", "Dakar", "Hanoi", "Riga", "Tunis", "Sofia", "Perth"]

# Looks up each city it is asked about, except the ones in BROKEN_CITIES: for those it looks up Oslo.
AGENT = """
import os
import re
from tracegrade import trace_node, trace_tool

@trace_tool
def get_weather(city: str) -> str:
    return f"{city} is mild"

@trace_node("agent")
def agent(text: str) -> str:
    broken = set(filter(None, os.environ.get("BROKEN_CITIES", "").split(",")))
    cities = ["Oslo" if c in broken else c for c in re.findall(r"[A-Z][a-z]+", text) if c != "Weather"]
    return " ".join(get_weather(c) + "." for c in cities)
"""

# Grades every case and asserts nothing: only the baseline gate can fail these sessions.
TEST_FILE = """
from agent import agent
from tracegrade import CriteriaConfig, CriterionConfig, EvalConfig, parametrize_eval_cases
from tracegrade.testing import run_eval_sync

CONFIG = EvalConfig(criteria=CriteriaConfig(trajectory=CriterionConfig.trajectory(check_args=True)))

@parametrize_eval_cases("cases.json")
def test_case(eval_case, tracegrade_app):
    app, collector = tracegrade_app(agent)
    run_eval_sync(app, collector, eval_case, CONFIG)
"""


def _project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cities: list[str]) -> pytest.Pytester:
    """The agent, the test file and an eval set of one case per city (its eval id the city in lower case)."""
    cases = [
        {
            "eval_id": city.lower(),
            "conversation": [
                {
                    "user_content": {"role": "user", "content": f"Weather in {city}?"},
                    "expected_tool_trajectory": [{"name": "get_weather", "args": {"city": city}}],
                }
            ],
        }
        for city in cities
    ]
    pytester.makepyfile(agent=AGENT, test_weather=TEST_FILE)
    pytester.path.joinpath("cases.json").write_text(json.dumps({"eval_set_id": "weather", "eval_cases": cases}))
    monkeypatch.delenv("TRACEGRADE_STORE", raising=False)
    monkeypatch.delenv("BROKEN_CITIES", raising=False)
    return pytester


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return _project(pytester, monkeypatch, CITIES)


def _session(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, broken: list[str], *args: str):
    monkeypatch.setenv("BROKEN_CITIES", ",".join(broken))
    return project.runpytest("-p", "no:cacheprovider", "--tracegrade-store", "runs.duckdb", *args)


def _runs(project: pytest.Pytester) -> list[tuple[str, int]]:
    with TraceStore(project.path / "runs.duckdb") as store:
        return [(r.run_id, r.passed_cases) for r in list_runs(store)]


def test_sessions_are_recorded_and_gated_against_stored_runs(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = _session(project, monkeypatch, [])
    good.assert_outcomes(passed=12)
    assert good.ret == 0
    [(first_run, passed)] = _runs(project)
    assert passed == 12
    good.stdout.fnmatch_lines([f"recorded run {first_run} in runs.duckdb"])

    # one case regressed: not significant, the session passes and shows it
    noise = _session(project, monkeypatch, ["Lima"], "--tracegrade-baseline", "latest")
    assert noise.ret == 0
    noise.stdout.fnmatch_lines(
        [
            f"baseline {first_run}: gate pass (12 paired cases, alpha 0.05)",
            "  cases: pass rate 100% -> 92% (1 pass->fail, 0 fail->pass, *",
            "  lima: pass->fail (tool_trajectory_avg_score) at *Lima*Oslo*",
        ]
    )
    assert len(_runs(project)) == 2  # the second session is recorded after it was gated

    # nine cases regressed against the first run (latest~1 now): significant, the session fails
    regressed = _session(project, monkeypatch, CITIES[3:], "--tracegrade-baseline", "latest~1")
    regressed.assert_outcomes(passed=12)  # every test passed; the gate failed the session
    assert regressed.ret == pytest.ExitCode.TESTS_FAILED
    regressed.stdout.fnmatch_lines(
        [
            f"baseline {first_run}: gate fail (12 paired cases, alpha 0.05)",
            "  REGRESSED cases: pass rate 100% -> 25% (9 pass->fail, 0 fail->pass, *",
        ]
    )
    # the same regression against the first run named by a prefix of its id
    by_id = _session(project, monkeypatch, CITIES[3:], "--tracegrade-baseline", first_run[:-2])
    assert by_id.ret == pytest.ExitCode.TESTS_FAILED
    by_id.stdout.fnmatch_lines([f"baseline {first_run[:-2]}*: gate fail *"])
    # and the CLI lists what the sessions recorded
    listed = CliRunner().invoke(cli, ["runs", "--store", str(project.path / "runs.duckdb"), "--format", "json"])
    assert listed.exit_code == 0, listed.output
    assert sorted(r["passed_cases"] for r in json.loads(listed.output)) == [3, 3, 11, 12]


def test_max_drop_fails_a_drop_too_small_to_be_significant(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _session(project, monkeypatch, []).ret == 0
    two = _session(project, monkeypatch, ["Lima", "Riga"], "--tracegrade-baseline", "latest")
    assert two.ret == 0
    two.stdout.fnmatch_lines(["baseline *: gate pass *", "  cases: pass rate 100% -> 83% (2 pass->fail*"])
    capped = _session(
        project, monkeypatch, ["Lima", "Riga"], "--tracegrade-baseline", "latest~1", "--tracegrade-max-drop", "0.1"
    )
    assert capped.ret == pytest.ExitCode.TESTS_FAILED
    capped.stdout.fnmatch_lines(["baseline *: gate fail *max drop 0.1)", "  REGRESSED cases: pass rate 100% -> 83% *"])


def test_a_baseline_the_store_cannot_give_is_a_usage_error(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACEGRADE_STORE", str(project.path / "cli.duckdb"))  # the CLI's store: not the plugin's
    missing_store = project.runpytest("-p", "no:cacheprovider", "--tracegrade-baseline", "latest")
    assert missing_store.ret == pytest.ExitCode.USAGE_ERROR
    missing_store.stderr.fnmatch_lines(["*'latest': no report file 'latest', and no store to look it up in*"])
    assert project.runpytest("-p", "no:cacheprovider").ret == 0
    assert not (project.path / "cli.duckdb").exists()
    assert _session(project, monkeypatch, []).ret == 0
    too_far = _session(project, monkeypatch, [], "--tracegrade-baseline", "latest~3")
    assert too_far.ret == pytest.ExitCode.USAGE_ERROR
    too_far.stderr.fnmatch_lines(["*'latest~3' needs at least 4 recorded run(s), the store has 1*"])
    unknown = _session(project, monkeypatch, [], "--tracegrade-baseline", "no-such-run")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR
    unknown.stderr.fnmatch_lines(["*no-such-run*"])
    assert len(_runs(project)) == 1  # sessions refused at the start record nothing
    bad_alpha = project.runpytest("-p", "no:cacheprovider", "--tracegrade-alpha", "1.5")
    assert bad_alpha.ret == pytest.ExitCode.USAGE_ERROR


@pytest.mark.parametrize("stop", ["interrupt", "maxfail"])
def test_a_session_that_stops_early_is_reported_but_neither_recorded_nor_gated(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, stop: str
) -> None:
    assert _session(project, monkeypatch, []).ret == 0
    # Ctrl-C, or -x after a failure, when the sixth of the twelve cases is about to run
    raised = "KeyboardInterrupt" if stop == "interrupt" else "AssertionError('stop here')"
    project.makeconftest(f"def pytest_runtest_call(item):\n    if 'lima' in item.nodeid:\n        raise {raised}\n")
    args = ["-p", "no:cacheprovider", "--tracegrade-store", "runs.duckdb", "--tracegrade-baseline", "latest"]
    args += ["--tracegrade-report", "out"]
    monkeypatch.setenv("BROKEN_CITIES", ",".join(CITIES))
    # an interrupt runs in a process of its own: in this one it would end this session too
    partial = project.runpytest_subprocess(*args) if stop == "interrupt" else project.runpytest(*args, "-x")
    assert partial.ret == (pytest.ExitCode.INTERRUPTED if stop == "interrupt" else pytest.ExitCode.TESTS_FAILED)
    why = (
        "the session was interrupted"
        if stop == "interrupt"
        else "the session stopped early (stopping after 1 failures)"
    )
    partial.stdout.fnmatch_lines([f"not gated or recorded: {why}, so these cases are only part of the run"])
    assert "baseline" not in partial.stdout.str()  # no gate verdict
    assert len(_runs(project)) == 1  # the partial session did not become `latest`
    report = json.loads(next((project.path / "out").glob("*.json")).read_text())
    assert report["metadata"]["incomplete"] == why
    assert report["summary"]["total_cases"] == 3  # Paris, Oslo, Bergen: graded before the stop


def test_a_baseline_that_shares_no_case_fails_the_session(project: pytest.Pytester) -> None:
    first = project.runpytest("-p", "no:cacheprovider", "--tracegrade-report", "out")
    assert first.ret == 0
    report = json.loads((project.path / "out" / "weather.json").read_text())
    for case in report["results"]:
        case["eval_id"] = "renamed-" + case["eval_id"]
    (project.path / "other.json").write_text(json.dumps(report))
    gated = project.runpytest("-p", "no:cacheprovider", "--tracegrade-baseline", "other.json")
    assert gated.ret == pytest.ExitCode.TESTS_FAILED
    gated.stdout.fnmatch_lines(["problem: the baseline other.json shares no case with this session: nothing*"])


TOWNS = [f"T{a}{b}" for a in "abc" for b in "abcdefghijklmnopqrst"]  # 60 names the agent reads as cities


def test_the_gate_summary_lists_regressions_first_and_at_most_50_flips_saying_where_all_are(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _project(pytester, monkeypatch, TOWNS)
    assert _session(project, monkeypatch, TOWNS[:30]).ret == 0
    [(first_run, _)] = _runs(project)
    # the first 30 towns fixed, the other 30 broken: 60 flipped cases, the improvements first in run order
    swapped = _session(project, monkeypatch, TOWNS[30:], "--tracegrade-baseline", "latest")
    assert swapped.ret == 0
    second_run = next(run for run, _ in _runs(project) if run != first_run)
    lines = swapped.stdout.lines
    flips = [line.split(":")[0].strip() for line in lines if re.match(r"  t\w\w: (pass->fail|fail->pass)", line)]
    assert flips == [t.lower() for t in TOWNS[30:]] + [t.lower() for t in TOWNS[:20]]
    hint = f"`tracegrade diff {first_run} {second_run} --store runs.duckdb` lists them all"
    assert f"  The first 50 of 60 flipped cases (30 pass->fail, 30 fail->pass); {hint}" in lines

    listed = CliRunner().invoke(cli, [*shlex.split(hint.split("`")[1])[1:], "--format", "json"])
    assert listed.exit_code == 0, listed.output
    assert len(json.loads(listed.output)["statistics"]["flips"]) == 60

    # every town fixed against the first run: an improvement, said as such
    fixed = _session(project, monkeypatch, [], "--tracegrade-baseline", first_run)
    assert fixed.ret == 0
    fixed.stdout.fnmatch_lines(
        [
            f"baseline {first_run}: gate pass (60 paired cases, alpha 0.05)",
            "  case pass rate improved significantly: pass rate 50% → 100%, *",
            "  IMPROVED cases: pass rate 50% -> 100% (0 pass->fail, 30 fail->pass, *",
        ]
    )
