"""The examples run offline as documented (``python examples/<name>/run.py OUT_DIR``), print the console
report, write their reports, and show exactly the failures they were designed to show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.examples import run_example

# example -> (cases that must fail, cases that must pass)
EXPECTED = {
    "langgraph_weather": ({"berlin-forecast"}, {"paris-weather", "compare-two-cities", "greeting", "two-turns"}),
    "pydantic_ai_support": ({"cancel-shipped"}, {"order-status", "cancel-processing"}),
    "recorded": (
        {"pydantic-ai-wrong-city", "adk-content-off"},
        {"langgraph-openinference", "langgraph-traceloop", "adk-content-captured"},
    ),
}


@pytest.mark.parametrize("example", sorted(EXPECTED))
def test_example_runs_offline_and_reports_its_designed_failure(example: str, tmp_path: Path):
    out = tmp_path / "out"
    done = run_example(example, out)
    must_fail, must_pass = EXPECTED[example]
    for eval_id in must_fail | must_pass:
        assert eval_id in done.stdout, (eval_id, done.stdout[-3000:])
    report = json.loads(next(out.glob("*.json")).read_text())
    outcome = {r["eval_id"]: r["passed"] for r in report["results"]}
    assert {k for k, passed in outcome.items() if not passed} == must_fail, report["results"]
    assert {k for k, passed in outcome.items() if passed} == must_pass
    assert list(out.glob("*.html"))
    assert not any(r.get("error") for r in report["results"] if r["eval_id"] in must_pass)
