"""Assertions for tests: a failing one says which cases and criteria failed, and why (its message shown as the
reports show text: no raw control characters from case ids or criterion names; see :mod:`tracegrade.testing.explain`).
"""

from __future__ import annotations

from tracegrade.models.results import EvalCaseResult, EvalReport
from tracegrade.reporters.text import clean_text, one_line
from tracegrade.testing.explain import explain_case, explain_criterion

__all__ = ["assert_criterion_passed", "assert_eval_passed"]


def _cases(outcome: EvalReport | EvalCaseResult) -> list[EvalCaseResult]:
    if isinstance(outcome, EvalCaseResult):
        return [outcome]
    if isinstance(outcome, EvalReport):
        return list(outcome.results)
    raise TypeError(f"expected an EvalReport or an EvalCaseResult, got {type(outcome).__name__}")


def assert_eval_passed(report: EvalReport | EvalCaseResult, min_pass_rate: float = 1.0) -> None:
    """Fail unless at least ``min_pass_rate`` of the cases passed; the message explains every failed case."""
    __tracebackhide__ = True  # pytest shows the caller's line, not this helper's
    assert_pass_rate(_cases(report), min_pass_rate)


def assert_pass_rate(cases: list[EvalCaseResult], min_pass_rate: float) -> None:
    """:func:`assert_eval_passed` on some of a report's cases (``eval_test`` leaves out those marked xfail)."""
    __tracebackhide__ = True
    if not cases:
        raise AssertionError("the evaluation graded no cases (an empty report cannot pass)")
    passed = sum(1 for c in cases if c.passed)
    rate = passed / len(cases)
    if rate + 1e-12 >= min_pass_rate:
        return
    failed = [c for c in cases if not c.passed]
    header = (
        f"Evaluation pass rate {rate * 100:.1f}% below threshold {min_pass_rate * 100:.1f}%. "
        f"Failed cases: {', '.join(one_line(c.eval_id) for c in failed)}"
    )
    raise AssertionError(clean_text(header + "\n\n" + "\n".join(explain_case(c) for c in failed)))


def assert_criterion_passed(
    result: EvalReport | EvalCaseResult, criterion: str, min_score: float | None = None
) -> None:
    """Fail unless criterion ``criterion`` (its reported name, e.g. ``tool_trajectory_avg_score``) passed.

    On one case: the criterion must have passed (or, with ``min_score``, scored at least that). On a report:
    in every case that ran it; with ``min_score``, its average over the report must reach ``min_score``
    (the reference's rule). A criterion that is absent fails with the names that are present.
    """
    __tracebackhide__ = True
    cases = _cases(result)
    found = [(c, r) for c in cases if (r := c.get_criterion_result(criterion)) is not None]
    if not found:
        present = sorted({r.criterion for c in cases for r in c.criterion_results})
        raise AssertionError(f"Criterion {criterion!r} not found in the results (present: {', '.join(present)})")
    scored = [(c, r) for c, r in found if not r.skipped]
    if min_score is not None and isinstance(result, EvalReport):
        average = sum(r.score for _, r in scored) / len(scored) if scored else 0.0
        if average + 1e-12 >= min_score:
            return
        header = f"Criterion {criterion!r} average score {average:.2f} below minimum {min_score:.2f}"
        failing = [(c, r) for c, r in scored if r.score < min_score]
    else:
        if min_score is None:
            failing = [(c, r) for c, r in scored if not r.passed]
        else:
            failing = [(c, r) for c, r in scored if r.score + 1e-12 < min_score]
        if not failing:
            return
        header = f"Criterion {criterion!r} failed in {len(failing)} of {len(scored)} case(s)"
    details = "\n".join(f"{one_line(c.eval_id)}:\n" + _indent(explain_criterion(r)) for c, r in failing)
    raise AssertionError(clean_text(header + ("\n\n" + details if details else "")))


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
