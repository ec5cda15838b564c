"""Expected failures: a case whose ``metadata["xfail"]`` is set must keep failing (pytest's strict xfail).

This module is the one place that decides it, for every way a case is graded:

* :func:`tracegrade.testing.parametrize_eval_cases` marks such a case ``pytest.mark.xfail(reason, strict=True)``
  with :func:`xfail_reason`, so pytest reports it ``XFAIL`` while it fails and fails the test once it passes;
* ``tracegrade run``, ``tracegrade grade --evalset`` and the reporters read the same mark from the case's result
  (a result carries its case's metadata) with :func:`case_expectation` and :func:`meets_expectation`: a marked case
  that fails or errors is an expected failure (reported with its reason, it does not fail the run), one that
  passes is an unexpected pass (it fails the run, as a strict xfail that passes fails pytest).

A result's ``passed`` and the summary's pass rate stay what the grading found: an expected failure is still a
failed case for comparisons, gates and trends. Only the run's verdict (:func:`run_succeeded`) honours the mark.
Standard library only: the models, the reporters and the pytest plugin import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracegrade.models.results import EvalCaseResult

__all__ = [
    "XFAILED",
    "XFAIL_KEY",
    "XPASSED",
    "case_expectation",
    "expectation_metadata",
    "meets_expectation",
    "run_succeeded",
    "xfail_problem",
    "xfail_reason",
]

#: ``EvalCase.metadata`` key of a case expected to fail; its value is the reason (``true`` gives none)
XFAIL_KEY = "xfail"
#: :func:`case_expectation` of a marked case that failed (or errored), as expected
XFAILED = "xfail"
#: :func:`case_expectation` of a marked case that passed: a failure of the run
XPASSED = "xpass"


def xfail_reason(metadata: Mapping[str, Any]) -> str | None:
    """The reason a case (or its result) is expected to fail: None when it is not marked (no ``xfail`` key, or
    ``false``, ``null``, ``""``), ``""`` for ``true``, the value as text otherwise."""
    value = metadata.get(XFAIL_KEY)
    if value is None or value is False or value == "":
        return None
    return "" if value is True else str(value)


def xfail_problem(metadata: Mapping[str, Any]) -> str | None:
    """What is wrong with a case's ``metadata.xfail`` (None when it is absent or of an allowed form): only a
    reason (text), ``true``/``false`` or ``null`` say whether the case is expected to fail. Anything else (a
    list, a number) would be read as a reason by its text, so ``0`` or ``[]`` would mark a case by accident."""
    value = metadata.get(XFAIL_KEY)
    if value is None or isinstance(value, (bool, str)):
        return None
    return (
        f"metadata.{XFAIL_KEY} must be a reason (a string), true, false or null, got {type(value).__name__} "
        f'{value!r:.60}; e.g. "{XFAIL_KEY}": "known bug #123" marks the case expected to fail'
    )


def expectation_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``{"xfail": value}`` when ``metadata`` (a case's) marks the case, else ``{}``: for a result built without
    the rest of its case's metadata (an internal error, traces not found), which must still carry the mark."""
    return {XFAIL_KEY: metadata[XFAIL_KEY]} if xfail_reason(metadata) is not None else {}


def case_expectation(result: EvalCaseResult) -> str | None:
    """:data:`XFAILED` or :data:`XPASSED` for the result of a case marked xfail, None for any other case."""
    if xfail_reason(result.metadata) is None:
        return None
    return XPASSED if result.passed else XFAILED


def meets_expectation(result: EvalCaseResult) -> bool:
    """True for a passed case and for a marked case that failed; False for a failed (or errored) case and for a
    marked case that passed."""
    return result.passed != (xfail_reason(result.metadata) is not None)


def run_succeeded(results: Iterable[EvalCaseResult]) -> bool:
    """The verdict of a run (``tracegrade run`` and ``grade`` exit 0 on it): it graded at least one case, and each
    case met its expectation."""
    graded = list(results)
    return bool(graded) and all(meets_expectation(r) for r in graded)
