"""Eval cases as pytest tests: one test per case, small eval sets written inline."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracegrade.models.dataset import EvalCase, EvalSet
from tracegrade.models.expectations import XFAIL_KEY, xfail_reason

__all__ = ["XFAIL_KEY", "EvalTestCase", "case_origin", "create_simple_eval_set", "parametrize_eval_cases"]


# id(case) -> (case, eval_set_id, eval_set_name): which set a parametrized case came from, so its
# one-case report keeps the set's id (the case is held too, so the id cannot be reused while listed)
_ORIGINS: dict[int, tuple[EvalCase, str, str]] = {}


@dataclass(frozen=True)
class EvalTestCase:
    """A case's identity as a test sees it (the reference's ``EvalTestCase``)."""

    eval_id: str
    name: str = ""
    description: str = ""

    def __repr__(self) -> str:
        return f"EvalTestCase({self.name or self.eval_id})"


def create_simple_eval_set(eval_set_id: str, cases: Sequence[tuple[str, ...]]) -> EvalSet:
    """An eval set from ``(query, expected_response[, name])`` tuples, with ids ``case_1``, ``case_2``, …

    The reference numbers these from ``case_0`` while its builder starts at ``case_1``; here both start at 1.
    """
    built = []
    for i, item in enumerate(cases, start=1):
        if len(item) not in (2, 3):
            raise ValueError(f"case {i}: expected (query, expected_response[, name]), got {len(item)} values")
        query, expected, *rest = item
        built.append(EvalCase.single_turn(f"case_{i}", query, expected, name=(rest[0] if rest else "") or f"Case {i}"))
    return EvalSet(eval_set_id=eval_set_id, name=eval_set_id, eval_cases=built)


def case_origin(case: EvalCase) -> tuple[str, str] | None:
    """``(eval_set_id, eval_set_name)`` of a case handed out by :func:`parametrize_eval_cases`."""
    origin = _ORIGINS.get(id(case))
    return (origin[1], origin[2]) if origin is not None and origin[0] is case else None


def _resolve(path: Path, caller_dir: Path | None) -> Path:
    """A relative path is looked up next to the calling test file first, then in the working directory; a
    collection failure lists the paths tried when neither holds it."""
    import pytest

    nearby = [] if path.is_absolute() or caller_dir is None else [caller_dir / path]
    # the test's own directory is often the working directory too: each path once
    candidates = list(dict.fromkeys([*nearby, path if path.is_absolute() else Path.cwd() / path]))
    for candidate in candidates:
        if candidate.exists():
            return candidate
    pytest.fail(f"eval set file not found: tried {', '.join(map(str, candidates))}", pytrace=False)


def _caller_dir() -> Path | None:
    """The directory of the file that called :func:`parametrize_eval_cases` (two frames up)."""
    filename = sys._getframe(2).f_code.co_filename
    return None if filename.startswith("<") else Path(filename).resolve().parent


def parametrize_eval_cases(path_or_evalset: str | Path | EvalSet, argname: str = "eval_case") -> Any:
    """``pytest.mark.parametrize`` over the cases of an eval set: one test per case, named by its id.

    A relative path is found next to the test file first (the reference resolves it against the working
    directory only, so a test broke when run from elsewhere), then in the working directory. A case whose
    ``metadata["xfail"]`` gives a reason is marked ``xfail(strict=True)``: it must keep failing, and the
    plugin's summary still shows why it failed. :mod:`tracegrade.models.expectations` decides which cases are
    marked, for ``tracegrade run`` and ``grade`` too.
    """
    import pytest

    from tracegrade.errors import TracegradeError
    from tracegrade.evaluation.checks import checked_eval_set
    from tracegrade.reporters.text import clean_text

    # refused as `tracegrade validate` refuses it: two cases of one id would be one test id, one result
    try:
        eval_set = checked_eval_set(
            path_or_evalset if isinstance(path_or_evalset, EvalSet) else _resolve(Path(path_or_evalset), _caller_dir())
        )
    except TracegradeError as exc:  # the file and every problem in it, not a traceback through tracegrade's loaders
        raise pytest.fail.Exception(str(exc), pytrace=False) from None
    params = []
    for case in eval_set.eval_cases:
        _ORIGINS[id(case)] = (case, eval_set.eval_set_id, eval_set.name)
        reason = xfail_reason(case.metadata)
        # pytest prints the reason as it is: shown as the reports show text, no raw control characters
        marks = [pytest.mark.xfail(reason=clean_text(reason), strict=True)] if reason is not None else []
        params.append(pytest.param(case, id=case.eval_id, marks=marks))
    return pytest.mark.parametrize(argname, params)
