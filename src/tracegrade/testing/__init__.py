"""Testing helpers: eval cases as pytest tests, assertions that explain failures, runs recorded per session.

The pytest plugin (:mod:`tracegrade.pytest_plugin`, loaded automatically when tracegrade is installed)
adds the fixtures ``tracegrade_collector``, ``tracegrade_app`` and ``tracegrade_store`` and the options
``--tracegrade-report``, ``--tracegrade-store``, ``--tracegrade-baseline`` (with ``--tracegrade-alpha``,
``--tracegrade-max-drop``, ``--tracegrade-strict``) and ``--tracegrade-num-runs``. Names load lazily: the
plugin imports :mod:`tracegrade.testing.recording` in every pytest run, and that must stay light.
"""

from __future__ import annotations

from tracegrade._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "assert_criterion_passed": "tracegrade.testing.assertions",
    "assert_eval_passed": "tracegrade.testing.assertions",
    "XFAIL_KEY": "tracegrade.testing.cases",
    "EvalTestCase": "tracegrade.testing.cases",
    "create_simple_eval_set": "tracegrade.testing.cases",
    "parametrize_eval_cases": "tracegrade.testing.cases",
    "explain_case": "tracegrade.testing.explain",
    "explain_criterion": "tracegrade.testing.explain",
    "explain_report": "tracegrade.testing.explain",
    "eval_test": "tracegrade.testing.running",
    "run_eval": "tracegrade.testing.running",
    "run_eval_sync": "tracegrade.testing.running",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
