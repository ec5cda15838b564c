"""A SQL assertion that never ends is stopped, in the sandbox ``tracegrade grade`` and ``AgentEvaluator`` use
(not only a receiver's): at its ``timeout_seconds``, as an error result naming the limit, and at Ctrl+C."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tracegrade.criteria.registry import build_criteria
from tracegrade.criteria.running import evaluate_all
from tracegrade.criteria.sql_assertion import SqlAssertionCriterion
from tracegrade.errors import InvalidValueError
from tracegrade.models import EvalCase, ExecutionResult, ToolCall
from tracegrade.models.config import CriteriaConfig, SqlAssertion

CASE = EvalCase(eval_id="case", conversation=[])
EXECUTION = ExecutionResult(tool_calls=[ToolCall(name="lookup", args={"sku": "1"})], trace_ids=["t1"])
# reads no row of the case and returns none, but counts past 10^15 first: it does not end in a test's lifetime
NEVER_ENDS = "SELECT count(*) AS n FROM range(1000000000000000) t(i) HAVING count(*) < 0"


def test_a_runaway_assertion_is_stopped_at_its_timeout_and_graded_as_an_error() -> None:
    config = CriteriaConfig(sql_assertions=[SqlAssertion(name="runaway", query=NEVER_ENDS, timeout_seconds=0.5)])
    (criterion,) = build_criteria(config)
    (result,) = asyncio.run(evaluate_all([criterion], EXECUTION, CASE))
    assert result.criterion == "sql_assertion:runaway" and not result.passed
    assert result.error is not None
    assert "ran longer than its time limit of 0.5 s (the assertion's timeout_seconds)" in result.error
    # the sandbox is usable afterwards: the next assertion on the same thread runs
    after = SqlAssertionCriterion("after", "SELECT name FROM tool_calls WHERE name <> 'lookup'")
    assert after.evaluate_sync(EXECUTION, CASE).passed


def test_every_assertion_has_a_time_limit_by_default_and_it_must_be_positive() -> None:
    assert SqlAssertion(name="a", query="SELECT 1 AS v WHERE false").timeout_seconds == 60.0
    assert SqlAssertionCriterion("a", "SELECT 1 AS v WHERE false").timeout_seconds == 60.0
    with pytest.raises(InvalidValueError, match="'a': timeout_seconds must be a number of seconds above 0"):
        SqlAssertionCriterion("a", "SELECT 1 AS v WHERE false", timeout_seconds=0)
    with pytest.raises(ValueError, match="timeout_seconds"):
        SqlAssertion(name="a", query="SELECT 1 AS v WHERE false", timeout_seconds=-1)


GRADER = textwrap.dedent(
    f"""
    import signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (a background job ignores it)
    from tracegrade.criteria.sql_assertion import SqlAssertionCriterion
    from tracegrade.models import EvalCase, ExecutionResult
    criterion = SqlAssertionCriterion("runaway", {NEVER_ENDS!r})
    print("grading", flush=True)
    try:
        criterion.evaluate_sync(ExecutionResult(trace_ids=["t1"]), EvalCase(eval_id="c", conversation=[]))
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
    print("finished", flush=True)
    """
)


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads a process's CPU time from /proc")
def test_ctrl_c_stops_a_running_assertion(tmp_path: Path) -> None:
    script = tmp_path / "grader.py"
    script.write_text(GRADER)
    process = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "grading"
        # the query is running once the grader has spent a second of CPU past its start (importing is done)
        started = _cpu_ticks(process.pid)
        tick = os.sysconf("SC_CLK_TCK")
        while _cpu_ticks(process.pid) < started + tick:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=120)  # only a guard: the old code never returned
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130 and out.strip() == "interrupted", err


@pytest.mark.parametrize(("rows", "counted", "said"), [(7, 7, "7"), (12_000, 10_000, "more than 10000")])
def test_violations_are_counted_past_those_shown_up_to_the_limit(rows: int, counted: int, said: str) -> None:
    result = SqlAssertionCriterion("many", f"SELECT i FROM range({rows}) t(i)").evaluate_sync(EXECUTION, CASE)
    assert not result.passed
    assert result.details["violations"] == counted
    assert result.details["violating_rows"] == [{"i": i} for i in range(5)]
    assert result.details.get("violations_counted_up_to") == (10_000 if rows > 10_000 else None)
    shown = ", ".join(f"{{'i': {i}}}" for i in range(5))
    assert result.details["reason"] == f"many: {said} violating rows (first 5 shown): [{shown}]"
