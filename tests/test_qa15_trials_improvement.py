"""A significant improvement is said, not only a regression: ``tracegrade gate`` and ``tracegrade diff`` on two
live runs of an agent whose every answer was wrong in the baseline and is right in the candidate.

All 30 cases went from fail to pass (adjusted p = 3.7e-09), and the gate said ``pass`` with no reason at all: the same
words as for two runs in which nothing changed.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.grading_cli import run_cli
from tests.support.order_cases import ORDERS, answer_order
from tracegrade import AgentEvaluator
from tracegrade.models import CriteriaConfig, CriterionConfig, EvalConfig, ReporterConfig


def _change(metric: str, change: str, pass_rates: str, mean: str) -> str:
    return f"{metric} {change} significantly: pass rate {pass_rates}, mean {mean}, adjusted p = 3.73e-09 < 0.05"


IMPROVED = [
    _change(metric, "improved", "0% → 100%", "+1.000 [+1.000, +1.000]")
    for metric in ("case pass rate", "criterion rouge_match")
]
REGRESSED = [
    _change(metric, "regressed", "100% → 0%", "-1.000 [-1.000, -1.000]")
    for metric in ("case pass rate", "criterion rouge_match")
]


def _loses_every_order(message: str) -> str:
    return "Lost."


def _graded(agent: Callable[[str], str], path: Path) -> Path:
    config = EvalConfig(
        criteria=CriteriaConfig(rouge_match=CriterionConfig.rouge_match(threshold=0.5)),
        reporter=ReporterConfig(enabled=False),
    )
    AgentEvaluator(agent, config=config).evaluate_sync(ORDERS).to_file(path)
    return path


def test_a_significant_improvement_is_said_and_the_verdict_stays_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # rich would wrap diff's reasons at 80 columns
    broken = _graded(_loses_every_order, tmp_path / "broken.json")
    fixed = _graded(answer_order, tmp_path / "fixed.json")

    gate = run_cli("gate", "--baseline", broken, "--candidate", fixed, "--out", tmp_path / "gate")
    assert gate.exit_code == 0, gate.output
    assert "tracegrade gate: pass" in gate.stdout
    assert [f"- {reason}" for reason in IMPROVED] == [line for line in gate.stdout.splitlines() if line[:2] == "- "]
    assert "| cases | 0% → 100% | 0/30 | 3.73e-09 |" in gate.stdout and gate.stdout.count("| ⬆️ |") == 2
    suite = ET.parse(tmp_path / "gate" / "junit.xml").getroot()
    assert (suite.get("failures"), suite.get("skipped")) == ("0", "0")

    listed = run_cli("gate", "--baseline", broken, "--candidate", fixed, "--out", tmp_path / "json", "--format", "json")
    data = json.loads(listed.stdout)
    assert (listed.exit_code, data["verdict"], data["reasons"]) == (0, "pass", IMPROVED)
    assert [m["significant_improvement"] for m in data["metrics"]] == [True, True]
    assert not any(m["significant_regression"] for m in data["metrics"])

    diff = run_cli("diff", broken, fixed, "--fail-on-regression")
    assert diff.exit_code == 0, diff.output
    assert "verdict at alpha 0.05: pass" in diff.stdout and f"  {IMPROVED[0]}" in diff.stdout

    # the other way round it is a regression, and nothing is said to have improved
    worse = run_cli("gate", "--baseline", fixed, "--candidate", broken, "--out", tmp_path / "back", "--format", "json")
    assert worse.exit_code == 1, worse.output
    back = json.loads(worse.stdout)
    assert (back["verdict"], back["reasons"]) == ("fail", REGRESSED)
    assert not any(m["significant_improvement"] for m in back["metrics"])
