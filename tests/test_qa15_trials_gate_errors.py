"""A judge that fails in one run is no regression of the agent: ``tracegrade gate`` on two live runs of one agent,
graded by an LLM judge (a real litellm against the scripted local server) that answers in the baseline and answers
HTTP 500 for some or all cases in the candidate.

An errored criterion scores 0 and fails its case, so the gate compared those cases as pass -> fail: a judge outage
in the candidate exited 1 ("case pass rate regressed significantly") though the agent had not changed. ``tracegrade
diff`` went on calling those cases regressed (and ``--fail-on-regression`` exited 1) after its statistics said
inconclusive.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.grading_cli import run_cli
from tests.support.judges_setup import fresh_server, judge_config, scripted_server  # noqa: F401
from tests.support.llm_server import LLMServer, ReceivedRequest, Reply
from tests.support.order_cases import ORDER_CASES, ORDERS, answer_order
from tracegrade import AgentEvaluator
from tracegrade.evaluation.compare import compare_runs
from tracegrade.models import CriteriaConfig, CriterionConfig, EvalConfig, ReporterConfig
from tracegrade.models.results import EvalReport

JUDGED = "final_response_match_v2"  # the llm_judge slot's criterion


def _graded(server: LLMServer, path: Path, down_below: int, agent: Callable[[str], str] = answer_order) -> Path:
    """A run of every case by ``agent``, the judge answering HTTP 500 about orders below ``down_below``; its report
    saved."""

    def respond(request: ReceivedRequest) -> Reply:
        down = any(f"Order {n} ships" in request.prompt for n in range(down_below))
        return Reply.server_error(500) if down else Reply.score(1.0, "matches")

    server.responder = respond
    config = EvalConfig(
        criteria=CriteriaConfig(
            rouge_match=CriterionConfig.rouge_match(threshold=0.5), llm_judge=judge_config(server, threshold=0.5)
        ),
        reporter=ReporterConfig(enabled=False),
        judge_cache=False,
        judge_retry_base_seconds=0.01,
    )
    AgentEvaluator(agent, config=config).evaluate_sync(ORDERS).to_file(path)
    return path


def _gate(tmp_path: Path, baseline: Path, candidate: Path):
    return run_cli("gate", "--baseline", baseline, "--candidate", candidate, "--out", tmp_path / "gate")


def test_a_judge_down_for_some_cases_of_the_candidate_is_inconclusive_not_a_regression(server, tmp_path: Path):
    baseline = _graded(server, tmp_path / "base.json", down_below=0)
    candidate = _graded(server, tmp_path / "cand.json", down_below=12)
    judged = {r.eval_id: r.get_criterion_result(JUDGED) for r in EvalReport.from_file(candidate).results}
    assert [k for k, c in judged.items() if c is not None and c.is_error] == [f"order-{n}" for n in range(12)]

    gate = _gate(tmp_path, baseline, candidate)
    assert gate.exit_code == 0, gate.output
    assert "tracegrade gate: inconclusive" in gate.stdout
    assert f"`{candidate}`: 18 paired cases" in gate.stdout
    why = f"(first 'order-0': {JUDGED} errored in {candidate}: All LLM samples failed)"
    assert f"12 case(s) in both runs are not compared: a criterion errored on them {why}" in gate.stdout
    assert "regressed" not in gate.stdout

    result = compare_runs(EvalReport.from_file(baseline), EvalReport.from_file(candidate))
    assert result.ungraded == [f"order-{n}" for n in range(12)] and result.paired_cases == 18
    assert all(m.pairs == 18 and m.pass_to_fail == 0 for m in result.metrics)


def test_a_judge_down_for_every_case_of_the_candidate_compares_nothing_and_says_why(server, tmp_path: Path):
    baseline = _graded(server, tmp_path / "base.json", down_below=0)
    candidate = _graded(server, tmp_path / "cand.json", down_below=ORDER_CASES)

    gate = _gate(tmp_path, baseline, candidate)
    assert gate.exit_code == 2, gate.output
    assert "nothing was compared: 30 case(s) in both runs are not compared: a criterion errored on them" in gate.stderr
    assert f"(first 'order-0': {JUDGED} errored in {candidate}: All LLM samples failed)" in gate.stderr
    assert "share no case" not in gate.stderr


def _loses_order_20(message: str) -> str:
    """The agent with a real fault: order 20's answer loses every word ROUGE compares (the judge still answers)."""
    return "Lost." if message.endswith(" 20?") else answer_order(message)


def test_diff_lists_cases_a_judge_errored_on_apart_and_fails_on_regression_only_for_real_ones(
    server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # rich would wrap the errors' lines at 80 columns
    baseline = _graded(server, tmp_path / "base.json", down_below=0)
    outage = _graded(server, tmp_path / "outage.json", down_below=12)
    errors = [f"order-{n}: {JUDGED} errored in {outage}: All LLM samples failed" for n in range(12)]

    table = run_cli("diff", baseline, outage, "--fail-on-regression")
    assert table.exit_code == 0, table.output
    assert "0 regressed, 0 improved, 0 changed, 18 unchanged, 0 added, 0 removed, 12 errored" in table.stdout
    listed = table.stdout.split("errored: 12 case(s) not compared, a criterion errored on them;")[1]
    assert [line.strip() for line in listed.splitlines()[1:13]] == errors
    assert "(regressed)" not in table.stdout  # no criterion of theirs is shown as regressed
    assert not [line for line in table.stdout.splitlines() if line.startswith("pass->fail")]  # nor as a flip
    assert "verdict at alpha 0.05: inconclusive" in table.stdout
    assert "--fail-on-regression: 12 case(s) a criterion errored on are not counted as regressions" in table.stderr

    data = json.loads(run_cli("diff", baseline, outage, "--format", "json").stdout)
    assert data["summary"]["errored"] == 12 and data["summary"]["regressed"] == 0
    errored = [c for c in data["cases"] if c["kind"] == "errored"]
    assert [c["eval_id"] for c in errored] == [f"order-{n}" for n in range(12)]
    (judged,) = [x for x in errored[0]["criteria"] if x["criterion"] == JUDGED]
    assert (judged["kind"], judged["error_a"], judged["error_b"]) == ("errored", None, "All LLM samples failed")
    assert data["statistics"]["ungraded"] == [c["eval_id"] for c in errored]  # the statistics leave out the same

    # a real regression beside the outage still fails, and is told apart from it
    broken = _graded(server, tmp_path / "broken.json", down_below=12, agent=_loses_order_20)
    both = run_cli("diff", baseline, broken, "--fail-on-regression")
    assert both.exit_code == 1, both.output
    assert "1 regressed, 0 improved, 0 changed, 17 unchanged, 0 added, 0 removed, 12 errored" in both.stdout
    assert "--fail-on-regression: 12 case(s) a criterion errored on are not counted" in both.stderr
