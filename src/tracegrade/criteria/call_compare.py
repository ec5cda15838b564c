"""Comparing recorded tool calls with expected ones: the two questions the trajectory criterion asks most.

* :func:`calls_satisfy_in_place`: does every recorded call satisfy the expected call at its own position? The
  criterion asks this first for every graded case; a run that did what was expected answers yes, and then every
  match type pairs the two lists position by position with no per-pair bookkeeping.
* :func:`arguments_satisfy`: do a call's arguments satisfy an expected call's (the matcher's predicate)?

The ``plain_`` functions here are the Python answers; where tracegrade was installed compiled, the C extension
``_call_compare`` (their twin, which tests compare with these) answers instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracegrade.models.dataset import ToolCall
from tracegrade.models.json_values import arguments_satisfy as plain_arguments_satisfy

__all__ = [
    "COMPILED",
    "arguments_satisfy",
    "calls_satisfy_in_place",
    "plain_arguments_satisfy",
    "plain_calls_satisfy_in_place",
]


def plain_calls_satisfy_in_place(actual_calls: Sequence[ToolCall], expected_calls: Sequence[ToolCall]) -> bool:
    """As many calls on both sides, and each actual call has its arguments captured, the name of the expected call
    at its position and arguments that satisfy it (:func:`plain_arguments_satisfy`).

    A call whose arguments were not captured is never in place, even where nothing was expected of them: the
    criterion then says which tools lacked arguments it had to compare."""
    return len(actual_calls) == len(expected_calls) and all(
        actual.args_captured and actual.name == expected.name and plain_arguments_satisfy(actual.args, expected.args)
        for actual, expected in zip(actual_calls, expected_calls)
    )


try:
    from tracegrade.criteria._call_compare import arguments_satisfy, calls_satisfy_in_place
except ImportError:  # installed without a C compiler, or editable without TRACEGRADE_COMPILE=1
    arguments_satisfy, calls_satisfy_in_place = plain_arguments_satisfy, plain_calls_satisfy_in_place
    COMPILED = False
else:
    COMPILED = True
