"""``eval_test`` in a real pytest session: a failing test explains each failed case once, and the run prints
nothing on its own (no progress lines), as ``run_eval`` never does."""

from __future__ import annotations

import textwrap

import pytest

import tracegrade.testing.running  # noqa: F401  (one copy of tracegrade's modules for every pytester session)
from tests.test_pytest_plugin import _project

pytest_plugins = ["pytester"]

DECORATED = """
import pytest
from agent import agent
from tracegrade import CriteriaConfig, CriterionConfig, EvalConfig, eval_test

CONFIG = EvalConfig(criteria=CriteriaConfig(trajectory=CriterionConfig.trajectory(check_args=True)))

@eval_test("cases.json", config=CONFIG)
def test_sync():
    return agent

@pytest.mark.asyncio
@eval_test("cases.json", config=CONFIG)
async def test_async():
    return agent
"""


def test_a_failing_eval_test_explains_once_and_prints_no_progress(pytester: pytest.Pytester) -> None:
    _project(pytester)
    pytester.makepyfile(test_decorated=textwrap.dedent(DECORATED))
    result = pytester.runpytest("-p", "no:cacheprovider", "-rN", "test_decorated.py")
    result.assert_outcomes(failed=2)
    output = result.stdout.str()
    assert "During handling of the above exception" not in output
    assert output.count("Evaluation pass rate 50.0% below threshold 100.0%. Failed cases: bergen") == 2  # one a test
    # each test: once in the criterion's reason, once in its list of mismatched arguments (which shows every call)
    assert output.count("key 'city': expected 'Bergen', got 'Oslo'") == 4
    assert output.count("mismatched arguments:") == 2
    assert "[1/2]" not in output and "[2/2]" not in output  # run_eval's verbose progress lines
