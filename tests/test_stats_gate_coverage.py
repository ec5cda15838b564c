"""The gate doubts a comparison whose paired cases may not stand for the candidate: an interrupted run (marked
``metadata.incomplete``) or baseline cases the candidate lacks. Both used to pass on the cases that happened to
be paired, so a candidate that stopped after its good cases, or lost the ones it now fails, got an all-clear."""

from __future__ import annotations

from tracegrade.evaluation.compare import compare_runs
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport

CASES = 40


def _run(ids: range, *, metadata: dict[str, str] | None = None) -> EvalReport:
    results = [EvalCaseResult.success(f"case-{i}", [CriterionResult.success("quality", 1.0, 0.5)]) for i in ids]
    return EvalReport.create("coverage", results, metadata=metadata or {})


def test_the_same_cases_in_both_runs_pass() -> None:
    result = compare_runs(_run(range(CASES)), _run(range(CASES)))
    assert (result.verdict, result.reasons) == ("pass", [])


def test_new_cases_in_the_candidate_raise_no_doubt() -> None:
    assert compare_runs(_run(range(CASES)), _run(range(CASES + 5))).verdict == "pass"


def test_baseline_cases_missing_from_the_candidate_make_it_inconclusive() -> None:
    result = compare_runs(_run(range(CASES)), _run(range(30)), baseline_name="main", candidate_name="pr-7")
    assert result.verdict == "inconclusive"
    (reason,) = result.reasons
    assert reason.startswith("10 case(s) of baseline main are missing from candidate pr-7 (case-30, case-31, case-3")
    assert reason.endswith("grade them in the candidate run, or take a baseline of the current eval set")
    assert result.only_baseline == [f"case-{i}" for i in range(30, CASES)]


def test_an_interrupted_candidate_is_inconclusive_saying_so() -> None:
    stopped = "the run was interrupted after 40 of 60 cases"
    result = compare_runs(_run(range(CASES)), _run(range(CASES), metadata={"incomplete": stopped}))
    assert result.verdict == "inconclusive"
    assert result.reasons == [f"the candidate run is incomplete ({stopped}): only its finished cases are compared"]
