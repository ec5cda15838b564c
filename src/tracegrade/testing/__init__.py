"""Testing helpers: eval cases as pytest tests, assertions that explain failures, runs recorded per session.

The pytest plugin (:mod:`tracegrade.pytest_plugin`, loaded automatically when tracegrade is installed)
adds the fixtures ``tracegrade_collector``, ``tracegrade_app`` and ``tracegrade_store`` and the options
``--tracegrade-report``, ``--tracegrade-baseline`` and ``--tracegrade-num-runs``. Names load lazily: the
plugin imports :mod:`tracegrade.testing.recording` in every pytest run, and that must stay light.
"""

from __future__ import annotations

import importlib
from typing import Any

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tracegrade.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
